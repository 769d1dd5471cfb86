import {
  type Bag,
  type EmbeddingTable,
  FailedPreconditionError,
  type Keys,
  type OptimizerSpec,
} from '@embedstack/core';
import { uniqueKeys } from './keys.js';
import { CuckooHashTableCreator, shardScores } from './kvCreators.js';
import { gatherFlags, gatherRows } from './partition.js';
import type { LookupRecord, RecordLease, ShadowVariable } from './shadow.js';
import type { Binding, VariableState } from './variableState.js';

/**
 * Optimizer binding and the training step of a Variable. The step runs in core:
 * `applyGradients` (dedupe + one fused update per row) for lookups of single rows,
 * `applyCombinedGradients` (the combiner's and maxNorm's backward fused with it) for
 * sparse lookups and maxNorm; with the default partitioner every shard routes its
 * own keys in the backend (shard plans).
 */

/**
 * Throws when `owner` cannot train this variable (disposed, a slot view, or bound
 * to another optimizer), so an optimizer can check every pair before updating any.
 */
export function checkBindable(state: VariableState, owner: object): void {
  state.checkAlive();
  if (state.view) throw new FailedPreconditionError(`Variable "${state.name}" is a slot view and cannot be trained`);
  const b = state.binding;
  if (b && b.owner !== owner) {
    throw new FailedPreconditionError(
      `Expected Variable "${state.name}" to be trained by one optimizer but it is already trained by another ${b.spec.kind} optimizer; create one optimizer per variable`,
      { argument: 'optimizer' },
    );
  }
}

/** Attaches `owner`'s optimizer on first use: adds its slots beside the rows (or in companion state tables). */
export async function bind(
  state: VariableState,
  owner: object,
  spec: OptimizerSpec,
  slotNames: readonly string[],
  optimizerName: string,
  bpV2: boolean,
): Promise<Binding> {
  checkBindable(state, owner);
  if (state.bindingPending) await state.bindingPending.catch(() => undefined);
  checkBindable(state, owner);
  const b = state.binding;
  if (b) return b;
  state.bindingPending = makeBinding(state, owner, spec, slotNames, optimizerName, bpV2);
  try {
    state.binding = await state.bindingPending;
    return state.binding;
  } finally {
    state.bindingPending = null;
  }
}

async function makeBinding(
  state: VariableState,
  owner: object,
  spec: OptimizerSpec,
  slotNames: readonly string[],
  optimizerName: string,
  bpV2: boolean,
): Promise<Binding> {
  const creator = state.cfg.kvCreator;
  const fused = creator.holdsSlots && !bpV2;
  const hasSlots = spec.slots.names.length > 0;
  let stateTables: EmbeddingTable[] | null = null;
  if (fused && hasSlots) {
    await state.beforeWrite();
    const fresh: EmbeddingTable[] = [];
    try {
      for (let i = 0; i < state.shardNum; i++) {
        const t = creator.create(state.shardSpec(i, spec));
        fresh.push(t);
        await state.stores[i]!.ready();
        for await (const batch of state.tables[i]!.exportBatches()) await t.importRows(batch.keys, batch.values, null, batch.scores);
      }
    } catch (e) {
      for (const t of fresh) t.dispose();
      throw e;
    }
    const old = state.tables;
    state.tables = fresh;
    for (const t of old) t.dispose();
  } else if (!fused) {
    const memory = new CuckooHashTableCreator();
    stateTables = [];
    for (let i = 0; i < state.shardNum; i++) {
      const s = state.shardSpec(i, spec);
      stateTables.push(memory.create({ ...s, tableName: `${s.tableName}_slots`, initSize: 0 }));
    }
  }
  const slotViewNames = spec.slots.names.map((n, j) => `${state.name}/${optimizerName}/${slotNames[j] ?? n}`);
  return { owner, spec, fused, bpV2, stateTables, slotViewNames };
}

/** The record's pooling as a core bag over its ids (one row per id when the lookup did not pool). */
function recordBag(r: LookupRecord): { bag: Bag<Keys>; combiner: 'sum' | 'mean' | 'sqrtn' } {
  if (r.bag) return { bag: { rowSplits: r.bag.rowSplits, keys: r.ids, weights: r.bag.weights }, combiner: r.bag.combiner };
  const rowSplits = new Int32Array(r.ids.length + 1);
  for (let i = 0; i <= r.ids.length; i++) rowSplits[i] = i;
  return { bag: { rowSplits, keys: r.ids, weights: null }, combiner: 'sum' };
}

/**
 * Per-id gradients of a record from the gradient of its output: the output gradient
 * itself for plain lookups; core's lookupCombinedBackward otherwise, on a scratch
 * in-memory table holding the rows `rows` (maxNorm's backward reads them).
 */
async function perIdGradients(r: LookupRecord, grads: Float32Array, rows: Float32Array, state: VariableState): Promise<Float32Array> {
  if (!r.bag && r.maxNorm === 0) return grads;
  const { bag, combiner } = recordBag(r);
  const scratch = state.cfg.kvCreator.scratchTable(state.shardSpec(0, null), r.ids.length);
  try {
    if (r.maxNorm > 0) await scratch.upsert(r.ids, rows);
    return await scratch.lookupCombinedBackward(bag, grads, { combiner, maxNorm: r.maxNorm || null });
  } finally {
    scratch.dispose();
  }
}

