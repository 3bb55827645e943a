export * from './ledger';
export * from './keys';
export * from './errors';
export * from './redis';
export { loadScripts, LuaScripts, luaDir } from './script-loader';
export * from './override';
export * from './latency';
export * from './balancer-errors';
export * from './worker-reports';
