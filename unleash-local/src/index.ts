export * from './unleash-server';
export * from './embedded-postgres';
export * from './test-unleash';
export * from './test-database';
