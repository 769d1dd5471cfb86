import {
  checkBoolean,
  checkInteger,
  checkKnownKeys,
  checkOptions,
  invalidParameter,
  InvalidTypeError,
  UnsupportedError,
} from '@embedstack/core';

/** 'standalone' or 'cluster'. */
export type RedisMode = 'standalone' | 'cluster';

/**
 * TFRA's `redis_connection_mode` numbers: 0 cluster, 1 sentinel, 2 standalone.
 * Sentinel is not supported (UNSUPPORTED); connect to the master directly instead.
 */
export type TfraConnectionMode = 0 | 1 | 2;

/** A Redis server address. */
export interface RedisHost {
  /** Host name or IP address. */
  host: string;
  /** TCP port, 1..65535. */
  port: number;
}

/**
 * Retry policy of the store. Read-only batches (HMGET, HLEN, HSCAN, HGETALL) that
 * fail for any reason are sent again, per node, up to `attempts` more times with
 * `delayMs` between tries; a batch that still fails rejects the call with
 * STORE_UNAVAILABLE. Writes are never retried by the store (a failed write batch
 * may or may not have been applied, and accum is not idempotent): they reject at
 * once and the error names the keys whose state is unknown.
 */
export interface RedisRetryOptions {
  /** Extra tries of a failed read batch. Integer >= 0. Default 2. */
  attempts?: number;
  /** Milliseconds between tries. Integer >= 0. Default 100. */
  delayMs?: number;
  /**
   * Cluster only: how many times ioredis itself re-sends a command after MOVED, ASK,
   * TRYAGAIN, CLUSTERDOWN or a closed connection (100 ms apart) before failing it
   * (ioredis's maxRedirections). Integer >= 1. Default 16. Lower it to fail fast when
   * a master is down and has no replica.
   */
  clusterRedirections?: number;
}

/** How to reach Redis. Shared by every table of one {@link RedisStore}. */
export interface RedisStoreOptions {
  /** 'standalone' (default) or 'cluster'; TFRA's numbers 2 / 0 are accepted, 1 (sentinel) is UNSUPPORTED. */
  mode?: RedisMode | TfraConnectionMode;
  /** Servers (cluster: any subset of the nodes, used as seeds). Default [{ host: '127.0.0.1', port: 6379 }]. */
  hosts?: readonly RedisHost[];
  /** ACL user. Default none ('default'). */
  username?: string | null;
  /** Password. Default none. */
  password?: string | null;
  /** Database index, standalone only. Default 0. */
  db?: number;
  /** Milliseconds to wait for a connection (and for the cluster to be ready). Default 5000. */
  connectTimeoutMs?: number;
  /** Milliseconds before a single command is abandoned (it then counts as failed). Default 10000. */
  commandTimeoutMs?: number;
  /** Default keys per command per bucket for the store's tables (TFRA's keys_sending_size). Default 1024. */
  keysSendingSize?: number;
  /** Retry policy of read batches (see {@link RedisRetryOptions}). Default { attempts: 2, delayMs: 100, clusterRedirections: 16 }. */
  retry?: RedisRetryOptions;
}

/** {@link RedisStoreOptions} with every default filled in, as {@link resolveStoreOptions} returns them (mode as a name, credentials undefined when absent). */
export interface ResolvedRedisStoreOptions {
  /** 'standalone' or 'cluster' (TFRA's numbers mapped to names). */
  mode: RedisMode;
  /** Servers (cluster: seed nodes); at least one. */
  hosts: RedisHost[];
  /** ACL user, or undefined. */
  username: string | undefined;
  /** Password, or undefined. */
  password: string | undefined;
  /** Database index (standalone). */
  db: number;
  /** Milliseconds to wait for a connection. */
  connectTimeoutMs: number;
  /** Milliseconds before a single command is abandoned. */
  commandTimeoutMs: number;
  /** Default keys per command per bucket. */
  keysSendingSize: number;
  /** The retry policy, defaults filled in (see {@link RedisRetryOptions}). */
  retry: {
    /** Extra tries of a failed read batch. */
    attempts: number;
    /** Milliseconds between tries. */
    delayMs: number;
    /** Cluster: ioredis's maxRedirections. */
    clusterRedirections: number;
  };
}

/**
 * Where one table lives in Redis (TFRA's naming; see `naming.ts`). All optional.
 */
