export {
  startBankSimulator,
  bankSimulatorOptionsSchema,
  bankSimulatorDefaults,
  type BankSimulator,
  type BankSimulatorOptions,
  type BankSimulatorStats,
} from './bank-server';
export { defaultBanks, bankProfileSchema, type BankProfile } from './banks';
export { clusterHeader, incidentKinds, incidentDefaults, type Incident, type IncidentInput, type IncidentKind, type IncidentFilter } from './incidents';
export { bankErrorCodes, type BankErrorCode } from './errors';
export * from './api';
