export * from './flag-names';
export * from './flag-client';
