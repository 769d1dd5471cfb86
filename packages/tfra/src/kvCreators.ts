import {
  createTable,
  EmbeddingError,
  type EmbeddingTable,
  type InitializerSpec,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type KeyDtype,
  type StorageDtype,
  type Keys,
  type OptimizerSpec,
  type ScorePolicy,
  type TableOptions,
} from '@embedstack/core';
import { facadeBackend } from './backend.js';

/** What a creator needs to build the table of one shard of a Variable. */
export interface ShardTableSpec {
  /** The Variable's name. */
  variableName: string;
  /** TFRA's table name: `${name}_mht_${i+1}of${N}` ('/' replaced by '_'). */
  tableName: string;
  /** This shard's index, in [0, shardNum). */
  shardIndex: number;
  /** Shards of the Variable. */
  shardNum: number;
  /** Floats per row. */
  dim: number;
  /** Storage key type (int64 also for 'string' variables). */
  keyDtype: KeyDtype;
  /** How values are stored (the Variable's valueDtype); default 'float32'. */
  storageDtype?: StorageDtype;
  /** Initializer of new rows. */
  initializer: InitializerSpec;
  /** Seed and stream of random initializers; the stream is the Variable's, so shards agree. */
  seed: number;
  /** Stream of random initializers (the Variable's). */
  stream: number;
  /** Rows reserved up front for this shard (initSize / shards); 0 = the creator's default. */
  initSize: number;
  /** Optimizer whose slots live beside the rows, or null. */
  optimizer: OptimizerSpec | null;
}

/**
 * Base of the kv creators: builds the core table of each shard of a Variable.
 * Tables live where the creator puts them (memory of the active backend, Redis).
 */
export abstract class KVCreator {
  /** Creates the table of one shard. */
  abstract create(spec: ShardTableSpec): EmbeddingTable;

  /**
   * True when the tables can hold optimizer slots beside each row, so training
   * runs as one fused update per row (in-memory tables). False for remote stores:
   * their slots are kept in companion in-memory tables instead.
   */
  get holdsSlots(): boolean {
    return true;
  }

  /** Scores to write with `keys` (only for the 'customized' policy); null otherwise. */
  scoresFor(_keys: Keys): BigUint64Array | null {
    return null;
  }

  /** True when writes carry caller scores ({@link scoresFor}): training then writes rows with them. */
  get givesScores(): boolean {
    return false;
  }

  /** The epoch of optimizer step `step` for epoch-based eviction, or null. */
  epochFor(_step: number): number | null {
    return null;
  }

  /** Runs once per table before its first operation (connect, import a model...). */
  prepare(_table: EmbeddingTable): Promise<void> {
    return Promise.resolve();
  }

  /** Exact row count of a table of this creator. */
  sizeOf(table: EmbeddingTable): Promise<number> {
    return Promise.resolve(table.size());
  }

  /** Whether `saveToFileSystem` writes the rows of this creator's tables (false: they stay in their store). */
  get savesRows(): boolean {
    return true;
  }

  /**
   * True when this creator's tables live in this process (in the backend's memory), so
   * nothing else writes them between a lookup and the training step; false for remote stores.
   */
  get local(): boolean {
    return true;
  }

  /** An in-memory scratch table like `spec`'s (core pools or differentiates rows there), sized for `rows` keys. Dispose it. */
  scratchTable(spec: ShardTableSpec, rows: number): EmbeddingTable {
    return memoryTable({ ...spec, tableName: `${spec.tableName}_scratch`, optimizer: null, storageDtype: 'float32' }, { initCapacity: Math.max(1, rows) });
  }
}

/** TFRA's default store: a dynamic hash table in the memory of the active backend. */
export class CuckooHashTableCreator extends KVCreator {
  constructor(options: Record<string, never> | null = null) {
    super();
    if (options !== null && options !== undefined && (typeof options !== 'object' || Object.keys(options).length > 0)) {
      throw invalidParameter('options', 'no options (CuckooHashTableCreator takes none)', options);
    }
  }

  create(spec: ShardTableSpec): EmbeddingTable {
    return memoryTable(spec, spec.initSize > 0 ? { initCapacity: spec.initSize } : {});
  }
}

