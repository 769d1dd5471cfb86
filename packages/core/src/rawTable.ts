import type { Bag, Combiner, LookupCombiner } from './combiners.js';
import type { Keys } from './dtypes.js';
import type { ResolvedOptimizer } from './optimizers.js';
import type { ResolvedShardPlan } from './shardPlan.js';

/** Rows read by find / findOrInsert: host arrays (fresh, or the caller's `out`). */
export interface FindResult {
  /** [n * dim] row-major. Missing keys hold their initial value. */
  values: Float32Array;
  /** [n], 1 when the key was present before the call. */
  exists: Uint8Array;
}

/** A batch of rows exported by `exportBatch`: fresh host arrays owned by the caller. */
export interface ExportBatch<K extends Keys = Keys> {
  /** [n] keys. */
  keys: K;
  /** [n * dim] */
  values: Float32Array;
  /** One array per slot of the table's layout, [n * width]. */
  slots: Float32Array[];
  /** [n] 64-bit scores (0 for static tables). */
  scores: BigUint64Array;
}

/** The synchronous operations of a backend's table (see {@link RawTable} for the contract every call follows). */
export interface RawTableSync {
  /**
   * Reads rows. `out` (values [n * dim], exists [n]) is filled and returned when
   * given; it is always given with a plan (then only owned entries are written).
   */
  find(keys: Keys, out: FindResult | null, plan: ResolvedShardPlan | null): FindResult;
  /** Missing keys are inserted with their initial value (or refused when a full capped table keeps older rows). `out`, `plan`: as find. */
  findOrInsert(keys: Keys, scores: BigUint64Array | null, out: FindResult | null, plan: ResolvedShardPlan | null): FindResult;
  /** Inserts or overwrites rows: values [n * dim]; scores [n] only for the customized policy, else null. */
  upsert(keys: Keys, values: Float32Array, scores: BigUint64Array | null): void;
  /** Overwrites existing keys only. */
  assign(keys: Keys, values: Float32Array, scores: BigUint64Array | null): void;
  /** present&exists -> add delta; absent&!exists -> insert delta; else no-op. Duplicates apply in order. */
  accum(keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): void;
  /** Returns how many keys were removed. Static tables reset rows to their initial value. */
  remove(keys: Keys): number;
  /** Removes every row (static tables: resets every row to its initial value). */
  clear(): void;
  /** Number of rows held. */
  size(): number;
  /** Rows the table can hold before it grows or evicts (static tables: the vocabulary size). */
  capacity(): number;
  /** Bytes of memory held by the table (values, slots, scores, index). */
  memoryUsage(): number;
  /** Rows [offset, offset + limit) of the table's iteration order (stable while the table is not written). */
  exportBatch(offset: number, limit: number): ExportBatch;
  /** Bulk load: upsert of values plus slots and scores (defaults: slot initial values, policy scores). */
  importRows(keys: Keys, values: Float32Array, slots: Float32Array[] | null, scores: BigUint64Array | null): void;
  /**
   * Embedding bag, one pass: out[r] = combine over the bag's row r ([nrows * dim];
   * `out` filled and returned when given). `maxNorm` 0 = no clipping.
   * `insertMissing` inserts missing keys (training).
   */
  lookupCombined(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, insertMissing: boolean, out: Float32Array | null): Float32Array;
  /**
   * This shard's part of an embedding bag: for each row r, ADDS to out[r] (float64,
   * [nrows * dim]) the sum over the row's owned entries of their clipped, weighted
   * rows divided by the denominator of the WHOLE row (every entry counts, owned or
   * not; see reference/combineOps.ts for the exact arithmetic). Rows with a zero
   * denominator get nothing. Returns `out`.
   */
  lookupCombinedPartial(
    bag: Bag<Keys>,
    combiner: Combiner,
    maxNorm: number,
    insertMissing: boolean,
    plan: ResolvedShardPlan,
    out: Float64Array,
  ): Float64Array;
  /**
   * The combiner's backward: from pooled gradients `grads` [nrows * dim], the
   * gradient of each owned entry (w_j / denom_r * grads[r], through maxNorm's clip;
   * combineOps.ts), written at the entry's row of `out` [nnz * dim] (float32).
   * Only when maxNorm > 0 does it read rows: one find of the owned local keys
   * (with find's score update). Returns `out`.
   */
  lookupCombinedBackward(
    bag: Bag<Keys>,
    grads: Float32Array,
    combiner: Combiner,
    maxNorm: number,
    plan: ResolvedShardPlan | null,
    out: Float32Array,
  ): Float32Array;
  /**
   * lookupCombinedBackward fused with applyGradients: exactly
   * applyGradients(local keys of the owned entries in entry order, their per-entry
   * gradients) in one call; with maxNorm > 0 the rows are read first by one find of
   * the owned local keys (missing keys read their initial value).
   */
  applyCombinedGradients(
    bag: Bag<Keys>,
    grads: Float32Array,
    combiner: Combiner,
    maxNorm: number,
    plan: ResolvedShardPlan | null,
    optimizer: ResolvedOptimizer,
  ): void;
  /**
   * Dedupe + sum duplicate keys, then one fused update of row and slots. Missing keys
   * are inserted first. With a plan: the owned entries under their local keys.
   */
  applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer, plan: ResolvedShardPlan | null): void;
  /** Keep the `numReserved` highest-score rows (ties: smaller key kept); returns how many were removed. */
  restrict(numReserved: number): number;
  /** Sets the epoch of the epochLru / epochLfu policies. */
  setEpoch(epoch: number): void;
  /** Frees native memory. Idempotent. */
  dispose(): void;
}

