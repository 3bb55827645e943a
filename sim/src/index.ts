export { handlers as demoHandlers } from './handlers/demo';
export * from './loadgen/index';
