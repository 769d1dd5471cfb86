import type { Keys } from '@embedstack/core';


/** An opaque table handle (a tagged External). Freed by dispose() or the GC. */
export interface NativeTableHandle {
  /** Type brand only: no such property exists at run time. */
  readonly __embedstackNativeTable: never;
}

/** [values [n*dim], exists [n]] */
export type NativeFindResult = [Float32Array, Uint8Array];
/** [keys [n], values [n*dim], slots (one [n*width] per slot), scores [n]] */
export type NativeExportResult = [Keys, Float32Array, Float32Array[], BigUint64Array];

/** Build and machine facts the addon reports (`NativeBinding.info()`). */
export interface NativeInfo {
  /** 'sse2' or 'swar': how control-byte groups are probed. */
  groupProbing: 'sse2' | 'swar';
  /** Threads of the native pool (caller included): EMBEDSTACK_CPU_THREADS or the hardware's. */
  threads: number;
  /** Microseconds an idle pool worker stays awake before it sleeps: EMBEDSTACK_CPU_SPIN_US or 200. */
  idleSpinUs: number;
  /** Hardware threads the machine reports (std::thread::hardware_concurrency). */
  hardwareConcurrency: number;
  /** Physical memory in bytes (0 when unknown). */
  physicalMemory: number;
  /** Batches of at least this many keys are split over the native pool. */
  parallelThreshold: number;
  /** N-API version the addon was built against. */
  napiVersion: number;
  /**
   * What the addon did to glibc malloc's thresholds at load (README, Design: "glibc malloc's thresholds"): 'tuned'
   * (mmap threshold 32 MiB, trim threshold 256 MiB, so multi-MB results freed by the
   * garbage collector are reused without page faults), 'opted-out'
   * (EMBEDSTACK_TUNE_MALLOC=0), 'user-set' (GLIBC_TUNABLES or MALLOC_*_THRESHOLD_ set
   * them), 'unsupported' (not glibc).
   */
  mallocTuning: 'tuned' | 'opted-out' | 'user-set' | 'unsupported' | 'not-run';
  /**
   * The cache of freed result blocks (README, Design: "The result cache"): results of 1 MiB or more are
   * mapped blocks that the result's ArrayBuffer returns to this cache once V8 collected it
   * and Node ran its finalizer (as the event loop turns), and the next result of a similar
   * size reuses, its pages still present. `capBytes`
   * (EMBEDSTACK_CPU_RESULT_CACHE_MB; default 1/16 of physicalMemory, 128 MiB to 1 GiB) bounds `heldBytes`; `hits` and
   * `misses` count the requests of 1 MiB or more since the process started.
   */
  resultCache: {
    /** The most bytes the cache holds (EMBEDSTACK_CPU_RESULT_CACHE_MB; 0: no cache). */
    capBytes: number;
    /** Bytes of idle blocks held now (counted in no table's memoryUsage()). */
    heldBytes: number;
    /** Idle blocks held now. */
    heldBlocks: number;
    /** Requests of 1 MiB or more served by a cached block. */
    hits: number;
    /** Requests of 1 MiB or more that mapped a new block. */
    misses: number;
  };
  /**
   * The early wake of large async calls (README, "Thread safety and async calls"; MEASUREMENTS.md,
   * "The Promise form of find: the JS thread woken before the job ends"): the first pool thread with no
   * chunk left wakes the JS thread, which waits up to `waitUs` for the job's end and settles
   * the promise itself, else gives up and the job's end settles it. Counts since the process started.
   */
  earlyWake: {
    /** The JS thread's wait after the wake-up, in microseconds: 100, or EMBEDSTACK_CPU_EARLY_WAIT_US (tests only). */
    waitUs: number;
    /** Wake-ups run on a JS thread (some find the job already ended). */
    wakes: number;
    /** Wake-ups that waited for the job's end and settled its promise. */
    settled: number;
    /** Wake-ups that returned with the job still running; the job's end settled the promise. */
    gaveUp: number;
  };
  /**
   * What Promise calls did with the typed arrays they read or write (README, "A Promise call
   * works on copies"), counts since the process started.
   */
  asyncCopies: {
    /** Arrays copied in, or given a private buffer copied out when the call settled. */
    arrays: number;
    /** Their bytes (an array both read and written counts once). */
    bytes: number;
    /** Output arrays over a SharedArrayBuffer, written in place (no copy); shared inputs are copied (counted above). */
    shared: number;
  };
}