/** Core table options of a shard: a dynamic table with the variable's initializer, seed, stream and slots. */
export function shardTableOptions(spec: ShardTableSpec): TableOptions {
  return {
    kind: 'dynamic',
    dim: spec.dim,
    name: spec.tableName,
    keyDtype: spec.keyDtype,
    initializer: spec.initializer,
    ...(spec.optimizer ? { optimizer: spec.optimizer } : {}),
    seed: spec.seed,
    stream: spec.stream,
    ...(spec.storageDtype && spec.storageDtype !== 'float32' ? { storageDtype: spec.storageDtype } : {}),
  };
}

/** A dynamic table of the facade's backend for `spec`, with `extra` table options. */
function memoryTable(spec: ShardTableSpec, extra: Partial<TableOptions>): EmbeddingTable {
  return createTable({ ...shardTableOptions(spec), ...extra }, { backend: facadeBackend() });
}

/** Score policy of {@link HkvHashTableCreator} (HKV's `EvictStrategy`: LRU, LFU, EPOCH_LRU, EPOCH_LFU, CUSTOMIZED). */
export type HkvEvictStrategy = 'lru' | 'lfu' | 'epochLru' | 'epochLfu' | 'customized';
const EVICT_STRATEGIES: readonly HkvEvictStrategy[] = ['lru', 'lfu', 'epochLru', 'epochLfu', 'customized'];

/** Options of {@link HkvHashTableCreator} (TFRA's `HkvHashTableConfig`). */
export interface HkvHashTableCreatorOptions {
  /** Rows reserved up front per shard. Default 1024 * 1024 (TFRA). */
  initCapacity?: number;
  /** Hard cap on rows per shard; when full, inserts evict by score. Default 1024 * 1024 (TFRA). */
  maxCapacity?: number;
  /** Accepted for parity; there is no GPU memory here, every row lives in host memory. Default 1 GiB. */
  maxHbmForValues?: number;
  /** Score policy of the eviction. Default 'lru'. */
  evictStrategy?: HkvEvictStrategy;
  /** Optimizer steps per epoch for 'epochLru' / 'epochLfu' (epoch = floor(step / stepPerEpoch)). Default 0 (epoch 0). */
  stepPerEpoch?: number;
  /**
   * 'customized' only (required there): scores of the keys written by a call, [n]
   * uint64 (a BigUint64Array, or bigints in [0, 2^64)); called once per shard with
   * that shard's keys, for every shard before any shard is written. A result of
   * another type or length, a score out of range or an exception is an
   * EmbeddingError naming `genScoresFn(keys)`, and nothing is written.
   */
  genScoresFn?: ((keys: Keys) => BigUint64Array | readonly bigint[]) | null;
}

const HKV_KNOWN = ['initCapacity', 'maxCapacity', 'maxHbmForValues', 'evictStrategy', 'stepPerEpoch', 'genScoresFn'];

function positiveInt(v: unknown, argument: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw invalidParameter(argument, `an integer >= ${min}`, v);
  return v;
}

/**
 * TFRA's HierarchicalKV store: a capped in-memory table that evicts the
 * lowest-score rows when full (core's eviction rule; with 'customized' a new key
 * whose score is below every resident key's is refused, as HKV does).
 */
export class HkvHashTableCreator extends KVCreator {
  /** Rows reserved up front per shard. */
  readonly initCapacity: number;
  /** Most rows per shard. */
  readonly maxCapacity: number;
  /** As given (no GPU memory here). */
  readonly maxHbmForValues: number;
  /** Score policy of the eviction. */
  readonly evictStrategy: HkvEvictStrategy;
  /** Optimizer steps per epoch ('epochLru' / 'epochLfu'). */
  readonly stepPerEpoch: number;
  /** 'customized': scores of the keys written by a call; null otherwise. */
  readonly genScoresFn: ((keys: Keys) => BigUint64Array | readonly bigint[]) | null;