/** `T`'s methods, each returning a Promise of its result (non-method members become `never`). */
export type Promisified<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<R> : never;
};

/** The same operations, as promises; may run off the event loop. */
export type RawTableAsync = Omit<Promisified<RawTableSync>, 'dispose' | 'setEpoch' | 'size' | 'capacity' | 'memoryUsage'>;

/**
 * The backend side of a table. Core has validated and normalised every argument
 * before calling (keys typed and in range, lengths = n*dim, dtypes right, `out`
 * arrays of the right length), so a backend trusts its input and never
 * re-validates. Results are freshly allocated host arrays owned by the caller, or
 * the caller's own `out` arrays (filled, and returned).
 *
 * Shard plans (`plan`, see shardPlan.ts): the op sees the keys of a whole logical
 * batch and works only on the entries this table's shard owns, under their local
 * keys (`localKeyOf`); what it writes for an owned entry is exactly what the op
 * without a plan writes for the local key. Entries other shards own are not read,
 * inserted, scored or written, and their parts of `out` are left as they are.
 * Static-table keys owned by the shard are in range; others are not checked.
 *
 * All-or-nothing: a call either completes or changes nothing.
 * Thread safety: async calls on one table may overlap; the backend serialises
 * writers against readers (a reader-writer lock or finer).
 */
export interface RawTable {
  /** Synchronous operations, or null when the backend is async-only (remote stores). */
  readonly sync: RawTableSync | null;
  /** The operations as promises (always present). */
  readonly async: RawTableAsync;
  /** Number of rows held. */
  size(): number;
  /** Rows the table can hold before it grows or evicts (static tables: the vocabulary size). */
  capacity(): number;
  /** Bytes of memory held by the table (values, slots, scores, index). */
  memoryUsage(): number;
  /** Sets the epoch of the epochLru / epochLfu policies. */
  setEpoch(epoch: number): void;
  /** Frees the table's memory (native or remote). Idempotent. */
  dispose(): void;
  /**
   * Optional: true when the backend itself refuses a static table's row index outside
   * [0, vocabularySize) in `lookupCombined` (sync and async), with an OutOfRangeError,
   * before writing anything. Core then skips its own check of the bag's ids on that call
   * (a serial pass over every id on the calling thread: about 1.2 ms per 2.1M ids, while
   * the backend's threads wait), and when the call fails with an OutOfRangeError core runs
   * its check and throws its own error, so the error is the same as without the flag.
   */
  readonly checksRowIndices?: boolean;
  /**
   * Optional: a whole embedding bag over the shards of one logical table in ONE call,
   * called on `parts[0].raw` (core's `lookupCombinedShards`): for each row r,
   * out[r] = Σ_d partial_d[r], where partial_d is `lookupCombinedPartial` of
   * `parts[d]` (its raw table and plan) over the whole bag; the float64 partials are
   * added in part order (((p_0 + p_1) + p_2) + ...) and rounded once to float32, into
   * `out` [nrows * dim] (written whole), which is returned; `out` null: into a new array
   * the backend makes (core passes null when its caller gave no `out`), returned. Where every key has exactly
   * one owner (floorMod plans over one N, each residue owned by at most one part, and
   * every key of the bag on an owned residue: sok's placement, whose static variables of
   * fewer rows than devices leave a residue without a table; a property of the whole bag,
   * so a backend taking it for one row takes it for all) a backend may instead sum
   * each row's entries in bag order in float64, each from its owner's table, as one
   * table holding every row does (the CPU backend), rounded once: bit for bit that
   * table's bag. The same float64 terms in another order: usually the part-order result
   * or its float32 neighbour, but where a row's terms cancel the two can differ by more
   * (terms 1, 2^-60, -1 split over two parts: 0 in bag order, 2^-60 in part order). The parts' bags may run in parallel. Returns null, before any work, when
   * it cannot serve `parts` (a part of another backend): core then runs
   * `lookupCombinedPartial` per part and adds them itself in part order (`sumShardPartials`).
   */
  lookupCombinedShards?(
    parts: readonly ShardPart[],
    bag: Bag<Keys>,
    combiner: Combiner,
    maxNorm: number,
    insertMissing: boolean,
    out: Float32Array | null,
  ): Promise<Float32Array> | null;
  /**
   * Optional: every part's `applyCombinedGradients` (its raw table and plan) from one bag
   * and its pooled gradients, in ONE call, called on `parts[0].raw` (core's
   * `applyCombinedGradientsShards`). Each table ends exactly as after its own
   * `applyCombinedGradients(bag, grads, combiner, maxNorm, plan, optimizer)`; the parts may
   * run in parallel (a table given twice: its parts in part order). Every table's
   * optimizer is checked before any row changes; a part that fails inside the call (its
   * table disposed meanwhile, or ids the caller rewrote meanwhile) may leave the other
   * parts trained. Returns null, before any work, when it
   * cannot serve `parts` (a part of another backend): core then calls each part's
   * `applyCombinedGradients` itself.
   */
  applyCombinedGradientsShards?(
    parts: readonly ShardPart[],
    bag: Bag<Keys>,
    grads: Float32Array,
    combiner: Combiner,
    maxNorm: number,
    optimizer: ResolvedOptimizer,
  ): Promise<void> | null;
}

