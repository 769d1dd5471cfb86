import { dirname, isAbsolute, resolve } from 'node:path';
import { AlreadyExistsError, checkKnownKeys, InvalidArgumentError, invalidParameter, InvalidTypeError } from '@embedstack/core';
import { checkArray, checkEnum, checkFlag, checkHpsName, checkInt, checkNum, checkSection } from './configKeys.js';
import { readJsoncFile } from './jsonc.js';

/** L2 kinds (HugeCTR `volatile_db.type`). */
export type VolatileDbType = 'hash_map' | 'parallel_hash_map' | 'redis_cluster' | 'disabled';
/** L3 kinds (HugeCTR `persistent_db.type`). */
export type PersistentDbType = 'rocks_db' | 'disabled';
/** Online update sources (HugeCTR `update_source.type`; `redis_stream` is ours). */
export type UpdateSourceType = 'kafka_message_queue' | 'redis_stream' | 'null';
/** L2 overflow policies (HugeCTR `overflow_policy`). */
export type OverflowPolicy = 'evict_random' | 'evict_least_used' | 'evict_oldest';
/** L1 kinds (`embedding_cache_type`). */
export type EmbeddingCacheType = 'dynamic' | 'static' | 'uvm';

/** The L2 block, resolved (HugeCTR's defaults). */
export interface VolatileDbConfig {
  /** L2 kind (HugeCTR `type`). Default 'hash_map'. */
  type: VolatileDbType;
  /** Redis nodes `host:port` (redis_cluster). Default ['127.0.0.1:7000']. */
  address: string[];
  /** Redis user (HugeCTR `user_name`). Default 'default'. */
  userName: string;
  /** Redis password (HugeCTR `password`). Default '' (none). */
  password: string;
  /** Partitions of the in-process map (by key hash). Default 16. */
  numPartitions: number;
  /** Keys per L2 request. Default 65536. */
  maxBatchSize: number;
  /** Rows per partition before the overflow policy runs. Default Infinity (HugeCTR: max size_t). */
  overflowMargin: number;
  /** What runs when a partition passes overflowMargin (HugeCTR `overflow_policy`). Default 'evict_random'. */
  overflowPolicy: OverflowPolicy;
  /** Fraction of overflowMargin kept after an overflow. Default 0.8. */
  overflowResolutionTarget: number;
  /** Fraction of each table's rows loaded into L2 at startup. Default 1.0. */
  initialCacheRate: number;
  /** Write rows found in L3 back into L2. Default false. */
  cacheMissedEmbeddings: boolean;
  /** Load the model files into L2 at startup (`initialize_after_startup`). Default true. */
  initializeAfterStartup: boolean;
  /**
   * Models whose online updates this level applies, as HugeCTR reads them: a message of tag
   * `hps_et.<model>.<table>` passes filter f when it matches `^hps_et\.(?:f)\..+$`. Default ['.+']
   * (every model); [] applies no updates to this level.
   */
  updateFilters: string[];
}

/** The L3 block, resolved. */
export interface PersistentDbConfig {
  /** L3 kind (HugeCTR `type`). Default 'disabled'. */
  type: PersistentDbType;
  /** Default `<tmpdir>/rocksdb` as HugeCTR's `/tmp/rocksdb`. */
  path: string;
  /** RocksDB background threads (HugeCTR `num_threads`). Default 16. */
  numThreads: number;
  /** Open the database read-only: nothing is written to L3 (HugeCTR `read_only`). Default false. */
  readOnly: boolean;
  /** Keys per L3 request (HugeCTR `max_batch_size`). Default 10000. */
  maxBatchSize: number;
  /** Write the model files into L3 at startup (`initialize_after_startup`; false serves the database as it is). Default true. */
  initializeAfterStartup: boolean;
  /** As {@link VolatileDbConfig.updateFilters}. Default ['.+']. */
  updateFilters: string[];
}

/** The online update source, resolved. */
export interface UpdateSourceConfig {
  /** Update source kind (HugeCTR `type`). Default 'null' (no online updates). */
  type: UpdateSourceType;
  /** Kafka brokers or Redis nodes `host:port`. */
  brokers: string[];
  /** Milliseconds a poll waits for messages. Default 500. */
  pollTimeoutMs: number;
  /** Messages per poll. Default 1000. */
  maxBatchSize: number;
  /** Milliseconds to wait after a failure. Default 50. */
  failureBackoffMs: number;
}