/**
 * The typed boundary of the native addon (`build/Release/embedstack_cpu.node`),
 * in the spirit of tfjs-node's TFJSBinding: typed arrays and fixed-layout
 * Float64Array "structs" (see abi.ts), never string-keyed option bags.
 *
 * Every function validates what it receives (types, lengths, ranges, the handle)
 * and throws an Error with a `code` from core's ErrorCodes (plus `nativeLocation`,
 * the file:line of the failed check) for anything wrong; no input crashes the
 * process. Results are fresh arrays over native memory handed to JS (external
 * ArrayBuffers freed by the garbage collector), or, for find / findOrInsert /
 * lookupCombined, arrays the caller passes to be filled (every element is written).
 *
 * `xxx` runs on the calling thread, on copies of its inputs over a SharedArrayBuffer (another
 * thread may rewrite those while it runs), on the caller's other arrays in place; `xxxAsync` runs on the addon's thread pool (not
 * libuv's) on copies of the arrays it reads and writes, made when it is called (output arrays
 * over a SharedArrayBuffer are written in place); its outputs are copied into the caller's arrays
 * when it settles, and a buffer detached, transferred or shrunk meanwhile rejects it with
 * SHAPE_MISMATCH (README: "A Promise call works on copies"). Large batches are split over
 * the same number of threads in both forms. Every call runs its kernels in the default
 * floating-point mode, whatever the caller's (README: "Floating-point mode").
 */
export interface NativeBinding {
  /** Build and machine facts of the addon. */
  info(): NativeInfo;
  /**
   * Unmaps every idle block of the result cache (`info().resultCache`) and returns their
   * bytes. The cache is process-wide: blocks that results still alive return later.
   */
  clearResultCache(): number;
  /** Lengths of the config and optimizer vectors this build expects. */
  readonly abiFields: {
    /** Length of the table config vector (TABLE_FIELDS). */
    table: number;
    /** Length of the optimizer vector (OPTIMIZER_FIELDS). */
    optimizer: number;
    /** Length of the plan vector (PLAN_FIELDS). */
    plan: number;
  };
  /**
   * config: Float64Array(abiFields.table) laid out by TableField; slotWidths: floats per
   * row of each slot (dim or 1); slotInitial: each slot's initial value; initValues: the
   * `row` ([dim]) or `array` ([rows*dim]) initializer's values, else null.
   */
  createTable(config: Float64Array, slotWidths: Uint32Array, slotInitial: Float32Array, initValues: Float32Array | null): NativeTableHandle;