/** One shard of a logical table: its backend table and its resolved plan (`lookupCombinedShards`, `applyCombinedGradientsShards`). */
export interface ShardPart {
  /** The shard's table on its backend. */
  raw: RawTable;
  /** The keys it owns and their local keys. */
  plan: ResolvedShardPlan;
}

/**
 * The reference arithmetic of `lookupCombinedShards`: out[i] = the float64 partials
 * `partials[d][i]` added in order d = 0, 1, ... and rounded once to float32.
 */
export function sumShardPartials(partials: readonly Float64Array[], out: Float32Array): Float32Array {
  const n = out.length;
  const first = partials[0]!;
  for (let i = 0; i < n; i++) {
    let acc = first[i]!;
    for (let d = 1; d < partials.length; d++) acc += partials[d]![i]!;
    out[i] = acc;
  }
  return out;
}

/**
 * Runs `fn` for every part: parts of distinct tables concurrently, the parts of a table
 * given more than once one after another in part order (as a fused backend runs them).
 */
export async function inPartOrderPerTable(parts: readonly ShardPart[], fn: (p: ShardPart) => Promise<void>): Promise<void> {
  const byTable = new Map<RawTable, ShardPart[]>();
  for (const p of parts) {
    const own = byTable.get(p.raw);
    if (own) own.push(p);
    else byTable.set(p.raw, [p]);
  }
  await Promise.all(
    [...byTable.values()].map(async (own) => {
      for (const p of own) await fn(p);
    }),
  );
}

/** Builds a RawTable whose async side runs the sync side inside a resolved promise. */
export function rawTableFromSync(sync: RawTableSync): RawTable {
  const wrap =
    <A extends unknown[], R>(fn: (...a: A) => R) =>
    (...a: A): Promise<R> => {
      try {
        return Promise.resolve(fn(...a));
      } catch (e) {
        return Promise.reject(e);
      }
    };
  const s = sync;
  return {
    sync: s,
    async: {
      find: wrap(s.find.bind(s)),
      findOrInsert: wrap(s.findOrInsert.bind(s)),
      upsert: wrap(s.upsert.bind(s)),
      assign: wrap(s.assign.bind(s)),
      accum: wrap(s.accum.bind(s)),
      remove: wrap(s.remove.bind(s)),
      clear: wrap(s.clear.bind(s)),
      exportBatch: wrap(s.exportBatch.bind(s)),
      importRows: wrap(s.importRows.bind(s)),
      lookupCombined: wrap(s.lookupCombined.bind(s)),
      lookupCombinedPartial: wrap(s.lookupCombinedPartial.bind(s)),
      lookupCombinedBackward: wrap(s.lookupCombinedBackward.bind(s)),
      applyCombinedGradients: wrap(s.applyCombinedGradients.bind(s)),
      applyGradients: wrap(s.applyGradients.bind(s)),
      restrict: wrap(s.restrict.bind(s)),
    },
    size: () => s.size(),
    capacity: () => s.capacity(),
    memoryUsage: () => s.memoryUsage(),
    setEpoch: (e) => s.setEpoch(e),
    dispose: () => s.dispose(),
  };
}