/** One model of the ps config, resolved (one entry per table in the arrays). */
export interface ModelConfig {
  /** Model name (HugeCTR `model`). */
  model: string;
  /** Table folders (absolute, resolved against the config file's folder). */
  sparseFiles: string[];
  /** Floats per row of each table (HugeCTR `embedding_vecsize_per_table`). Required. */
  embeddingVecsizePerTable: number[];
  /** Keys per sample of each table (HugeCTR `maxnum_catfeature_query_per_table_per_sample`); with maxBatchSize it caps a lookup's keys. Required. */
  maxnumCatfeatureQueryPerTablePerSample: number[];
  /** Value of every float of a row no level holds, per table (HugeCTR `default_value_for_each_table`). Default 0. */
  defaultValueForEachTable: number[];
  /** Devices holding an L1 replica (HugeCTR `deployed_device_list`), distinct ids. Required. */
  deployedDeviceList: number[];
  /** Samples per lookup (HugeCTR `max_batch_size`). Default 64. */
  maxBatchSize: number;
  /** Keep an L1 cache per device (HugeCTR `gpucache`). Default true. */
  gpucache: boolean;
  /** L1 capacity as a fraction of each table's rows, in [0, 1] (HugeCTR `gpucacheper`). Default 0.2. */
  gpucacheper: number;
  /** L1 misses are filled synchronously when a lookup's hit rate is below it, else asynchronously (the misses get the default value) (HugeCTR `hit_rate_threshold`). Default 0.9. */
  hitRateThreshold: number;
  /** Fraction of each table's rows prefilled into L1 with initEc (capped by gpucacheper), in [0, 1] (HugeCTR `cache_refresh_percentage_per_iteration`). Default 0. */
  cacheRefreshPercentagePerIteration: number;
  /** Table names (HugeCTR `embedding_table_names`). Default `sparse_embedding{i}`. */
  embeddingTableNames: string[];
  /** L1 kind (HugeCTR `embedding_cache_type`): 'dynamic', 'static' or 'uvm' (whole table in L1). Default 'dynamic' ('static' with useStaticTable). */
  embeddingCacheType: EmbeddingCacheType;
  /** HugeCTR `use_static_table`: the whole table in L1. Default false. */
  useStaticTable: boolean;
  /** HugeCTR `num_of_worker_buffer_in_pool`; accepted, not used here. Default 1. */
  numOfWorkerBufferInPool: number;
  /** HugeCTR `thread_pool_size`; accepted, not used here. Default 16. */
  threadPoolSize: number;
  /** Prefill L1 at startup (HugeCTR `init_ec`). Default true. */
  initEc: boolean;
  /** Seconds before the first periodic cache refresh (HugeCTR `refresh_delay`). Default 0. */
  refreshDelay: number;
  /** Seconds between cache refreshes, 0 = off (HugeCTR `refresh_interval`). Default 0. */
  refreshInterval: number;
}

/** The whole ps config, resolved. */
export interface PsConfig {
  /** int64 keys (true) or uint32 keys in the model files (HugeCTR `supportlonglong`). Required. */
  supportlonglong: boolean;
  /** One entry per model (HugeCTR `models`). */
  models: ModelConfig[];
  /** L2 (HugeCTR `volatile_db`). */
  volatileDb: VolatileDbConfig;
  /** L3 (HugeCTR `persistent_db`). */
  persistentDb: PersistentDbConfig;
  /** Online updates (HugeCTR `update_source`). */
  updateSource: UpdateSourceConfig;
}

