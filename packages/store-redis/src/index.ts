// @embedstack/store-redis: embedding tables in Redis / Redis Cluster (TFRA's layout). Explicit exports only.
export { RedisStore } from './store.js';
export { RedisRawTable } from './rawTable.js';
export { decodeKeys } from './checked.js';
export type { RedisRawTableInit } from './rawTable.js';
export { createRedisBackend } from './backend.js';
export type { RedisBackend, RedisBackendOptions } from './backend.js';
export { resolveStoreOptions, resolveTableLayout } from './options.js';
export type {
  RedisMode,
  TfraConnectionMode,
  RedisHost,
  RedisRetryOptions,
  RedisStoreOptions,
  ResolvedRedisStoreOptions,
  RedisTableLayout,
  ResolvedRedisTableLayout,
} from './options.js';
export { RedisConnection } from './connection.js';
export type { BatchCommand, Reply, RedisArg } from './connection.js';
export { redisSlotsTab, CLUSTER_SLOTS } from './naming.js';
export { crc16, keySlot, sequentialHashTags, parseClusterNodes, keysPrefix, braceTag, bucketKeys, bucketOfLow32 } from './checked.js';
export type { SlotRange, BucketKeys } from './naming.js';
export { SCRIPTS } from './scripts.js';
