export { handlers as demoHandlers } from './handlers/demo';
export * from './loadgen/index';
export { bankSimulatorOptionsSchema } from './bank/bank-server';
export { seededRandom, hashSeed } from './bank/random';