const GLOBAL_KEYS = ['supportlonglong', 'models', 'volatile_db', 'persistent_db', 'update_source'] as const;
const MODEL_KEYS = [
  'model', 'sparse_files', 'dense_file', 'network_file', 'embedding_vecsize_per_table',
  'maxnum_catfeature_query_per_table_per_sample', 'maxnum_des_feature_per_sample', 'default_value_for_each_table',
  'deployed_device_list', 'max_batch_size', 'gpucache', 'gpucacheper', 'hit_rate_threshold',
  'cache_refresh_percentage_per_iteration', 'embedding_table_names', 'embedding_cache_type', 'use_static_table',
  'num_of_worker_buffer_in_pool', 'num_of_refresher_buffer_in_pool', 'thread_pool_size', 'init_ec',
  'refresh_delay', 'refresh_interval', 'label_dim', 'slot_num', 'use_context_stream', 'use_hctr_cache_implementation',
  'fuse_embedding_table',
] as const;
const VOLATILE_KEYS = [
  'type', 'address', 'user_name', 'password', 'num_partitions', 'max_batch_size', 'max_get_batch_size',
  'max_set_batch_size', 'overflow_margin', 'overflow_policy', 'overflow_resolution_target', 'initial_cache_rate',
  'cache_missed_embeddings', 'update_filters', 'num_node_connections', 'refresh_time_after_fetch', 'algorithm',
  'allocation_rate', 'initialize_after_startup', 'shared_memory_size', 'shared_memory_name', 'shared_memory_auto_remove',
  'enable_tls', 'tls_ca_certificate', 'tls_client_certificate', 'tls_client_key', 'tls_server_name_identification',
] as const;
const PERSISTENT_KEYS = ['type', 'path', 'num_threads', 'read_only', 'max_batch_size', 'max_get_batch_size', 'max_set_batch_size', 'update_filters', 'initialize_after_startup'] as const;
const SOURCE_KEYS = [
  'type', 'brokers', 'receive_buffer_size', 'max_receive_buffer_size', 'poll_timeout_ms', 'max_batch_size', 'failure_backoff_ms',
  'max_commit_interval', 'metadata_refresh_interval_ms',
] as const;

/** HugeCTR's spellings (and aliases) of the kinds. */
const VOLATILE_TYPES: Record<string, VolatileDbType> = {
  hash_map: 'hash_map', hashmap: 'hash_map', parallel_hash_map: 'parallel_hash_map', parallel_hashmap: 'parallel_hash_map',
  redis_cluster: 'redis_cluster', redis: 'redis_cluster', rediscluster: 'redis_cluster', disabled: 'disabled', disable: 'disabled', none: 'disabled',
};
const PERSISTENT_TYPES: Record<string, PersistentDbType> = {
  rocks_db: 'rocks_db', rocksdb: 'rocks_db', rocks: 'rocks_db', disabled: 'disabled', disable: 'disabled', none: 'disabled',
};
const SOURCE_TYPES: Record<string, UpdateSourceType> = {
  kafka_message_queue: 'kafka_message_queue', kafka: 'kafka_message_queue', redis_stream: 'redis_stream', null: 'null', none: 'null', disabled: 'null',
};
const OVERFLOW: Record<string, OverflowPolicy> = { evict_random: 'evict_random', evict_least_used: 'evict_least_used', evict_oldest: 'evict_oldest' };
const CACHE_TYPES: Record<string, EmbeddingCacheType> = { dynamic: 'dynamic', static: 'static', uvm: 'uvm' };

function addresses(value: unknown, where: string, fallback: string): string[] {
  const v = value === undefined || value === null ? fallback : value;
  const list = Array.isArray(v) ? v : typeof v === 'string' ? v.split(',') : null;
  if (!list) throw invalidParameter(where, '"host:port[,host:port...]"', value, InvalidTypeError);
  return list.map((a, i) => {
    if (typeof a !== 'string' || !/^[^\s:,]+:\d{1,5}$/.test(a.trim())) throw invalidParameter(`${where}[${i}]`, '"host:port"', a);
    return a.trim();
  });
}

/** Whether HugeCTR's update filters let a message of `model`'s table through (any filter matching). */
export function updateFilterPasses(filters: readonly RegExp[], model: string, table: string): boolean {
  const tag = `hps_et.${model}.${table}`;
  return filters.some((f) => f.test(tag));
}

/** HugeCTR's update filters as regular expressions over a message's tag: `^hps_et\.(?:f)\..+$`. */
export function compileUpdateFilters(filters: readonly string[]): RegExp[] {
  return filters.map((f) => new RegExp(`^hps_et\\.(?:${f})\\..+$`));
}

