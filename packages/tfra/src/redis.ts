import { readFileSync } from 'node:fs';
import {
  EmbeddingTable,
  FailedPreconditionError,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  IOError,
  resolveTableOptions,
  UnsupportedError,
} from '@embedstack/core';
import type { RedisRawTable, RedisStore, RedisStoreOptions, RedisTableLayout } from '@embedstack/store-redis';
import { KVCreator, type ShardTableSpec, shardTableOptions } from './kvCreators.js';
import { lateRedisRawTable, loadedStoreRedis, requireStoreRedisInstalled, type StoreRedisModule } from './storeRedis.js';

/**
 * TFRA's Redis configuration, field names as in TFRA's JSON file. Defaults are
 * TFRA's `default_redis_params`, except `redis_connection_mode` (2 standalone:
 * sentinel, TFRA's default, is not supported).
 */
export interface RedisTableConfigFields {
  /** 0 cluster, 1 sentinel (UNSUPPORTED), 2 standalone. Default 2. */
  redis_connection_mode?: 0 | 1 | 2;
  /** Sentinel master name (sentinel is not supported). Default 'master'. */
  redis_master_name?: string;
  /** Hosts (cluster: seeds). Default ['127.0.0.1']. */
  redis_host_ip?: string[];
  /** Ports, one per host (a list as long as redis_host_ip, else INVALID_ARGUMENT), or one number for every host. Default 6379 for every host. */
  redis_host_port?: number[] | number;
  /** ACL user. Default 'default'. */
  redis_user?: string;
  /** Default '' (none). */
  redis_password?: string;
  /** Standalone database. Default 0. */
  redis_db?: number;
  /** Accepted; reads always go to masters here. */
  redis_read_access_slave?: boolean;
  /** Accepted; unused. */
  redis_connect_keep_alive?: boolean;
  /** Connect timeout, ms. Default: the store's (5000) unless given. */
  redis_connect_timeout?: number;
  /** Per-command timeout, ms. Default: the store's (10000) unless given. */
  redis_socket_timeout?: number;
  /** Accepted; ioredis multiplexes one connection per node. */
  redis_conn_pool_size?: number;
  /** Accepted; unused. Default 100000000. */
  redis_wait_timeout?: number;
  /** Accepted; unused. Default 100. */
  redis_connection_lifetime?: number;
  /** Sentinel user (sentinel is not supported). Default 'default'. */
  redis_sentinel_user?: string;
  /** Sentinel password (sentinel is not supported). Default ''. */
  redis_sentinel_password?: string;
  /** Sentinel connect timeout, ms (sentinel is not supported). Default 1000. */
  redis_sentinel_connect_timeout?: number;
  /** Sentinel socket timeout, ms (sentinel is not supported). Default 1000. */
  redis_sentinel_socket_timeout?: number;
  /** Buckets of the model imported from `model_tag_import`; -1 = storage_slice. Default -1. */
  storage_slice_import?: number;
  /** Buckets (Redis hashes) per table. Default 1. */
  storage_slice?: number;
  /** Not supported when true (buckets are chosen by the key's low 32 bits, TFRA's default). */
  using_hash_storage_slice?: boolean;
  /** Keys per command per bucket. Default 1024. */
  keys_sending_size?: number;
  /** Prefix = raw MD5 of `${model_tag}:${embedding_name}`. Default false. */
  using_md5_prefix_name?: boolean;
  /** Spread computed hash tags over all 16384 slots even in cluster mode. Default false. */
  redis_hash_tags_hypodispersion?: boolean;
  /** Model tag of a previous run, copied into `model_tag_runtime` when that is empty. Default 'test'. */
  model_tag_import?: string;
  /** One hash tag per imported bucket, e.g. ['{3560}']. Default []: computed. */
  redis_hash_tags_import?: string[];
  /** Model tag of this run. Default 'test'. */
  model_tag_runtime?: string;
  /** One hash tag per bucket of this run, e.g. ['{3560}', '{22179}']. Default []: computed. */
  redis_hash_tags_runtime?: string[];
  /** After an import, the imported buckets expire after this many seconds (< 0: never). Default 604800. */
  expire_model_tag_in_seconds?: number;
  /**
   * 0: saveToFileSystem writes the rows; 1 (TFRA: Redis rdb dumps in
   * model_lib_abs_dir): rows are written like 0; 2: rows stay in Redis only.
   * Default 1.
   */
  table_store_mode?: 0 | 1 | 2;
  /** Accepted; unused (see table_store_mode). */
  model_lib_abs_dir?: string;
}

