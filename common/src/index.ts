export * from './errors';
export * from './config';
export * from './logger';
export * from './close';
export * from './cli';
export * from './cli-options';
export * from './metrics-server';
export * from './net';