function filters(value: unknown, where: string): string[] {
  if (value === undefined || value === null) return ['.+'];
  if (Array.isArray(value) && value.length === 0) return [];
  const list = checkArray(value, where);
  return list.map((f, i) => {
    if (typeof f !== 'string') throw invalidParameter(`${where}[${i}]`, 'a regular expression string', f, InvalidTypeError);
    try {
      compileUpdateFilters([f]);
    } catch {
      throw invalidParameter(`${where}[${i}]`, 'a valid regular expression', f);
    }
    return f;
  });
}

function resolveVolatile(value: unknown): VolatileDbConfig {
  const o = checkSection(value ?? {}, VOLATILE_KEYS, 'volatile_db');
  const margin = o.overflow_margin;
  return {
    type: checkEnum(o.type, 'volatile_db.type', VOLATILE_TYPES, 'hash_map'),
    address: addresses(o.address, 'volatile_db.address', '127.0.0.1:7000'),
    userName: typeof o.user_name === 'string' ? o.user_name : o.user_name == null ? 'default' : (() => { throw invalidParameter('volatile_db.user_name', 'a string', o.user_name, InvalidTypeError); })(),
    password: typeof o.password === 'string' ? o.password : o.password == null ? '' : (() => { throw invalidParameter('volatile_db.password', 'a string', o.password, InvalidTypeError); })(),
    numPartitions: checkInt(o.num_partitions, 'volatile_db.num_partitions', 1, 1024, 16),
    maxBatchSize: checkInt(o.max_batch_size ?? o.max_get_batch_size, 'volatile_db.max_batch_size', 1, 1 << 24, 65536),
    overflowMargin: margin === undefined || margin === null ? Infinity : checkInt(margin, 'volatile_db.overflow_margin', 1, Number.MAX_SAFE_INTEGER),
    overflowPolicy: checkEnum(o.overflow_policy, 'volatile_db.overflow_policy', OVERFLOW, 'evict_random'),
    overflowResolutionTarget: checkNum(o.overflow_resolution_target, 'volatile_db.overflow_resolution_target', 0, 1, 0.8),
    initialCacheRate: checkNum(o.initial_cache_rate, 'volatile_db.initial_cache_rate', 0, 1, 1),
    cacheMissedEmbeddings: checkFlag(o.cache_missed_embeddings, 'volatile_db.cache_missed_embeddings', false),
    initializeAfterStartup: checkFlag(o.initialize_after_startup, 'volatile_db.initialize_after_startup', true),
    updateFilters: filters(o.update_filters, 'volatile_db.update_filters'),
  };
}

function resolvePersistent(value: unknown, base: string): PersistentDbConfig {
  const o = checkSection(value ?? {}, PERSISTENT_KEYS, 'persistent_db');
  const path = o.path === undefined || o.path === null ? '/tmp/rocksdb' : o.path;
  if (typeof path !== 'string' || path.length === 0) throw invalidParameter('persistent_db.path', 'a folder path', o.path, InvalidTypeError);
  return {
    type: checkEnum(o.type, 'persistent_db.type', PERSISTENT_TYPES, 'disabled'),
    path: isAbsolute(path) ? path : resolve(base, path),
    numThreads: checkInt(o.num_threads, 'persistent_db.num_threads', 1, 256, 16),
    readOnly: checkFlag(o.read_only, 'persistent_db.read_only', false),
    maxBatchSize: checkInt(o.max_batch_size ?? o.max_get_batch_size, 'persistent_db.max_batch_size', 1, 1 << 24, 10000),
    initializeAfterStartup: checkFlag(o.initialize_after_startup, 'persistent_db.initialize_after_startup', true),
    updateFilters: filters(o.update_filters, 'persistent_db.update_filters'),
  };
}

function resolveSource(value: unknown): UpdateSourceConfig {
  const o = checkSection(value ?? {}, SOURCE_KEYS, 'update_source');
  return {
    type: checkEnum(o.type, 'update_source.type', SOURCE_TYPES, 'null'),
    brokers: addresses(o.brokers, 'update_source.brokers', '127.0.0.1:9092'),
    pollTimeoutMs: checkInt(o.poll_timeout_ms, 'update_source.poll_timeout_ms', 1, 3_600_000, 500),
    maxBatchSize: checkInt(o.max_batch_size, 'update_source.max_batch_size', 1, 1 << 20, 1000),
    failureBackoffMs: checkInt(o.failure_backoff_ms, 'update_source.failure_backoff_ms', 0, 3_600_000, 50),
  };
}

