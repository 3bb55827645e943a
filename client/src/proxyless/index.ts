export { createProxylessClient, type ProxylessClient, type ProxylessClientDependencies, type ProxylessClientStats } from './proxyless-client';
export { proxylessOptionsSchema, parseProxylessOptions, type ProxylessClientOptions, type ProxylessClientConfig } from './options';
export type { SubmitRequest, SubmitResult, TaskPlacement, TaskPriority, ClientStats } from '../submit-types';
