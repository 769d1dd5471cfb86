import type { Bag, Combiner } from './combiners.js';
import type { Keys } from './dtypes.js';
import type { ResolvedOptimizer } from './optimizers.js';

/**
 * The backend side of a table. Core has validated and normalised every argument
 * before calling (keys typed and in range, lengths = n*dim, dtypes right), so a
 * backend trusts its input and never re-validates. Results are freshly allocated
 * host arrays owned by the caller.
 *
 * All-or-nothing: a call either completes or changes nothing.
 * Thread safety: async calls on one table may overlap; the backend serialises
 * writers against readers (a reader-writer lock or finer).
 */

export interface FindResult {
  /** [n * dim] row-major. Missing keys hold their initial value. */
  values: Float32Array;
  /** [n], 1 when the key was present before the call. */
  exists: Uint8Array;
}

export interface ExportBatch<K extends Keys = Keys> {
  keys: K;
  /** [n * dim] */
  values: Float32Array;
  /** One array per slot of the table's layout, [n * width]. */
  slots: Float32Array[];
  /** [n] 64-bit scores (0 for static tables). */
  scores: BigUint64Array;
}

export interface RawTableSync {
  find(keys: Keys): FindResult;
  /** Missing keys are inserted with their initial value (or refused when a full capped table keeps older rows). */
  findOrInsert(keys: Keys, scores: BigUint64Array | null): FindResult;
  upsert(keys: Keys, values: Float32Array, scores: BigUint64Array | null): void;
  /** Overwrites existing keys only. */
  assign(keys: Keys, values: Float32Array, scores: BigUint64Array | null): void;
  /** present&exists -> add delta; absent&!exists -> insert delta; else no-op. Duplicates apply in order. */
  accum(keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): void;
  /** Returns how many keys were removed. Static tables reset rows to their initial value. */
  remove(keys: Keys): number;
  clear(): void;
  size(): number;
  capacity(): number;
  /** Bytes of memory held by the table (values, slots, scores, index). */
  memoryUsage(): number;
  /** Rows [offset, offset + limit) of the table's iteration order (stable while the table is not written). */
  exportBatch(offset: number, limit: number): ExportBatch;
  /** Bulk load: upsert of values plus slots and scores (defaults: slot initial values, policy scores). */
  importRows(keys: Keys, values: Float32Array, slots: Float32Array[] | null, scores: BigUint64Array | null): void;
  /**
   * Embedding bag, one pass: out[r] = combine over the bag's row r.
   * `maxNorm` 0 = no clipping. `insertMissing` inserts missing keys (training).
   */
  lookupCombined(bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insertMissing: boolean): Float32Array;
  /** Dedupe + sum duplicate keys, then one fused update of row and slots. Missing keys are inserted first. */
  applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer): void;
  /** Keep the `numReserved` highest-score rows (ties: smaller key kept); returns how many were removed. */
  restrict(numReserved: number): number;
  /** Sets the epoch of the epochLru / epochLfu policies. */
  setEpoch(epoch: number): void;
  /** Frees native memory. Idempotent. */
  dispose(): void;
}

type Promisified<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<R> : never;
};

/** The same operations, as promises; may run off the event loop. */
export type RawTableAsync = Omit<Promisified<RawTableSync>, 'dispose' | 'setEpoch' | 'size' | 'capacity' | 'memoryUsage'>;

export interface RawTable {
  /** Synchronous operations, or null when the backend is async-only (remote stores). */
  readonly sync: RawTableSync | null;
  readonly async: RawTableAsync;
  size(): number;
  capacity(): number;
  memoryUsage(): number;
  setEpoch(epoch: number): void;
  dispose(): void;
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