function perTable(value: unknown, where: string, tables: number, check: (v: unknown, w: string) => number, pad?: number): number[] {
  const list = checkArray(value, where, true);
  if (list.length > tables || (pad === undefined && list.length !== tables && list.length !== 1)) {
    throw new InvalidArgumentError(`Expected ${where} to have one entry per table (${tables}) but received ${list.length}`, { argument: where });
  }
  const out = list.map((v, i) => check(v, `${where}[${i}]`));
  while (out.length < tables) out.push(pad ?? out[0]!);
  return out;
}

/** Resolves one model entry (defaults of HugeCTR's parser). */
export function resolveModelConfig(value: unknown, base: string = process.cwd(), where = 'models[0]'): ModelConfig {
  if (typeof base !== 'string') throw invalidParameter('base', 'a folder path', base, InvalidTypeError);
  if (typeof where !== 'string') throw invalidParameter('where', 'a string', where, InvalidTypeError);
  const o = checkSection(value, MODEL_KEYS, where);
  const model = checkHpsName(o.model, `${where}.model`);
  const sparse = checkArray(o.sparse_files, `${where}.sparse_files`, true).map((f, i) => {
    if (typeof f !== 'string' || f.length === 0) throw invalidParameter(`${where}.sparse_files[${i}]`, 'a folder path', f, InvalidTypeError);
    return isAbsolute(f) ? f : resolve(base, f);
  });
  const vec = checkArray(o.embedding_vecsize_per_table, `${where}.embedding_vecsize_per_table`, true).map((v, i) => checkInt(v, `${where}.embedding_vecsize_per_table[${i}]`, 1, 1 << 16));
  const tables = vec.length;
  if (sparse.length !== tables) {
    throw new InvalidArgumentError(`Expected ${where}.sparse_files to have one folder per table (${tables}, the length of embedding_vecsize_per_table) but received ${sparse.length}`, { argument: `${where}.sparse_files` });
  }
  const maxnum = perTable(o.maxnum_catfeature_query_per_table_per_sample, `${where}.maxnum_catfeature_query_per_table_per_sample`, tables, (v, w) => checkInt(v, w, 1, 1 << 24));
  const defaults = perTable(o.default_value_for_each_table, `${where}.default_value_for_each_table`, tables, (v, w) => checkNum(v, w, -3.4e38, 3.4e38), 0);
  const devices = checkArray(o.deployed_device_list, `${where}.deployed_device_list`, true).map((d, i) => checkInt(d, `${where}.deployed_device_list[${i}]`, 0, 1023));
  if (new Set(devices).size !== devices.length) throw invalidParameter(`${where}.deployed_device_list`, 'distinct device ids', devices);
  let names: string[];
  if (o.embedding_table_names === undefined || o.embedding_table_names === null) {
    names = Array.from({ length: tables }, (_, i) => `sparse_embedding${i}`);
  } else {
    names = checkArray(o.embedding_table_names, `${where}.embedding_table_names`, true).map((n, i) => checkHpsName(n, `${where}.embedding_table_names[${i}]`));
    if (names.length !== tables) throw new InvalidArgumentError(`Expected ${where}.embedding_table_names to name every table (${tables}) but received ${names.length}`, { argument: `${where}.embedding_table_names` });
    if (new Set(names).size !== names.length) throw new AlreadyExistsError(`Expected ${where}.embedding_table_names to be distinct but received ${JSON.stringify(names)}`, { argument: `${where}.embedding_table_names` });
  }
  const useStatic = checkFlag(o.use_static_table, `${where}.use_static_table`, false);
  return {
    model,
    sparseFiles: sparse,
    embeddingVecsizePerTable: vec,
    maxnumCatfeatureQueryPerTablePerSample: maxnum,
    defaultValueForEachTable: defaults,
    deployedDeviceList: devices,
    maxBatchSize: checkInt(o.max_batch_size, `${where}.max_batch_size`, 1, 1 << 24, 64),
    gpucache: checkFlag(o.gpucache, `${where}.gpucache`, true),
    gpucacheper: checkNum(o.gpucacheper, `${where}.gpucacheper`, 0, 1, 0.2),
    hitRateThreshold: checkNum(o.hit_rate_threshold, `${where}.hit_rate_threshold`, 0, 1e9, 0.9),
    cacheRefreshPercentagePerIteration: checkNum(o.cache_refresh_percentage_per_iteration, `${where}.cache_refresh_percentage_per_iteration`, 0, 1, 0),
    embeddingTableNames: names,
    embeddingCacheType: useStatic ? 'static' : checkEnum(o.embedding_cache_type, `${where}.embedding_cache_type`, CACHE_TYPES, 'dynamic'),
    useStaticTable: useStatic,
    numOfWorkerBufferInPool: checkInt(o.num_of_worker_buffer_in_pool, `${where}.num_of_worker_buffer_in_pool`, 1, 1024, 1),
    threadPoolSize: checkInt(o.thread_pool_size, `${where}.thread_pool_size`, 1, 1024, 16),
    initEc: checkFlag(o.init_ec, `${where}.init_ec`, true),
    refreshDelay: checkNum(o.refresh_delay, `${where}.refresh_delay`, 0, 1e9, 0),
    refreshInterval: checkNum(o.refresh_interval, `${where}.refresh_interval`, 0, 1e9, 0),
  };
}

