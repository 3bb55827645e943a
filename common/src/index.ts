export * from './errors';
export * from './config';
export * from './logger';
export * from './close';
export * from './cli';
export * from './metrics-server';
