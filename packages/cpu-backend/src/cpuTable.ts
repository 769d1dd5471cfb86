import type {
  Bag,
  Combiner,
  LookupCombiner,
  ExportBatch,
  FindResult,
  Keys,
  RawTable,
  RawTableAsync,
  RawTableSync,
  ResolvedOptimizer,
  ResolvedShardPlan,
  ResolvedTableOptions,
  ShardPart,
} from '@embedstack/core';
import { EmbeddingError, FailedPreconditionError, InvalidTypeError, invalidParameter } from '@embedstack/core';
import { constants as bufferConstants } from 'node:buffer';
import { encodeOptimizer, encodePlan, encodePlans, encodeTable } from './abi.js';
import { call, callAsync } from './errors.js';
import { checkBag, checkFindOut, checkOptimizer, checkParts, checkPlan, combinerId, lengthOf } from './rawArgs.js';
import type { NativeExportResult, NativeFindResult, NativeTableFunctions, NativeTableHandle } from './native.js';

/**
 * Calls doing at least this much work (keys * dim floats moved) run on the addon's
 * thread pool (`xxxAsync`), so the event loop stays free; smaller ones run inline,
 * where a thread hop would cost more than the call.
 */
export const ASYNC_MIN_WORK = 1 << 17;

/** The most bytes Buffer.allocUnsafeSlow makes (buffer.constants.MAX_LENGTH). */
const MAX_BUFFER_BYTES = bufferConstants.MAX_LENGTH;

const toExport = ([keys, values, slots, scores]: NativeExportResult): ExportBatch => ({ keys, values, slots, scores });
const toFind = ([values, exists]: NativeFindResult): FindResult => ({ values, exists });

/**
 * A fresh Float32Array the addon fills completely: the result of a sync call (and of a
 * Promise call small enough to run inline) without `out`. Large ones come uninitialised
 * from Node's allocator (no zero fill; the garbage collector frees them without waiting
 * for the event loop, so memory is reused even by tight synchronous loops).
 *
 * A Promise call on the pool without `out` (find, findOrInsert without a plan,
 * lookupCombined) does not use these: the addon allocates its result from its result
 * cache and the job writes it in place (nothing else can reach that array before the call
 * settles, so unlike a caller's array it needs no private copy and no copy back), and the
 * block returns to the cache once V8 collected the array and Node ran its finalizer, as
 * the event loop turns, which a caller awaiting each call lets it do.
 */
function floats(n: number): Float32Array {
  if (n * 4 < 65536) return new Float32Array(n);
  try {
    // Buffer.allocUnsafeSlow makes at most buffer.constants.MAX_LENGTH bytes (4 GiB on Node 20); a larger
    // array is zero-filled (its pages mapped as the call writes them).
    if (n * 4 <= MAX_BUFFER_BYTES) return new Float32Array(Buffer.allocUnsafeSlow(n * 4).buffer, 0, n);
    return new Float32Array(n);
  } catch (e) {
    // A RangeError: more floats than a Float32Array holds, or memory the engine could not get
    const message = String((e as Error)?.message);
    const why = /length/i.test(message)
      ? `Expected a result that fits one Float32Array on this Node but this call's has ${n} floats`
      : `Out of memory: could not allocate ${n * 4} bytes for a result of ${n} floats`;
    throw new FailedPreconditionError(`${why} (${message}); nothing was written`, { cause: e });
  }
}

/** Runs JS code reading an argument the checks let through (encodeTable's resolved options): a TypeError there is INVALID_TYPE naming it. */
function reading<R>(argument: string, expected: string, fn: () => R): R {
  try {
    return fn();
  } catch (e) {
    if (e instanceof EmbeddingError || (e as { code?: unknown } | null)?.code !== undefined) throw e;
    throw new InvalidTypeError(`Expected ${argument} to be ${expected} but reading it failed: ${(e as Error)?.message}`, { argument, cause: e });
  }
}

function findResult(n: number, dim: number): FindResult {
  return { values: floats(n * dim), exists: new Uint8Array(n) };
}

function inline<R>(fn: () => R): Promise<R> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

