// @embedstack/cpu-backend: the native C++ CPU backend. Importing it registers
// backend 'cpu' (priority 10) in core's registry. Explicit exports only.
import { registerBackend } from '@embedstack/core';
import { cpuBackend } from './backend.js';

export { CpuBackend, cpuBackend, cpuLevel } from './backend.js';
export type { CpuBackendOptions, CpuLevelInfo } from './backend.js';
export { CPU_LEVELS, LEVEL_FLAGS, supportedCpuLevels, requestedCpuLevel } from './cpuLevel.js';
export type { CpuLevel, LevelRequest } from './cpuLevel.js';
export { CpuRawTable, ASYNC_MIN_WORK } from './cpuTable.js';
export { CpuRawCache, hasCacheFunctions } from './cpuCache.js';
export type { NativeCacheFunctions, NativeCacheHandle } from './cpuCache.js';
export { fromNative } from './errors.js';
export { NATIVE_ENV, nativeEnvProblem } from './nativeEnv.js';
export type { NativeEnvVariable } from './nativeEnv.js';
export { loadAddon, backendLoad, candidatePaths, prebuiltCandidates, addonCommands, explain, describePlatform, ADDON_FILE, CPU_PACKAGE } from './loader.js';
export type { AddonLoad, AddonAttempt, AddonCommands, BackendLoad, NativePackage } from './loader.js';
export { encodeTable, encodeOptimizer, encodePlan, TableField, OptimizerField, PlanField, TABLE_FIELDS, OPTIMIZER_FIELDS, PLAN_FIELDS } from './abi.js';
export type { EncodedTable } from './abi.js';
export type {
  NativeBinding,
  NativeTableFunctions,
  NativeTableHandle,
  NativeInfo,
  NativeFindResult,
  NativeExportResult,
} from './native.js';

registerBackend(cpuBackend);