  constructor(options: HkvHashTableCreatorOptions | null = {}) {
    super();
    const o = options ?? {};
    if (typeof o !== 'object' || Array.isArray(o)) throw invalidParameter('options', 'an options object', o, InvalidTypeError);
    for (const k of Object.keys(o)) {
      if (!HKV_KNOWN.includes(k)) throw invalidParameter(`options.${k}`, `one of ${HKV_KNOWN.join(', ')}`, k);
    }
    this.maxCapacity = o.maxCapacity == null ? 1024 * 1024 : positiveInt(o.maxCapacity, 'maxCapacity', 1);
    this.initCapacity = o.initCapacity == null ? Math.min(1024 * 1024, this.maxCapacity) : positiveInt(o.initCapacity, 'initCapacity', 1);
    if (this.initCapacity > this.maxCapacity) {
      throw invalidParameter('initCapacity', `<= maxCapacity (${this.maxCapacity})`, this.initCapacity);
    }
    this.maxHbmForValues = o.maxHbmForValues == null ? 1024 ** 3 : positiveInt(o.maxHbmForValues, 'maxHbmForValues', 0);
    const strategy = o.evictStrategy ?? 'lru';
    if (!EVICT_STRATEGIES.includes(strategy)) {
      throw invalidParameter('evictStrategy', EVICT_STRATEGIES.map((s) => `'${s}'`).join(', '), strategy);
    }
    this.evictStrategy = strategy;
    this.stepPerEpoch = o.stepPerEpoch == null ? 0 : positiveInt(o.stepPerEpoch, 'stepPerEpoch', 0);
    const fn = o.genScoresFn ?? null;
    if (fn !== null && typeof fn !== 'function') throw invalidParameter('genScoresFn', 'a function', fn, InvalidTypeError);
    if (strategy === 'customized' && fn === null) {
      throw invalidParameter('genScoresFn', "a function (required by evictStrategy 'customized')", fn);
    }
    this.genScoresFn = fn;
  }

  create(spec: ShardTableSpec): EmbeddingTable {
    return memoryTable(spec, {
      initCapacity: Math.min(spec.initSize > 0 ? spec.initSize : this.initCapacity, this.maxCapacity),
      maxCapacity: this.maxCapacity,
      scorePolicy: this.evictStrategy satisfies ScorePolicy,
    });
  }

  override get givesScores(): boolean {
    return this.evictStrategy === 'customized' && this.genScoresFn !== null;
  }

  override scoresFor(keys: Keys): BigUint64Array | null {
    if (this.evictStrategy !== 'customized' || this.genScoresFn === null) return null;
    const what = 'the result of genScoresFn(keys)';
    let s: unknown;
    try {
      s = this.genScoresFn(keys);
    } catch (e) {
      if (e instanceof EmbeddingError) throw e;
      throw new InvalidArgumentError(`genScoresFn(keys) threw: ${(e as Error)?.message ?? String(e)}`, { argument: 'genScoresFn(keys)', cause: e });
    }
    if (!(s instanceof BigUint64Array) && !(Array.isArray(s) && s.every((x) => typeof x === 'bigint'))) {
      throw invalidParameter(what, `a BigUint64Array or an array of bigint (${keys.length} uint64 scores)`, s, InvalidTypeError);
    }
    if (s.length !== keys.length) throw invalidParameter(what, `${keys.length} uint64 scores (one per key)`, `${s.length} scores`);
    if (s instanceof BigUint64Array) return s;
    const bad = (s as bigint[]).findIndex((x) => x < 0n || x > 0xffffffffffffffffn);
    if (bad >= 0) throw invalidParameter(`${what}[${bad}]`, 'a uint64 score in [0, 2^64)', (s as bigint[])[bad]);
    return BigUint64Array.from(s as bigint[]);
  }

  override epochFor(step: number): number | null {
    if (this.evictStrategy !== 'epochLru' && this.evictStrategy !== 'epochLfu') return null;
    return this.stepPerEpoch > 0 ? Math.floor(step / this.stepPerEpoch) : 0;
  }
}

/** Internal: in-memory tables with a given score policy (status tables of restrict policies). */
export class ScoredTableCreator extends KVCreator {
  constructor(readonly scorePolicy: ScorePolicy) {
    super();
  }

  create(spec: ShardTableSpec): EmbeddingTable {
    return memoryTable(spec, { scorePolicy: this.scorePolicy });
  }
}

/**
 * Scores of every shard's keys (`creator.scoresFor`), all computed and checked
 * before a caller writes any shard: a bad genScoresFn result then changes nothing.
 * Entries are undefined for empty shards and creators without caller scores.
 */
export function shardScores(creator: KVCreator, keys: readonly (Keys | null | undefined)[]): (BigUint64Array | undefined)[] {
  if (!creator.givesScores) return keys.map(() => undefined);
  return keys.map((k) => (k && k.length > 0 ? (creator.scoresFor(k) ?? undefined) : undefined));
}