  /** Fresh result arrays, or (with outValues [n*dim] and outExists [n]) fills those and returns undefined. */
  find(t: NativeTableHandle, keys: Keys): NativeFindResult;
  /** Fills outValues [n * dim] and outExists [n] (every element written) and returns undefined. */
  find(t: NativeTableHandle, keys: Keys, outValues: Float32Array, outExists: Uint8Array): undefined;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  findAsync(t: NativeTableHandle, keys: Keys): Promise<NativeFindResult>;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  findAsync(t: NativeTableHandle, keys: Keys, outValues: Float32Array, outExists: Uint8Array): Promise<undefined>;
  /** find, inserting missing keys with their initial value; scores [n] only for the customized policy. Fresh result arrays. */
  findOrInsert(t: NativeTableHandle, keys: Keys, scores: BigUint64Array | null): NativeFindResult;
  /** findOrInsert filling outValues [n * dim] and outExists [n]; returns undefined. */
  findOrInsert(t: NativeTableHandle, keys: Keys, scores: BigUint64Array | null, outValues: Float32Array, outExists: Uint8Array): undefined;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  findOrInsertAsync(t: NativeTableHandle, keys: Keys, scores: BigUint64Array | null): Promise<NativeFindResult>;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  findOrInsertAsync(
    t: NativeTableHandle,
    keys: Keys,
    scores: BigUint64Array | null,
    outValues: Float32Array,
    outExists: Uint8Array,
  ): Promise<undefined>;
  /** Inserts or overwrites rows (values [n * dim]; scores [n] or null). */
  upsert(t: NativeTableHandle, keys: Keys, values: Float32Array, scores: BigUint64Array | null): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  upsertAsync(t: NativeTableHandle, keys: Keys, values: Float32Array, scores: BigUint64Array | null): Promise<void>;
  /** Overwrites present keys only (values [n * dim]; scores [n] or null). */
  assign(t: NativeTableHandle, keys: Keys, values: Float32Array, scores: BigUint64Array | null): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  assignAsync(t: NativeTableHandle, keys: Keys, values: Float32Array, scores: BigUint64Array | null): Promise<void>;
  /** RawTableSync.accum: deltas [n * dim], exists [n]; present & exists adds, absent & !exists inserts, else no-op. */
  accum(t: NativeTableHandle, keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  accumAsync(t: NativeTableHandle, keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): Promise<void>;
  /** Removes keys (static tables: resets their rows); returns how many. */
  remove(t: NativeTableHandle, keys: Keys): number;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  removeAsync(t: NativeTableHandle, keys: Keys): Promise<number>;
  /** Removes every row (static tables: resets them). */
  clear(t: NativeTableHandle): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  clearAsync(t: NativeTableHandle): Promise<void>;
  /** limit may be Infinity. */
  exportBatch(t: NativeTableHandle, offset: number, limit: number): NativeExportResult;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  exportBatchAsync(t: NativeTableHandle, offset: number, limit: number): Promise<NativeExportResult>;
  /** Bulk load: values [n * dim], slots (one [n * width] per slot, or null for initial values), scores [n] or null. */
  importRows(t: NativeTableHandle, keys: Keys, values: Float32Array, slots: Float32Array[] | null, scores: BigUint64Array | null): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  importRowsAsync(
    t: NativeTableHandle,
    keys: Keys,
    values: Float32Array,
    slots: Float32Array[] | null,
    scores: BigUint64Array | null,
  ): Promise<void>;
  /**
   * combiner: 0 sum, 1 mean, 2 sqrtn, 3 max, 4 min (abi.ts COMBINER_IDS); maxNorm 0 = none. Returns a fresh [nrows*dim], or
   * fills `out` ([nrows*dim]) and returns undefined.
   */
  lookupCombined(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    combiner: number,
    maxNorm: number,
    insertMissing: boolean,
    out?: Float32Array,
  ): Float32Array | undefined;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  lookupCombinedAsync(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    combiner: number,
    maxNorm: number,
    insertMissing: boolean,
    out?: Float32Array,
  ): Promise<Float32Array | undefined>;
  /** optimizer: Float64Array(abiFields.optimizer) laid out by OptimizerField. */
  applyGradients(t: NativeTableHandle, keys: Keys, grads: Float32Array, optimizer: Float64Array): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  applyGradientsAsync(t: NativeTableHandle, keys: Keys, grads: Float32Array, optimizer: Float64Array): Promise<void>;
  // ---- shard plans and the combiner's backward (rawTable.ts; plan: Float64Array(abiFields.plan) by PlanField, or null) ----
  /** Fills the owned entries' rows of outValues [n*dim] / outExists [n]; other entries are left as they are. */
  findPlanned(t: NativeTableHandle, keys: Keys, plan: Float64Array, outValues: Float32Array, outExists: Uint8Array): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  findPlannedAsync(t: NativeTableHandle, keys: Keys, plan: Float64Array, outValues: Float32Array, outExists: Uint8Array): Promise<void>;
  /** findOrInsert of the owned entries: fills their rows of outValues [n*dim] / outExists [n]; other entries are left as they are. */
  findOrInsertPlanned(
    t: NativeTableHandle,
    keys: Keys,
    scores: BigUint64Array | null,
    plan: Float64Array,
    outValues: Float32Array,
    outExists: Uint8Array,
  ): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  findOrInsertPlannedAsync(
    t: NativeTableHandle,
    keys: Keys,
    scores: BigUint64Array | null,
    plan: Float64Array,
    outValues: Float32Array,
    outExists: Uint8Array,
  ): Promise<void>;
  /** Adds this shard's part of each bag row to out (Float64Array [nrows*dim]). */
  lookupCombinedPartial(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    combiner: number,
    maxNorm: number,
    insertMissing: boolean,
    plan: Float64Array,
    out: Float64Array,
  ): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  lookupCombinedPartialAsync(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    combiner: number,
    maxNorm: number,
    insertMissing: boolean,
    plan: Float64Array,
    out: Float64Array,
  ): Promise<void>;
  /**
   * The whole bag over shard tables (one dim and key dtype) with their plans (Float64Array
   * [tables.length * PLAN_FIELDS]), rounded once: when the plans split keys by floorMod over
   * one N and every key of the bag has one owner, each row's entries summed in float64 in bag order, each from
   * its owner's table (one table's arithmetic); otherwise each shard's float64 partial added
   * in shard order. Fills `out` ([nrows*dim], written whole) and returns undefined, or
   * without `out` returns a fresh [nrows*dim].
   */
  lookupCombinedShards(
    tables: NativeTableHandle[],
    plans: Float64Array,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    combiner: number,
    maxNorm: number,
    insertMissing: boolean,
    out?: Float32Array | null,
  ): Float32Array | undefined;
  /**
   * As the method without `Async`, run on the native thread pool on copies of its arrays;
   * without `out`, the fresh result (as lookupCombinedAsync's) is written in place.
   */
  lookupCombinedShardsAsync(
    tables: NativeTableHandle[],
    plans: Float64Array,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    combiner: number,
    maxNorm: number,
    insertMissing: boolean,
    out?: Float32Array | null,
  ): Promise<Float32Array | undefined>;
  /**
   * applyCombinedGradients of every shard table (one dim and key dtype) with its plan
   * (Float64Array [tables.length * PLAN_FIELDS]) from one bag and its pooled grads
   * [nrows*dim], in one call: every table's optimizer checked first, distinct tables
   * trained in parallel on the pool.
   */
  applyCombinedGradientsShards(
    tables: NativeTableHandle[],
    plans: Float64Array,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    grads: Float32Array,
    combiner: number,
    maxNorm: number,
    optimizer: Float64Array,
  ): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  applyCombinedGradientsShardsAsync(
    tables: NativeTableHandle[],
    plans: Float64Array,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    grads: Float32Array,
    combiner: number,
    maxNorm: number,
    optimizer: Float64Array,
  ): Promise<void>;
  /** Per-entry gradients of the owned entries into out [nnz*dim] from pooled grads [nrows*dim]. */
  lookupCombinedBackward(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    grads: Float32Array,
    combiner: number,
    maxNorm: number,
    plan: Float64Array | null,
    out: Float32Array,
  ): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  lookupCombinedBackwardAsync(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    grads: Float32Array,
    combiner: number,
    maxNorm: number,
    plan: Float64Array | null,
    out: Float32Array,
  ): Promise<void>;
  /** lookupCombinedBackward of the owned entries fused with applyGradients of their local keys. */
  applyCombinedGradients(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    grads: Float32Array,
    combiner: number,
    maxNorm: number,
    plan: Float64Array | null,
    optimizer: Float64Array,
  ): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  applyCombinedGradientsAsync(
    t: NativeTableHandle,
    rowSplits: Int32Array,
    keys: Keys,
    weights: Float32Array | null,
    grads: Float32Array,
    combiner: number,
    maxNorm: number,
    plan: Float64Array | null,
    optimizer: Float64Array,
  ): Promise<void>;
  /** applyGradients of the owned entries under their local keys. */
  applyGradientsPlanned(t: NativeTableHandle, keys: Keys, grads: Float32Array, optimizer: Float64Array, plan: Float64Array): void;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  applyGradientsPlannedAsync(t: NativeTableHandle, keys: Keys, grads: Float32Array, optimizer: Float64Array, plan: Float64Array): Promise<void>;

  /** Keeps the numReserved highest-score rows; returns how many were removed. */
  restrict(t: NativeTableHandle, numReserved: number): number;
  /** As the method without `Async`, run on the native thread pool on copies of its arrays. */
  restrictAsync(t: NativeTableHandle, numReserved: number): Promise<number>;
  /** Rows held. */
  size(t: NativeTableHandle): number;
  /** Rows the table can hold before it grows or evicts (static: vocabularySize). */
  capacity(t: NativeTableHandle): number;
  /** Bytes of native memory the table holds. */
  memoryUsage(t: NativeTableHandle): number;
  /** Sets the epoch of the epochLru / epochLfu policies. */
  setEpoch(t: NativeTableHandle, epoch: number): void;
  /** Idempotent; later calls on the handle throw DISPOSED. Memory goes when running async calls end. */
  dispose(t: NativeTableHandle): void;
  /** Whether dispose() ran on the handle. */
  isDisposed(t: NativeTableHandle): boolean;
}

/**
 * The table functions a native table adapter (CpuRawTable) calls: every addon that
 * compiles this package's N-API layer offers them (the CUDA backend's too).
 */
export type NativeTableFunctions = Omit<NativeBinding, 'info' | 'clearResultCache' | 'abiFields'>;