/**
 * One optimizer step on the rows of the lookup `lease` holds (trainable `t`'s last
 * lookup when the step was asked for; a lookup recording meanwhile does not change it),
 * `grads` being the gradient of that lookup's output. Fused (slots beside the rows): when the
 * variable was written after the lookup, the looked-up rows v0 are written back
 * first (TFRA sets f(v0)); then core's fused update runs on every shard. Otherwise
 * (bpV2, slots in companion tables): each shard's state table computes f(v0) and
 * the variable is set (upsert) or, with bpV2, accumulated (accum of f(v0) - v0 for
 * keys that existed at the lookup).
 */
export async function trainStep(state: VariableState, b: Binding, t: ShadowVariable, lease: RecordLease, grads: Float32Array, step: number, sequential: boolean): Promise<void> {
  state.checkAlive();
  const r = lease.record;
  const creator = state.cfg.kvCreator;
  const epoch = creator.epochFor(step);
  if (epoch !== null) for (const table of state.tables) table.setEpoch(epoch);
  await state.beforeWrite(t);
  const each = async (fn: (s: number) => Promise<void>): Promise<void> => {
    if (sequential) for (let s = 0; s < state.shardNum; s++) await fn(s);
    else await Promise.all(Array.from({ length: state.shardNum }, (_, s) => fn(s)));
  };
  if (b.fused) {
    // 'customized' scores come with writes only: the rows are written back with them first.
    if (creator.givesScores) await lease.capture();
    const v0 = lease.v0;
    if (v0) {
      const p = state.partition(r.ids);
      const scores = shardScores(creator, p.keys); // every shard's, checked before the first write
      await each(async (s) => {
        const keys = p.keys[s]!;
        if (keys.length > 0) await state.stores[s]!.upsert(keys, gatherRows(v0.values, p.positions[s]!, state.dim), scores[s]);
      });
    }
    const plans = state.plans();
    if (plans) {
      const { bag, combiner } = recordBag(r);
      await each(async (s) => {
        const table = (await state.stores[s]!.ready())!;
        const plan = plans.length === 1 ? null : plans[s]!;
        if (!r.bag && r.maxNorm === 0) await table.applyGradients(r.ids, grads, b.spec, step, { plan });
        else await table.applyCombinedGradients(bag, grads, b.spec, step, { combiner, maxNorm: r.maxNorm || null, plan });
      });
    } else {
      const rows = r.maxNorm > 0 ? (v0?.values ?? (await state.find(r.ids)).values) : new Float32Array(0);
      const g = await perIdGradients(r, grads, rows, state);
      const p = state.partition(r.ids);
      await each(async (s) => {
        const keys = p.keys[s]!;
        if (keys.length === 0) return;
        const table = (await state.stores[s]!.ready())!;
        await table.applyGradients(keys, gatherRows(g, p.positions[s]!, state.dim), b.spec, step);
      });
    }
  } else {
    const v0 = await lease.capture();
    const g = await perIdGradients(r, grads, v0.values, state);
    const p = state.partition(r.ids);
    const unique = p.keys.map((keys) => uniqueKeys(keys));
    const scores = shardScores(creator, unique.map((u) => u.unique)); // every shard's, checked before the first write
    await each(async (s) => {
      if (p.keys[s]!.length === 0) return;
      await companionStep(state, b, s, p.keys[s]!, unique[s]!, p.positions[s]!, g, v0, step, scores[s]);
    });
  }
  lease.trained();
  if (state.restrictPolicy) await state.restrictPolicy.applyUpdate(r.ids);
}

/** Shard s of a non-fused step: f(v0) computed in the companion table, then set or (bpV2) accumulated into the store. */
async function companionStep(
  state: VariableState,
  b: Binding,
  s: number,
  keys: Keys,
  { unique, index }: { unique: Keys; index: ArrayLike<number> },
  positions: Int32Array,
  grads: Float32Array,
  v0: { values: Float32Array; exists: Uint8Array },
  step: number,
  scores: BigUint64Array | undefined,
): Promise<void> {
  const dim = state.dim;
  const first = new Int32Array(unique.length).fill(-1);
  for (let i = 0; i < index.length; i++) if (first[index[i]!] === -1) first[index[i]!] = positions[i]!;
  const before = gatherRows(v0.values, first, dim);
  const companion = b.stateTables![s]!;
  await companion.upsert(unique, before);
  await companion.applyGradients(keys, gatherRows(grads, positions, dim), b.spec, step);
  const after = (await companion.find(unique)).values;
  const store = state.stores[s]!;
  if (b.bpV2) {
    const existed = gatherFlags(v0.exists, first);
    const deltas = new Float32Array(after.length);
    for (let i = 0; i < unique.length; i++) {
      for (let c = 0; c < dim; c++) deltas[i * dim + c] = existed[i] ? after[i * dim + c]! - before[i * dim + c]! : after[i * dim + c]!;
    }
    await store.accum(unique, deltas, existed, scores);
  } else {
    await store.upsert(unique, after, scores);
  }
}
