import { checkBoolean, checkInteger, checkName, checkOptions, invalidParameter, InvalidTypeError } from '@embedstack/core';

/**
 * Options of {@link RocksStore.open} (HugeCTR's `persistent_db` block, camelCase).
 */
export interface RocksStoreOptions {
  /** Folder of the database (created unless `readOnly`). Required. */
  path: string;
  /**
   * Tables (one column family each) opened with the database. Default: none (more via `addTables`).
   * A writable open also opens every table the database already holds (RocksDB requires it).
   */
  tables?: readonly string[];
  /** Open read-only: writes are refused with FAILED_PRECONDITION. Default false. */
  readOnly?: boolean;
  /** RocksDB background threads (flush/compaction), HugeCTR's `num_threads`. Default 16. */
  numThreads?: number;
  /** Keys per RocksDB multi-get / write batch, HugeCTR's `max_batch_size`. Default 10000. */
  maxBatchSize?: number;
  /** Milliseconds to wait for RocksDB to open before IO_ERROR. Default 10000. */
  openTimeoutMs?: number;
}

/** {@link RocksStoreOptions} with every default filled in, as {@link resolveRocksStoreOptions} returns them. */
export interface ResolvedRocksStoreOptions {
  /** Folder of the database. */
  path: string;
  /** Tables opened with the database, duplicates removed. */
  tables: string[];
  /** Opened read-only. */
  readOnly: boolean;
  /** RocksDB background threads, 1..256. */
  numThreads: number;
  /** Keys per multi-get / write batch, 1..2^24. */
  maxBatchSize: number;
  /** Milliseconds to wait for the open, 1..600000. */
  openTimeoutMs: number;
}

const KNOWN = ['path', 'tables', 'readOnly', 'numThreads', 'maxBatchSize', 'openTimeoutMs'] as const;

/** Validates and fills defaults. @throws InvalidTypeError / InvalidArgumentError naming the option */
export function resolveRocksStoreOptions(options: unknown): ResolvedRocksStoreOptions {
  const o = checkOptions<RocksStoreOptions>(options, KNOWN, 'options', { required: true });
  if (typeof o.path !== 'string' || o.path.length === 0) throw invalidParameter('options.path', 'a non-empty folder path', o.path, InvalidTypeError);
  const tables: string[] = [];
  if (o.tables !== undefined && o.tables !== null) {
    if (!Array.isArray(o.tables)) throw invalidParameter('options.tables', 'an array of table names', o.tables, InvalidTypeError);
    o.tables.forEach((t, i) => tables.push(checkName(t, `options.tables[${i}]`)));
  }
  return {
    path: o.path,
    tables: [...new Set(tables)],
    readOnly: checkBoolean(o.readOnly, 'options.readOnly', false),
    numThreads: checkInteger(o.numThreads, 'options.numThreads', { min: 1, max: 256, fallback: 16 }),
    maxBatchSize: checkInteger(o.maxBatchSize, 'options.maxBatchSize', { min: 1, max: 1 << 24, fallback: 10000 }),
    openTimeoutMs: checkInteger(o.openTimeoutMs, 'options.openTimeoutMs', { min: 1, max: 600000, fallback: 10000 }),
  };
}