/** Binding and handle of the tables this class itself made (not a subclass's): the ones lookupCombinedShards fuses. */
const fusable = new WeakMap<object, { b: NativeTableFunctions; h: NativeTableHandle }>();

/**
 * The RawTable of the CPU backend: a native table (host memory, see the addon's
 * dynamic_table.h / static_table.h) behind a handle. Sync ops call the addon on
 * the calling thread; async ops go to the addon's thread pool when large (ASYNC_MIN_WORK).
 * Any number of calls may overlap: the native table has a reader-writer lock.
 * Errors are core EmbeddingErrors (native failures keep their code and stack).
 *
 * Reachable by users (exported, and `table.raw` of a CPU table), so every method checks
 * its arguments: what this class reads itself in rawArgs.ts, the arrays and numbers in the
 * addon; junk is a coded error and a rejected call changes nothing. The arguments are
 * core's RawTable contract (keys as BigInt64Array / Int32Array, resolved optimizers and
 * plans): a table's public API (EmbeddingTable) converts and validates user input first.
 */
export class CpuRawTable implements RawTable {
  readonly sync: RawTableSync;
  readonly async: RawTableAsync;
  /**
   * The addon's static table refuses an out-of-range row index in lookupCombined before it
   * writes anything (static_table.cc, checkKeys, over the pool), so core skips its serial
   * check of the bag's ids (RawTable.checksRowIndices). This class's tables only: a
   * subclass's addon (CUDA) says so itself.
   */
  readonly checksRowIndices: boolean;
  readonly #b: NativeTableFunctions;
  readonly #h: NativeTableHandle;
  readonly #dim: number;