export interface RedisTableLayout {
  /** TFRA's embedding_name. Default: the table's name. */
  embeddingName?: string;
  /** TFRA's model_tag_runtime. Default 'test' (TFRA's default). */
  modelTag?: string;
  /** Number of buckets (TFRA's storage_slice). Integer >= 1. Default 1. */
  storageSlice?: number;
  /** Keys per command per bucket (TFRA's keys_sending_size). Default: the store's. */
  keysSendingSize?: number;
  /** One hash tag per bucket (TFRA's redis_hash_tags_runtime), e.g. ['{3560}', '{22179}']. Default: computed. */
  hashTags?: readonly string[] | null;
  /** Spread computed tags over all 16384 slots even in cluster mode (TFRA's redis_hash_tags_hypodispersion). Default false. */
  hashTagsHypodispersion?: boolean;
  /** Use the raw MD5 of `${modelTag}:${embeddingName}` as prefix (TFRA's using_md5_prefix_name). Default false. */
  usingMd5PrefixName?: boolean;
  /**
   * Keep per-key scores in companion hashes (needed by `restrict` and exported
   * scores). Default true. Read-tracking policies (lru, lfu, epochLru) then write
   * on every lookup: set false for read-heavy serving tables.
   */
  trackScores?: boolean;
}

/** {@link RedisTableLayout} with every default filled in, as {@link resolveTableLayout} returns it. */
export interface ResolvedRedisTableLayout {
  /** TFRA's embedding_name (default: the table's name). */
  embeddingName: string;
  /** TFRA's model_tag_runtime (default 'test'). */
  modelTag: string;
  /** Number of buckets, 1..16384. */
  storageSlice: number;
  /** Keys per command per bucket. */
  keysSendingSize: number;
  /** The given hash tags (one per bucket), or null: tags are computed on first use (sequentialHashTags). */
  hashTags: string[] | null;
  /** Spread computed tags over all slots even in cluster mode. */
  hashTagsHypodispersion: boolean;
  /** Raw MD5 of `${modelTag}:${embeddingName}` as the key prefix. */
  usingMd5PrefixName: boolean;
  /** Keep per-key scores in companion hashes. */
  trackScores: boolean;
}

function int(value: unknown, argument: string, min: number, max?: number): number {
  return checkInteger(value, argument, max === undefined ? { min } : { min, max });
}

function optString(value: unknown, argument: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalidParameter(argument, 'a string', value, InvalidTypeError);
  return value;
}

const bool = checkBoolean;

function checkKnown(obj: object, known: readonly string[], argument: string): void {
  checkOptions(obj, known, argument);
}

const STORE_KEYS = ['mode', 'hosts', 'username', 'password', 'db', 'connectTimeoutMs', 'commandTimeoutMs', 'keysSendingSize', 'retry'];

/** Resolves defaults. @throws InvalidArgumentError / InvalidTypeError naming the option; UnsupportedError for sentinel. */
export function resolveStoreOptions(options: RedisStoreOptions = {}): ResolvedRedisStoreOptions {
  if (typeof options !== 'object' || options === null) {
    throw invalidParameter('options', 'a RedisStoreOptions object', options, InvalidTypeError);
  }
  checkKnown(options, STORE_KEYS, 'options');
  const m = options.mode ?? 'standalone';
  let mode: RedisMode;
  if (m === 'standalone' || m === 2) mode = 'standalone';
  else if (m === 'cluster' || m === 0) mode = 'cluster';
  else if (m === 1) {
    throw new UnsupportedError(
      'Expected mode to be a supported connection mode but received 1 (sentinel): Redis Sentinel is not supported by ' +
        '@embedstack/store-redis; connect to the master with mode 2 (standalone) or use a cluster (mode 0)',
      { argument: 'mode' },
    );
  } else throw invalidParameter('mode', "'standalone', 'cluster', 0 (cluster) or 2 (standalone)", m);
  const hostsIn = options.hosts ?? [{ host: '127.0.0.1', port: 6379 }];
  if (!Array.isArray(hostsIn) || hostsIn.length === 0) throw invalidParameter('hosts', 'a non-empty array of { host, port }', hostsIn);
  const hosts = hostsIn.map((h, i) => {
    if (typeof h !== 'object' || h === null) throw invalidParameter(`hosts[${i}]`, 'a { host, port } object', h, InvalidTypeError);
    checkKnownKeys(h, ['host', 'port'], `hosts[${i}]`, 'fields');
    if (typeof h.host !== 'string' || h.host.length === 0) throw invalidParameter(`hosts[${i}].host`, 'a non-empty string', h.host);
    return { host: h.host, port: int(h.port, `hosts[${i}].port`, 1, 65535) };
  });
  if (mode === 'standalone' && hosts.length !== 1) {
    throw invalidParameter('hosts', 'exactly one host in standalone mode', `${hosts.length} hosts`);
  }
  const db = options.db === undefined || options.db === null ? 0 : int(options.db, 'db', 0);
  if (mode === 'cluster' && db !== 0) throw invalidParameter('db', '0 in cluster mode (Redis Cluster has one database)', db);
  const retry = options.retry ?? {};
  if (typeof retry !== 'object' || retry === null) throw invalidParameter('retry', 'an object { attempts, delayMs }', retry, InvalidTypeError);
  checkKnown(retry, ['attempts', 'delayMs', 'clusterRedirections'], 'retry');
  return {
    mode,
    hosts,
    username: optString(options.username, 'username'),
    password: optString(options.password, 'password'),
    db,
    connectTimeoutMs: options.connectTimeoutMs === undefined ? 5000 : int(options.connectTimeoutMs, 'connectTimeoutMs', 1),
    commandTimeoutMs: options.commandTimeoutMs === undefined ? 10000 : int(options.commandTimeoutMs, 'commandTimeoutMs', 1),
    keysSendingSize: options.keysSendingSize === undefined ? 1024 : int(options.keysSendingSize, 'keysSendingSize', 1),
    retry: {
      attempts: retry.attempts === undefined ? 2 : int(retry.attempts, 'retry.attempts', 0, 100),
      delayMs: retry.delayMs === undefined ? 100 : int(retry.delayMs, 'retry.delayMs', 0),
      clusterRedirections: retry.clusterRedirections === undefined ? 16 : int(retry.clusterRedirections, 'retry.clusterRedirections', 1, 1000),
    },
  };
}

