import { applyCombinedGradientsShards, type Bag, type Combiner, type Keys, lookupCombinedShards, type OptimizerSpec, type TableShard } from '@embedstack/core';
import { InProcessCommunicator } from './communicator.js';
import type { DeviceShard, SokVariable } from './variable.js';

/**
 * The SOK v2 data flow over the devices of a variable, every arithmetic step in
 * core ops (the backend's native code):
 *
 * - forward: the batch's rows are split into N contiguous chunks (device e's
 *   data-parallel input); the devices allgather the keys; each owner pools its entries
 *   of the whole batch (core `lookupCombinedPartial`: float64 partial sums over each
 *   row's whole denominator), the devices concurrently; the pooled partial vectors
 *   travel to the chunk's device and are added there (the communicator's
 *   reduce-scatter: NCCL's on GPUs, an element-wise float64 sum in device order
 *   in-process); each chunk is rounded to float32 once, by that reduction, into the
 *   chunk's rows of the output.
 * - backward and training: the pooled gradients are allgathered, then each owner runs
 *   core `applyCombinedGradients` / `lookupCombinedBackward` / `applyGradients` with its
 *   shard plan (it touches only the entries it owns, under their local keys). With the
 *   default in-process communicator the fused step is core `applyCombinedGradientsShards`,
 *   one backend call for every device (the same per-device steps).
 *
 * One device holding the whole table (N = 1 or `localized:k`) calls the core op
 * directly, with no plan and no accumulator. With the default in-process communicator
 * (every device in this process) the forward is core `lookupCombinedShards`, one backend
 * call (no allgather views, no send buffers, no per-device dispatch): where core adds
 * the partials, the same device-order sum; the CPU backend sums each row's entries in
 * bag order from their owners' tables, as one device's table does (the same values as
 * 1 device, bit for bit; the collectives' device-order sum of the same float64 terms
 * agrees within 1e-6 unless a row's terms cancel). Another
 * communicator gets the collectives.
 */

/** Row ranges [start, end) of N contiguous chunks of `nrows` (sizes differ by at most 1). */
export function chunkRows(nrows: number, n: number): [number, number][] {
  const base = Math.floor(nrows / n);
  const extra = nrows % n;
  const out: [number, number][] = [];
  let at = 0;
  for (let c = 0; c < n; c++) {
    const size = base + (c < extra ? 1 : 0);
    out.push([at, at + size]);
    at += size;
  }
  return out;
}

/** Entries of rows [r0, r1) of a bag's per-entry array (keys or weights), as a view. */
function entries<T extends Keys | Float32Array>(a: T, rowSplits: Int32Array, r0: number, r1: number): T {
  return a.subarray(rowSplits[r0]!, rowSplits[r1]!) as T;
}

/** The shard of `v` on `device`, or null (shards are in device order; a localized variable has one). */
function shardOf(v: SokVariable, device: number): DeviceShard | null {
  const s = v.shards[device];
  return s && s.device === device ? s : (v.shards.find((x) => x.device === device) ?? null);
}

/** The one table of a variable that needs no plan, or null when its rows are spread over devices. */
function whole(v: SokVariable): DeviceShard | null {
  return v.shards.length === 1 && v.shards[0]!.plan === null ? v.shards[0]! : null;
}

/** Whether every device of `v` is in this process (the default communicator, not a subclass). */
function inProcess(v: SokVariable): boolean {
  return Object.getPrototypeOf(v.ctx.communicator) === InProcessCommunicator.prototype;
}

/** Each variable's shards as core's shard ops take them, kept while its tables stay the same. */
const partsKept = new WeakMap<SokVariable, readonly TableShard[]>();

/** The shards of `v` as `{ table, plan }` for core's fused shard ops (made again only after its tables changed). */
function shardParts(v: SokVariable): readonly TableShard[] {
  const shards = v.shards;
  const kept = partsKept.get(v);
  if (kept !== undefined && kept.length === shards.length) {
    let same = true;
    for (let d = 0; d < shards.length; d++) if (kept[d]!.table !== shards[d]!.table || kept[d]!.plan !== shards[d]!.plan) same = false;
    if (same) return kept;
  }
  const parts = Object.freeze(shards.map((s) => Object.freeze({ table: s.table, plan: s.plan! })));
  partsKept.set(v, parts);
  return parts;
}

/**
 * Pooled lookup of `bag` [nrows rows] on `v`: float32 [nrows * dim] (`combiner` over
 * each row; missing dynamic keys inserted when `insert`), written into `given` [nrows * dim]
 * when not null (then the result is `given`).
 */