/**
 * Resolves a ps config object (HugeCTR's JSON, unchanged) with HugeCTR's defaults;
 * relative paths resolve against `base` (the config file's folder, else the cwd).
 * @throws InvalidArgumentError / InvalidTypeError naming the key (unknown keys name the nearest known one)
 */
export function resolvePsConfig(value: unknown, base: string = process.cwd()): PsConfig {
  if (typeof base !== 'string') throw invalidParameter('base', 'a folder path', base, InvalidTypeError);
  const o = checkSection(value, GLOBAL_KEYS, 'psConfig');
  if (o.supportlonglong === undefined) throw invalidParameter('psConfig.supportlonglong', 'a boolean (required)', undefined, InvalidTypeError);
  const models = checkArray(o.models, 'psConfig.models').map((m, i) => resolveModelConfig(m, base, `models[${i}]`));
  const seen = new Set<string>();
  for (const m of models) {
    if (seen.has(m.model)) throw new AlreadyExistsError(`Expected model names to be distinct but ${JSON.stringify(m.model)} appears twice in psConfig.models`, { argument: 'psConfig.models' });
    seen.add(m.model);
  }
  return {
    supportlonglong: checkFlag(o.supportlonglong, 'psConfig.supportlonglong', true),
    models,
    volatileDb: resolveVolatile(o.volatile_db),
    persistentDb: resolvePersistent(o.persistent_db, base),
    updateSource: resolveSource(o.update_source),
  };
}

/**
 * The config of `{ psConfigFile }` or `{ psConfig }` (exactly one).
 * @throws InvalidArgumentError when both or neither are given, and resolvePsConfig's errors
 */
export async function loadPsConfig(options: { psConfigFile?: unknown; psConfig?: unknown }, where = 'options'): Promise<PsConfig> {
  if (typeof where !== 'string') throw invalidParameter('where', 'a string', where, InvalidTypeError);
  if (options === null || typeof options !== 'object') throw invalidParameter(where, 'an object with psConfigFile or psConfig', options, InvalidTypeError);
  checkKnownKeys(options, ['psConfigFile', 'psConfig'], where); // a misspelt psConfig would read as "neither" or be dropped
  const file = options.psConfigFile;
  const obj = options.psConfig;
  if ((file === undefined || file === null) === (obj === undefined || obj === null)) {
    throw new InvalidArgumentError(`Expected ${where} to have exactly one of psConfigFile (a path) or psConfig (an object) but received ${file == null ? 'neither' : 'both'}`, { argument: where });
  }
  if (obj !== undefined && obj !== null) return resolvePsConfig(obj);
  if (typeof file !== 'string' || file.length === 0) throw invalidParameter(`${where}.psConfigFile`, 'a path to a ps.json file', file, InvalidTypeError);
  return resolvePsConfig(await readJsoncFile(file), dirname(resolve(file)));
}
