export { handlers as demoHandlers } from './handlers/demo';
export * from './loadgen/index';
export { findOnPath, startPrivateRedisServer } from './demo/redis';