  /**
   * @throws InvalidTypeError when `binding` has no createTable or `options` are not resolved table options
   * (resolveTableOptions); the addon's coded errors for values it refuses
   */
  constructor(binding: NativeTableFunctions, options: ResolvedTableOptions) {
    if (typeof binding !== 'object' || binding === null || typeof (binding as { createTable?: unknown }).createTable !== 'function') {
      throw invalidParameter('binding', "the addon's table functions (NativeTableFunctions)", binding, InvalidTypeError);
    }
    if (typeof options !== 'object' || options === null) throw invalidParameter('options', 'resolved table options (resolveTableOptions)', options, InvalidTypeError);
    this.checksRowIndices = new.target === CpuRawTable;
    this.#b = binding;
    // encodeTable reads fields a hand-made object may lack (options.initializer.kind, options.slots.widths)
    const e = reading('options', 'resolved table options (resolveTableOptions)', () => encodeTable(options));
    this.#dim = options.dim;
    this.#h = call(() => binding.createTable(e.config, e.slotWidths, e.slotInitial, e.initValues));
    const b = binding;
    const h = this.#h;
    const big = (n: number): boolean => n * Math.max(this.#dim, 8) >= ASYNC_MIN_WORK;
    const comb = (c: LookupCombiner): number => combinerId(c);
    const dim = this.#dim;
    const bagOut = (bag: Bag<Keys>, out: Float32Array | null): Float32Array => out ?? floats(Math.max(0, lengthOf(bag.rowSplits) - 1) * dim);
    const plan = (p: ResolvedShardPlan | null): Float64Array | null => encodePlan(checkPlan(p));
    const opt = (o: ResolvedOptimizer): Float64Array => encodeOptimizer(checkOptimizer(o));
    const findOut = (keys: Keys, out: FindResult | null): FindResult => {
      checkFindOut(out);
      return out ?? findResult(lengthOf(keys), dim);
    };

    const sync: RawTableSync = {
      find: (keys, out, p) => {
        const r = findOut(keys, out);
        if (p) call(() => b.findPlanned(h, keys, plan(p)!, r.values, r.exists));
        else call(() => b.find(h, keys, r.values, r.exists));
        return r;
      },
      findOrInsert: (keys, scores, out, p) => {
        const r = findOut(keys, out);
        if (p) call(() => b.findOrInsertPlanned(h, keys, scores, plan(p)!, r.values, r.exists));
        else call(() => b.findOrInsert(h, keys, scores, r.values, r.exists));
        return r;
      },
      upsert: (keys, values, scores) => call(() => b.upsert(h, keys, values, scores)),
      assign: (keys, values, scores) => call(() => b.assign(h, keys, values, scores)),
      accum: (keys, deltas, exists, scores) => call(() => b.accum(h, keys, deltas, exists, scores)),
      remove: (keys) => call(() => b.remove(h, keys)),
      clear: () => call(() => b.clear(h)),
      size: () => call(() => b.size(h)),
      capacity: () => call(() => b.capacity(h)),
      memoryUsage: () => call(() => b.memoryUsage(h)),
      exportBatch: (offset, limit) => toExport(call(() => b.exportBatch(h, offset, limit))),
      importRows: (keys, values, slots, scores) => call(() => b.importRows(h, keys, values, slots, scores)),
      lookupCombined: (bag: Bag<Keys>, combiner, maxNorm, insertMissing, given) => {
        const out = bagOut(checkBag(bag), given);
        call(() => b.lookupCombined(h, bag.rowSplits, bag.keys, bag.weights, comb(combiner), maxNorm, insertMissing, out));
        return out;
      },
      lookupCombinedPartial: (bag, combiner, maxNorm, insertMissing, p, out) => {
        checkBag(bag);
        call(() =>
          b.lookupCombinedPartial(h, bag.rowSplits, bag.keys, bag.weights, comb(combiner), maxNorm, insertMissing, plan(p)!, out),
        );
        return out;
      },
      lookupCombinedBackward: (bag, grads, combiner, maxNorm, p, out) => {
        checkBag(bag);
        call(() => b.lookupCombinedBackward(h, bag.rowSplits, bag.keys, bag.weights, grads, comb(combiner), maxNorm, plan(p), out));
        return out;
      },
      applyCombinedGradients: (bag, grads, combiner, maxNorm, p, optimizer) => {
        checkBag(bag);
        call(() => b.applyCombinedGradients(h, bag.rowSplits, bag.keys, bag.weights, grads, comb(combiner), maxNorm, plan(p), opt(optimizer)));
      },
      applyGradients: (keys, grads, optimizer: ResolvedOptimizer, p) =>
        p
          ? call(() => b.applyGradientsPlanned(h, keys, grads, opt(optimizer), plan(p)!))
          : call(() => b.applyGradients(h, keys, grads, opt(optimizer))),
      restrict: (numReserved) => call(() => b.restrict(h, numReserved)),
      setEpoch: (epoch) => call(() => b.setEpoch(h, epoch)),
      dispose: () => call(() => b.dispose(h)),
    };
    this.sync = sync;
    if (new.target === CpuRawTable) fusable.set(this, { b, h });

    const sizeOf = (): number => {
      try {
        return b.size(h);
      } catch {
        return 0; // disposed: the call below reports it
      }
    };
    this.async = {
      find: (keys, out, p) => {
        if (!big(lengthOf(keys))) return inline(() => sync.find(keys, out, p));
        checkFindOut(out);
        if ((out === null || out === undefined) && !p) return callAsync(() => b.findAsync(h, keys)).then(toFind);
        const r = findOut(keys, out);
        const run = p ? () => b.findPlannedAsync(h, keys, plan(p)!, r.values, r.exists) : () => b.findAsync(h, keys, r.values, r.exists);
        return callAsync<unknown>(run).then(() => r);
      },
      findOrInsert: (keys, scores, out, p) => {
        if (!big(lengthOf(keys))) return inline(() => sync.findOrInsert(keys, scores, out, p));
        checkFindOut(out);
        if ((out === null || out === undefined) && !p) return callAsync(() => b.findOrInsertAsync(h, keys, scores)).then(toFind);
        const r = findOut(keys, out);
        const run = p
          ? () => b.findOrInsertPlannedAsync(h, keys, scores, plan(p)!, r.values, r.exists)
          : () => b.findOrInsertAsync(h, keys, scores, r.values, r.exists);
        return callAsync<unknown>(run).then(() => r);
      },
      upsert: (keys, values, scores) =>
        big(lengthOf(keys)) ? callAsync(() => b.upsertAsync(h, keys, values, scores)) : inline(() => sync.upsert(keys, values, scores)),
      assign: (keys, values, scores) =>
        big(lengthOf(keys)) ? callAsync(() => b.assignAsync(h, keys, values, scores)) : inline(() => sync.assign(keys, values, scores)),
      accum: (keys, deltas, exists, scores) =>
        big(lengthOf(keys))
          ? callAsync(() => b.accumAsync(h, keys, deltas, exists, scores))
          : inline(() => sync.accum(keys, deltas, exists, scores)),
      remove: (keys) => (big(lengthOf(keys)) ? callAsync(() => b.removeAsync(h, keys)) : inline(() => sync.remove(keys))),
      clear: () => (big(sizeOf()) ? callAsync(() => b.clearAsync(h)) : inline(() => sync.clear())),
      exportBatch: (offset, limit) =>
        typeof offset === 'number' && typeof limit === 'number' && big(Math.min(limit, Math.max(0, sizeOf() - offset)))
          ? callAsync(() => b.exportBatchAsync(h, offset, limit)).then(toExport)
          : inline(() => sync.exportBatch(offset, limit)),
      importRows: (keys, values, slots, scores) =>
        big(lengthOf(keys))
          ? callAsync(() => b.importRowsAsync(h, keys, values, slots, scores))
          : inline(() => sync.importRows(keys, values, slots, scores)),
      lookupCombined: (bag, combiner, maxNorm, insertMissing, given) => {
        if (!big(lengthOf(checkBag(bag).keys))) return inline(() => sync.lookupCombined(bag, combiner, maxNorm, insertMissing, given));
        if (given === null || given === undefined) {
          return callAsync(() => b.lookupCombinedAsync(h, bag.rowSplits, bag.keys, bag.weights, comb(combiner), maxNorm, insertMissing)).then(
            (fresh) => fresh!,
          );
        }
        return callAsync(() =>
          b.lookupCombinedAsync(h, bag.rowSplits, bag.keys, bag.weights, comb(combiner), maxNorm, insertMissing, given),
        ).then(() => given);
      },
      lookupCombinedPartial: (bag, combiner, maxNorm, insertMissing, p, out) => {
        if (!big(lengthOf(checkBag(bag).keys))) return inline(() => sync.lookupCombinedPartial(bag, combiner, maxNorm, insertMissing, p, out));
        return callAsync(() =>
          b.lookupCombinedPartialAsync(h, bag.rowSplits, bag.keys, bag.weights, comb(combiner), maxNorm, insertMissing, plan(p)!, out),
        ).then(() => out);
      },
      lookupCombinedBackward: (bag, grads, combiner, maxNorm, p, out) => {
        if (!big(lengthOf(checkBag(bag).keys))) return inline(() => sync.lookupCombinedBackward(bag, grads, combiner, maxNorm, p, out));
        return callAsync(() =>
          b.lookupCombinedBackwardAsync(h, bag.rowSplits, bag.keys, bag.weights, grads, comb(combiner), maxNorm, plan(p), out),
        ).then(() => out);
      },
      applyCombinedGradients: (bag, grads, combiner, maxNorm, p, optimizer) =>
        big(lengthOf(checkBag(bag).keys))
          ? callAsync(() =>
              b.applyCombinedGradientsAsync(
                h,
                bag.rowSplits,
                bag.keys,
                bag.weights,
                grads,
                comb(combiner),
                maxNorm,
                plan(p),
                opt(optimizer),
              ),
            )
          : inline(() => sync.applyCombinedGradients(bag, grads, combiner, maxNorm, p, optimizer)),
      applyGradients: (keys, grads, optimizer, p) => {
        if (!big(lengthOf(keys))) return inline(() => sync.applyGradients(keys, grads, optimizer, p));
        return p
          ? callAsync(() => b.applyGradientsPlannedAsync(h, keys, grads, opt(optimizer), plan(p)!))
          : callAsync(() => b.applyGradientsAsync(h, keys, grads, opt(optimizer)));
      },
      restrict: (numReserved) =>
        big(sizeOf()) ? callAsync(() => b.restrictAsync(h, numReserved)) : inline(() => sync.restrict(numReserved)),
    };
  }

  /**
   * The whole bag over shard tables of this backend in one native call (core's
   * lookupCombinedShards): chunks of the bag's rows run in parallel on the addon's
   * pool. When the plans split keys by floorMod over one N and every key of the bag has one owner (sok's
   * placement), each chunk gathers its entries' rows from their owners and sums each
   * row's entries in bag order in float64, rounded once: bit for bit one table holding
   * every row. Other plans: every shard's entries of the chunk's rows pooled and the
   * shards' float64 partial sums added in shard order, rounded once (bit for bit the
   * partials added in order). Into `out`, or without it into a new array: a Promise call
   * on the pool gets the addon's fresh result, written in place (as lookupCombined's: no
   * private copy and no copy back on the JS thread).
   * Null (core adds the partials) when a part is not a table of this class on the same
   * addon (a CUDA table, another backend's, or one of another loaded CPU level).
   */
  lookupCombinedShards(parts: readonly ShardPart[], bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, insertMissing: boolean, out: Float32Array | null): Promise<Float32Array> | null {
    const b = this.#b;
    checkBag(bag);
    const handles = this.#fusedHandles(checkParts(parts));
    if (handles === null) return null;
    const plans = encodePlans(parts.map((p) => p.plan));
    const c = combinerId(combiner);
    if (!this.#big(bag)) {
      const into = out ?? floats(Math.max(0, lengthOf(bag.rowSplits) - 1) * this.#dim);
      return inline(() => (call(() => b.lookupCombinedShards(handles, plans, bag.rowSplits, bag.keys, bag.weights, c, maxNorm, insertMissing, into)), into));
    }
    if (out === null || out === undefined) {
      return callAsync(() => b.lookupCombinedShardsAsync(handles, plans, bag.rowSplits, bag.keys, bag.weights, c, maxNorm, insertMissing)).then((fresh) => fresh!);
    }
    return callAsync(() => b.lookupCombinedShardsAsync(handles, plans, bag.rowSplits, bag.keys, bag.weights, c, maxNorm, insertMissing, out)).then(() => out);
  }

  /**
   * Every shard's applyCombinedGradients in one native call (core's
   * applyCombinedGradientsShards): every table's optimizer is checked before any row
   * changes, and the shard tables train in parallel on the addon's pool, each exactly as
   * its own applyCombinedGradients. Null (core calls each shard) when a part is not a
   * table of this class on the same addon.
   */
  applyCombinedGradientsShards(parts: readonly ShardPart[], bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, maxNorm: number, optimizer: ResolvedOptimizer): Promise<void> | null {
    const b = this.#b;
    checkBag(bag);
    const handles = this.#fusedHandles(checkParts(parts));
    if (handles === null) return null;
    const args = [handles, encodePlans(parts.map((p) => p.plan)), bag.rowSplits, bag.keys, bag.weights, grads, combinerId(combiner), maxNorm, encodeOptimizer(checkOptimizer(optimizer))] as const;
    if (!this.#big(bag)) return inline(() => call(() => b.applyCombinedGradientsShards(...args)));
    return callAsync(() => b.applyCombinedGradientsShardsAsync(...args));
  }

  /** The native handles of `parts` when every one is a table of this class on this addon, else null. */
  #fusedHandles(parts: readonly { raw: unknown }[]): NativeTableHandle[] | null {
    const handles: NativeTableHandle[] = [];
    for (const p of parts) {
      const t = typeof p.raw === 'object' && p.raw !== null ? fusable.get(p.raw) : undefined;
      if (t === undefined || t.b !== this.#b) return null;
      handles.push(t.h);
    }
    return handles;
  }

  /** Whether a bag is worth the native pool (ASYNC_MIN_WORK). */
  #big(bag: Bag<Keys>): boolean {
    return lengthOf(bag.keys) * Math.max(this.#dim, 8) >= ASYNC_MIN_WORK;
  }

  size(): number {
    return this.sync.size();
  }
  capacity(): number {
    return this.sync.capacity();
  }
  memoryUsage(): number {
    return this.sync.memoryUsage();
  }
  setEpoch(epoch: number): void {
    this.sync.setEpoch(epoch);
  }
  /** Frees the native memory (at once, or when running async calls end). Idempotent. */
  dispose(): void {
    this.#b.dispose(this.#h);
  }
  /** True once dispose() has run. */
  get disposed(): boolean {
    return this.#b.isDisposed(this.#h);
  }
}