const LAYOUT_KEYS = [
  'embeddingName',
  'modelTag',
  'storageSlice',
  'keysSendingSize',
  'hashTags',
  'hashTagsHypodispersion',
  'usingMd5PrefixName',
  'trackScores',
];

/** Resolves a table layout; `tableName` is the default embedding name. */
export function resolveTableLayout(
  layout: RedisTableLayout = {},
  tableName: string,
  store: ResolvedRedisStoreOptions,
): ResolvedRedisTableLayout {
  if (typeof tableName !== 'string' || tableName.length === 0) throw invalidParameter('tableName', 'a non-empty string', tableName, InvalidTypeError);
  if (typeof store !== 'object' || store === null || typeof store.keysSendingSize !== 'number') throw invalidParameter('store', 'resolved store options (resolveStoreOptions)', store, InvalidTypeError);
  if (typeof layout !== 'object' || layout === null) {
    throw invalidParameter('layout', 'a RedisTableLayout object', layout, InvalidTypeError);
  }
  checkKnown(layout, LAYOUT_KEYS, 'layout');
  const embeddingName = optString(layout.embeddingName, 'layout.embeddingName') ?? tableName;
  if (embeddingName.length === 0) throw invalidParameter('layout.embeddingName', 'a non-empty string', embeddingName);
  const modelTag = optString(layout.modelTag, 'layout.modelTag') ?? 'test';
  const storageSlice = layout.storageSlice === undefined ? 1 : int(layout.storageSlice, 'layout.storageSlice', 1, 16384);
  let hashTags: string[] | null = null;
  if (layout.hashTags !== undefined && layout.hashTags !== null && layout.hashTags.length > 0) {
    const t = layout.hashTags;
    if (!Array.isArray(t) || t.some((x) => typeof x !== 'string' || x.replace(/[{}]/g, '').length === 0)) {
      throw invalidParameter('layout.hashTags', 'an array of non-empty strings', t);
    }
    if (t.length !== storageSlice) {
      throw invalidParameter('layout.hashTags', `${storageSlice} tags (one per bucket, storageSlice)`, `${t.length} tags`);
    }
    hashTags = t.slice();
  }
  return {
    embeddingName,
    modelTag,
    storageSlice,
    keysSendingSize: layout.keysSendingSize === undefined ? store.keysSendingSize : int(layout.keysSendingSize, 'layout.keysSendingSize', 1),
    hashTags,
    hashTagsHypodispersion: bool(layout.hashTagsHypodispersion, 'layout.hashTagsHypodispersion', false),
    usingMd5PrefixName: bool(layout.usingMd5PrefixName, 'layout.usingMd5PrefixName', false),
    trackScores: bool(layout.trackScores, 'layout.trackScores', true),
  };
}