const DEFAULTS: Required<RedisTableConfigFields> = {
  redis_connection_mode: 2,
  redis_master_name: 'master',
  redis_host_ip: ['127.0.0.1'],
  redis_host_port: [6379],
  redis_user: 'default',
  redis_password: '',
  redis_db: 0,
  redis_read_access_slave: false,
  redis_connect_keep_alive: false,
  redis_connect_timeout: 1000,
  redis_socket_timeout: 1000,
  redis_conn_pool_size: 20,
  redis_wait_timeout: 100000000,
  redis_connection_lifetime: 100,
  redis_sentinel_user: 'default',
  redis_sentinel_password: '',
  redis_sentinel_connect_timeout: 1000,
  redis_sentinel_socket_timeout: 1000,
  storage_slice_import: -1,
  storage_slice: 1,
  using_hash_storage_slice: false,
  keys_sending_size: 1024,
  using_md5_prefix_name: false,
  redis_hash_tags_hypodispersion: false,
  model_tag_import: 'test',
  redis_hash_tags_import: [],
  model_tag_runtime: 'test',
  redis_hash_tags_runtime: [],
  expire_model_tag_in_seconds: 604800,
  table_store_mode: 1,
  model_lib_abs_dir: '/tmp/',
};

const FIELDS = Object.keys(DEFAULTS) as (keyof RedisTableConfigFields)[];
const SOURCE_FIELDS = ['redis_config_abs_dir', 'redis_config_abs_dir_env'];

function readJson(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new IOError(`Could not read the Redis config file "${path}": ${(cause as Error).message}`, { cause, argument: 'redis_config_abs_dir' });
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
    return v as Record<string, unknown>;
  } catch (cause) {
    throw new InvalidArgumentError(`Expected the Redis config file "${path}" to hold a JSON object but it does not: ${(cause as Error).message}`, {
      cause,
      argument: 'redis_config_abs_dir',
    });
  }
}

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

/**
 * TFRA's `RedisTableConfig`: the Redis connection and table layout, from a JSON
 * file path, `{ redis_config_abs_dir }` / `{ redis_config_abs_dir_env }` (TFRA's
 * constructor arguments), or an object of TFRA's fields. Every field is a
 * read-only property of the same name. Fields TFRA does not know are reported
 * (InvalidArgumentError naming them).
 */
export class RedisTableConfig implements Readonly<Required<RedisTableConfigFields>> {
  declare readonly redis_connection_mode: 0 | 1 | 2;
  declare readonly redis_master_name: string;
  declare readonly redis_host_ip: string[];
  declare readonly redis_host_port: number[];
  declare readonly redis_user: string;
  declare readonly redis_password: string;
  declare readonly redis_db: number;
  declare readonly redis_read_access_slave: boolean;
  declare readonly redis_connect_keep_alive: boolean;
  declare readonly redis_connect_timeout: number;
  declare readonly redis_socket_timeout: number;
  declare readonly redis_conn_pool_size: number;
  declare readonly redis_wait_timeout: number;
  declare readonly redis_connection_lifetime: number;
  declare readonly redis_sentinel_user: string;
  declare readonly redis_sentinel_password: string;
  declare readonly redis_sentinel_connect_timeout: number;
  declare readonly redis_sentinel_socket_timeout: number;
  declare readonly storage_slice_import: number;
  declare readonly storage_slice: number;
  declare readonly using_hash_storage_slice: boolean;
  declare readonly keys_sending_size: number;
  declare readonly using_md5_prefix_name: boolean;
  declare readonly redis_hash_tags_hypodispersion: boolean;
  declare readonly model_tag_import: string;
  declare readonly redis_hash_tags_import: string[];
  declare readonly model_tag_runtime: string;
  declare readonly redis_hash_tags_runtime: string[];
  declare readonly expire_model_tag_in_seconds: number;
  declare readonly table_store_mode: 0 | 1 | 2;
  declare readonly model_lib_abs_dir: string;
  /** The JSON file the fields came from, if any. */
  readonly redis_config_abs_dir: string | null;
  /** Fields given explicitly (the others hold defaults). */
  readonly explicitFields: ReadonlySet<string>;

