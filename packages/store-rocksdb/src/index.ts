// @embedstack/store-rocksdb: embedding rows in RocksDB (rocksdb-native), one column family per table. Explicit exports only.
export { RocksStore } from './store.js';
export type { RocksGetResult, RocksRows } from './store.js';
export { resolveRocksStoreOptions } from './options.js';
export type { RocksStoreOptions, ResolvedRocksStoreOptions } from './options.js';
