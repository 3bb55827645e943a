export * from './flag-names';
export * from './flag-client';
export * from './cli';
export * from './traffic-split';