  /** @throws InvalidArgumentError (unknown or bad field, naming it) / InvalidTypeError / IOError (unreadable file) */
  constructor(source: RedisTableConfigFields | { redis_config_abs_dir?: string | null; redis_config_abs_dir_env?: string | null } | string = {}) {
    let fields: Record<string, unknown>;
    let path: string | null = null;
    if (typeof source === 'string') {
      path = source;
    } else if (typeof source === 'object' && source !== null && !Array.isArray(source)) {
      const o = source as Record<string, unknown>;
      const env = o.redis_config_abs_dir_env;
      if (env !== undefined && env !== null) {
        if (typeof env !== 'string') throw invalidParameter('redis_config_abs_dir_env', 'an environment variable name', env, InvalidTypeError);
        const p = process.env[env];
        if (!p) throw invalidParameter('redis_config_abs_dir_env', 'the name of a set environment variable holding a config file path', env);
        path = p;
      } else if (o.redis_config_abs_dir !== undefined && o.redis_config_abs_dir !== null) {
        if (typeof o.redis_config_abs_dir !== 'string') throw invalidParameter('redis_config_abs_dir', 'a file path', o.redis_config_abs_dir, InvalidTypeError);
        path = o.redis_config_abs_dir;
      }
    } else {
      throw invalidParameter('config', 'a JSON file path or an object of TFRA Redis fields', source, InvalidTypeError);
    }
    if (path !== null) {
      const extra = typeof source === 'object' ? Object.keys(source).filter((k) => !SOURCE_FIELDS.includes(k)) : [];
      if (extra.length > 0) throw invalidParameter('config', 'either a config file or fields, not both', extra.join(', '));
      fields = readJson(path);
    } else {
      fields = { ...(source as Record<string, unknown>) };
      for (const k of SOURCE_FIELDS) delete fields[k];
    }
    const unknown = Object.keys(fields).filter((k) => !(FIELDS as string[]).includes(k));
    if (unknown.length > 0) {
      throw new InvalidArgumentError(
        `Expected only TFRA Redis config fields but received unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')}` +
          (path ? ` in "${path}"` : '') +
          ` (the known fields: ${FIELDS.join(', ')})`,
        { argument: `config.${unknown[0]}` },
      );
    }
    const merged: Record<string, unknown> = { ...DEFAULTS, ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) };
    // One port for every host: a single number, or the default when no port is given. Two lists must pair up (validate).
    const ips = merged.redis_host_ip;
    const portGiven = fields.redis_host_port !== undefined;
    if (Array.isArray(ips) && (typeof merged.redis_host_port === 'number' || !portGiven)) {
      const port = typeof merged.redis_host_port === 'number' ? merged.redis_host_port : (DEFAULTS.redis_host_port as number[])[0];
      merged.redis_host_port = ips.map(() => port);
    } else if (typeof merged.redis_host_port === 'number') merged.redis_host_port = [merged.redis_host_port];
    validate(merged);
    for (const k of FIELDS) Object.defineProperty(this, k, { value: merged[k], enumerable: true, writable: false });
    this.redis_config_abs_dir = path;
    this.explicitFields = new Set(Object.keys(fields).filter((k) => fields[k] !== undefined));
    Object.freeze(this);
  }

  /** The store options (connection) these fields describe. @throws UnsupportedError for sentinel mode */
  storeOptions(): RedisStoreOptions {
    const mode = this.redis_connection_mode;
    if (mode === 1) {
      throw new UnsupportedError('Expected redis_connection_mode to be 0 (cluster) or 2 (standalone) but received 1 (sentinel): Redis Sentinel is not supported', {
        argument: 'redis_connection_mode',
      });
    }
    const hosts = this.redis_host_ip.map((host, i) => ({ host, port: this.redis_host_port[i]! }));
    const o: RedisStoreOptions = {
      mode: mode === 0 ? 'cluster' : 'standalone',
      hosts: mode === 0 ? hosts : hosts.slice(0, 1),
      keysSendingSize: this.keys_sending_size,
    };
    if (this.redis_user !== 'default') o.username = this.redis_user;
    if (this.redis_password !== '') o.password = this.redis_password;
    if (mode === 2) o.db = this.redis_db;
    if (this.explicitFields.has('redis_connect_timeout')) o.connectTimeoutMs = this.redis_connect_timeout;
    if (this.explicitFields.has('redis_socket_timeout')) o.commandTimeoutMs = this.redis_socket_timeout;
    return o;
  }

  /** The table layout of `embeddingName` for the runtime (or, with `imported`, the import) model tag. */
  layout(embeddingName: string, imported = false): RedisTableLayout {
    const slices = imported && this.storage_slice_import > 0 ? this.storage_slice_import : this.storage_slice;
    const tags = imported ? this.redis_hash_tags_import : this.redis_hash_tags_runtime;
    return {
      embeddingName,
      modelTag: imported ? this.model_tag_import : this.model_tag_runtime,
      storageSlice: slices,
      keysSendingSize: this.keys_sending_size,
      ...(tags.length > 0 ? { hashTags: tags } : {}),
      hashTagsHypodispersion: this.redis_hash_tags_hypodispersion,
      usingMd5PrefixName: this.using_md5_prefix_name,
      trackScores: false,
    };
  }

  /** True when a previous model (tag or bucket count) is to be imported into the runtime tables. */
  get importsModel(): boolean {
    const slices = this.storage_slice_import > 0 ? this.storage_slice_import : this.storage_slice;
    return this.model_tag_import !== this.model_tag_runtime || slices !== this.storage_slice;
  }
}