export async function poolRows(v: SokVariable, bag: Bag<Keys>, combiner: Combiner, insert: boolean, given: Float32Array | null = null): Promise<Float32Array> {
  const dim = v.dimension;
  const nrows = bag.rowSplits.length - 1;
  const one = whole(v);
  const opts = given ? { combiner, insertMissing: insert, out: given } : { combiner, insertMissing: insert };
  if (one) return written(one.table.lookupCombined(bag, opts), given);
  if (inProcess(v)) {
    // Every device is in this process: one core call pools the whole batch over every
    // shard, rounding once (the CPU backend: one native call, chunks of the batch's rows in
    // parallel on its pool, each row's entries in bag order as on one device; core's
    // fallback: the partials in device order, the values of the exchange below).
    return written(lookupCombinedShards(shardParts(v), bag, opts), given);
  }
  const comm = v.ctx.communicator;
  const chunks = chunkRows(nrows, comm.numDevices);
  // The output's chunk views first, before any await (a caller's array on a resizable buffer
  // cannot have shrunk yet; core's ops check each view's length again when they write).
  const out = given ?? new Float32Array(nrows * dim);
  const outChunks = chunks.map(([r0, r1]) => out.subarray(r0 * dim, r1 * dim));
  // allgather: every device sees every device's keys and weights (in-process: a view of the batch).
  const keys = await comm.allgather(chunks.map(([r0, r1]) => entries(bag.keys, bag.rowSplits, r0, r1)));
  const weights = bag.weights ? await comm.allgather(chunks.map(([r0, r1]) => entries(bag.weights!, bag.rowSplits, r0, r1))) : null;
  const gathered: Bag<Keys> = { rowSplits: bag.rowSplits, keys, weights };
  // Each owner pools its entries of the whole batch into its send buffer; the reduce-scatter
  // brings chunk e of every device's partial sums to device e, adds them and rounds them
  // to float32 once, straight into the chunk's rows of the output.
  await comm.reduceScatter(
    outChunks,
    async (device, send) => {
      const s = shardOf(v, device);
      if (s) await s.table.lookupCombinedPartial(gathered, { combiner, plan: s.plan!, insertMissing: insert, out: send });
    },
  );
  return out;
}

/** A core op's result, or the caller's array `given` it wrote into (no extra step without one). */
function written(result: Promise<Float32Array>, given: Float32Array | null): Promise<Float32Array> {
  return given ? result.then(() => given) : result;
}

/** The pooled gradients of every device's chunk, as every device sees them (allgather). */
async function gatherGrads(v: SokVariable, grads: Float32Array, nrows: number): Promise<Float32Array> {
  const comm = v.ctx.communicator;
  const dim = v.dimension;
  return comm.allgather(chunkRows(nrows, comm.numDevices).map(([r0, r1]) => grads.subarray(r0 * dim, r1 * dim)));
}

/** One fused optimizer step of `v` from the pooled gradients `grads` [nrows * dim] of `bag`. */
export async function applyPooled(v: SokVariable, bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, spec: OptimizerSpec, step: number): Promise<void> {
  const one = whole(v);
  if (one) return one.table.applyCombinedGradients(bag, grads, spec, step, { combiner });
  // Every device in this process: the gradients are already where every device sees them,
  // and one core call trains every shard (the CPU backend: one native call, the shards in
  // parallel on its pool, each exactly its own applyCombinedGradients).
  if (inProcess(v)) return applyCombinedGradientsShards(shardParts(v), bag, grads, spec, step, { combiner });
  const all = await gatherGrads(v, grads, bag.rowSplits.length - 1);
  await Promise.all(v.shards.map((s) => s.table.applyCombinedGradients(bag, all, spec, step, { combiner, plan: s.plan })));
}

/** One optimizer step of `v` from per-entry gradients `grads` [keys.length * dim] (duplicate keys summed). */
export async function applyRows(v: SokVariable, keys: Keys, grads: Float32Array, spec: OptimizerSpec, step: number): Promise<void> {
  const one = whole(v);
  if (one) return one.table.applyGradients(keys, grads, spec, step);
  await Promise.all(v.shards.map((s) => s.table.applyGradients(keys, grads, spec, step, { plan: s.plan })));
}

/** Per-entry gradients [nnz * dim] (bag order) of pooled gradients `grads`, synchronously (the tape's IndexedSlices). */
export function backwardSync(v: SokVariable, bag: Bag<Keys>, grads: Float32Array, combiner: Combiner): Float32Array {
  const one = whole(v);
  if (one) return one.table.lookupCombinedBackwardSync(bag, grads, { combiner });
  const out = new Float32Array(bag.keys.length * v.dimension);
  for (const s of v.shards) s.table.lookupCombinedBackwardSync(bag, grads, { combiner, plan: s.plan, out });
  return out;
}

/** Trims full 'hybrid' device tables down to `ratio` of their cap (core `restrict`: the lowest scores go). */
export async function trimToRatio(v: SokVariable, cap: number, ratio: number): Promise<void> {
  if (cap === Infinity || ratio >= 1) return;
  const keep = Math.max(0, Math.floor(cap * ratio));
  await Promise.all(v.shards.map(async (s) => {
    if (s.table.size() >= cap) await s.table.restrict(keep);
  }));
}
