// @embedstack/hps: NVIDIA HugeCTR's Hierarchical Parameter Server for Node.js. Explicit exports only.
export { HPS } from './server.js';
export type { HpsOptions, LookupOptions, CacheInfo, TableInfo, SharedL2Info } from './server.js';
export type { SharedL2Options } from './sharedL2.js';
export { init, shutdown } from './init.js';
export type { InitOptions } from './init.js';
export { LookupLayer, SparseLookupLayer } from './layers.js';
export type { LookupLayerOptions } from './layers.js';
export { resolvePsConfig, resolveModelConfig, loadPsConfig } from './config.js';
export type {
  PsConfig,
  ModelConfig,
  VolatileDbConfig,
  PersistentDbConfig,
  UpdateSourceConfig,
  VolatileDbType,
  PersistentDbType,
  UpdateSourceType,
  OverflowPolicy,
  EmbeddingCacheType,
} from './config.js';
export { stripJsonComments } from './jsonc.js';
export { updateMessageFields } from './updateSource.js';
export { exportModel } from './exportModel.js';
export type { ExportModelOptions, ExportableTable } from './exportModel.js';
export type { LoadProgress } from './model.js';
export { L1_WAYS } from './embeddingCache.js';
export type { HpsStats, LevelStats } from './stats.js';
