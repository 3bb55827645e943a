export * from './redis';
export * from './fleet';
export * from './processes';
export * from './control-plane';
export * from './control-plane-api';
export * from './redis-server';
export * from './node-process';
export * from './errors';