function validate(m: Record<string, unknown>): void {
  const bad = (field: string, expected: string) => {
    throw invalidParameter(field, expected, m[field]);
  };
  if (![0, 1, 2].includes(m.redis_connection_mode as number)) bad('redis_connection_mode', '0 (cluster), 1 (sentinel) or 2 (standalone)');
  const ips = m.redis_host_ip;
  if (!Array.isArray(ips) || ips.length === 0 || ips.some((h) => typeof h !== 'string' || h.length === 0)) bad('redis_host_ip', 'a non-empty array of host strings');
  const ports = m.redis_host_port;
  if (!Array.isArray(ports) || ports.length === 0 || ports.some((p) => !isInt(p) || p < 1 || p > 65535)) bad('redis_host_port', 'a non-empty array of ports (integers)');
  if ((ports as unknown[]).length !== (ips as unknown[]).length) {
    throw new InvalidArgumentError(
      `Expected redis_host_ip and redis_host_port to pair up (one port per host, or a single port number for every host) but received ${(ips as unknown[]).length} hosts [${(ips as string[]).join(', ')}] and ${(ports as unknown[]).length} ports [${(ports as number[]).join(', ')}]`,
      { argument: 'redis_host_port' },
    );
  }
  for (const f of ['redis_user', 'redis_password', 'redis_master_name', 'model_tag_import', 'model_tag_runtime', 'model_lib_abs_dir', 'redis_sentinel_user', 'redis_sentinel_password']) {
    if (typeof m[f] !== 'string') bad(f, 'a string');
  }
  if ((m.model_tag_runtime as string).length === 0) bad('model_tag_runtime', 'a non-empty string');
  for (const f of ['redis_db']) if (!isInt(m[f]) || (m[f] as number) < 0) bad(f, 'an integer >= 0');
  for (const f of ['storage_slice', 'keys_sending_size', 'redis_connect_timeout', 'redis_socket_timeout', 'redis_conn_pool_size']) {
    if (!isInt(m[f]) || (m[f] as number) < 1) bad(f, 'an integer >= 1');
  }
  if (!isInt(m.storage_slice_import) || (m.storage_slice_import !== -1 && (m.storage_slice_import as number) < 1)) bad('storage_slice_import', '-1 or an integer >= 1');
  if (!isInt(m.expire_model_tag_in_seconds)) bad('expire_model_tag_in_seconds', 'an integer');
  if (![0, 1, 2].includes(m.table_store_mode as number)) bad('table_store_mode', '0, 1 or 2');
  for (const f of ['redis_read_access_slave', 'redis_connect_keep_alive', 'using_hash_storage_slice', 'using_md5_prefix_name', 'redis_hash_tags_hypodispersion']) {
    if (typeof m[f] !== 'boolean') bad(f, 'a boolean');
  }
  for (const f of ['redis_hash_tags_import', 'redis_hash_tags_runtime']) {
    const t = m[f];
    if (!Array.isArray(t) || t.some((x) => typeof x !== 'string')) bad(f, 'an array of hash tag strings');
  }
  if (m.using_hash_storage_slice === true) {
    throw new UnsupportedError('Expected using_hash_storage_slice to be false: buckets are chosen by the key\'s low 32 bits (TFRA\'s default layout)', {
      argument: 'using_hash_storage_slice',
    });
  }
}

/**
 * TFRA's `RedisTableCreator`: the shards of a Variable live in Redis (standalone
 * or cluster), in TFRA's layout (store-redis). A one-shard variable uses its own
 * name as TFRA's embedding name; shard i of N uses `<name>_mht_<i+1>of<N>` (TFRA
 * would share one set of buckets between shards). Optimizer slots live beside the
 * rows in companion hashes; bp_v2 updates use the store's atomic server-side
 * accum. All tables of one creator share one connection: `close()` it when done.
 */
export class RedisTableCreator extends KVCreator {
  /** The Redis configuration the tables use. */
  readonly config: RedisTableConfig;
  #store: RedisStore | null = null;

  /**
   * @throws InvalidTypeError when `config` is not a RedisTableConfig
   * @throws BackendUnavailableError (BACKEND_UNAVAILABLE) when the optional peer @embedstack/store-redis is not installed
   */
  constructor(config: RedisTableConfig = new RedisTableConfig()) {
    super();
    if (!(config instanceof RedisTableConfig)) throw invalidParameter('config', 'a RedisTableConfig', config, InvalidTypeError);
    config.storeOptions(); // sentinel -> UNSUPPORTED now rather than at the first lookup
    requireStoreRedisInstalled();
    this.config = config;
  }

  /**
   * The store all tables of this creator share (connects lazily). @embedstack/store-redis is
   * imported when the first table is created; its operations wait for it.
   * @throws FailedPreconditionError before that import finished (await any table operation first)
   */
  get store(): RedisStore {
    const m = loadedStoreRedis();
    if (!m) throw new FailedPreconditionError('RedisTableCreator.store: @embedstack/store-redis is still loading; await a table operation first');
    return this.#storeOf(m);
  }

  #storeOf(m: StoreRedisModule): RedisStore {
    return (this.#store ??= new m.RedisStore(this.config.storeOptions()));
  }

  create(spec: ShardTableSpec): EmbeddingTable {
    const embeddingName = spec.shardNum === 1 ? spec.variableName : spec.tableName;
    const options = resolveTableOptions(shardTableOptions(spec));
    if (options.storageDtype !== 'float32') {
      // store-redis keeps float32 values only; refused here, at the Variable's construction,
      // rather than by every later operation of a table built lazily.
      throw new UnsupportedError(
        `RedisTableCreator: variable '${spec.variableName}' has valueDtype '${options.storageDtype}', but Redis tables store float32 values only (use valueDtype 'float32' with RedisTableCreator)`,
      );
    }
    const layout = this.config.layout(embeddingName);
    return new EmbeddingTable(lateRedisRawTable((m) => this.#storeOf(m).createRawTable(options, layout)), options, 'redis');
  }

  /**
   * Imports `model_tag_import` into an empty runtime table. The import is marked in
   * Redis (`<runtime bucket 0>:import`, set before the first row, deleted after the
   * last), so an import interrupted by a crash (the runtime tag then holds part of
   * the model) is run again in full by the next process, not skipped as non-empty.
   */
  override async prepare(table: EmbeddingTable): Promise<void> {
    const raw = table.raw as RedisRawTable;
    await raw.ready();
    if (!this.config.importsModel) return;
    const client = this.store.connection.client;
    const marker = Buffer.concat([(await raw.bucketNames())[0]!, Buffer.from(':import', 'utf8')]);
    const interrupted = (await client.exists(marker)) > 0;
    if (!interrupted && (await raw.sizeAsync()) > 0) return;
    await client.set(marker, this.config.model_tag_import);
    const layout = this.config.layout(raw.layout.embeddingName, true);
    const source = this.store.createTable({ kind: 'dynamic', dim: table.dim, name: `${table.name}_import`, keyDtype: table.keyDtype }, layout);
    try {
      const src = source.raw as RedisRawTable;
      await src.ready();
      for await (const b of source.exportBatches()) await table.importRows(b.keys, b.values);
      const ttl = this.config.expire_model_tag_in_seconds;
      if (ttl >= 0 && this.config.model_tag_import !== this.config.model_tag_runtime) {
        for (const name of await src.bucketNames()) await client.expire(name, ttl);
      }
      await client.del(marker);
    } finally {
      source.dispose();
    }
  }

  override sizeOf(table: EmbeddingTable): Promise<number> {
    return (table.raw as RedisRawTable).sizeAsync();
  }

  override get savesRows(): boolean {
    return this.config.table_store_mode !== 2;
  }

  /** Redis tables may be written by other processes between a lookup and the training step. */
  override get local(): boolean {
    return false;
  }

  /** Closes the connection shared by this creator's tables. Idempotent. */
  async close(): Promise<void> {
    const s = this.#store;
    this.#store = null;
    if (s) await s.close();
  }
}
