/**
 * facades: each facade's hot path, the API a user calls, against the core op that
 * does the same work, on the same rows and ids, interleaved in one run (so machine
 * load hits both alike and the ratio is what counts):
 * - tpu-embedding: `enqueue` + `dequeue` vs core `lookupCombined` (1M-row static
 *   table, dim 64, batch 4096 x 20 ids, sum); `applyGradients` (Adagrad) vs core
 *   `applyGradients` of the same per-id gradients.
 * - tfra: `Variable.lookup` / `lookupSync` vs core `find` / `findSync` (2M keys, dim 64,
 *   batches of 64K keys), `embeddingLookupSparse` vs `lookupCombined` (and the same op on
 *   the Variable's own table: the facade's cost apart from table placement), one
 *   `DynamicEmbeddingOptimizer` (Adagrad) step vs core `applyGradients`; and the
 *   bytes per key of a tfra-held table at 2M keys (fresh child process, like `memory`).
 * - hps: `HPS.lookup` on the L1-hit path vs core `findSync` of the same keys.
 * - sok: `lookupSparse` on a one-device static Variable vs core `lookupCombined`.
 * `--facades-quick` runs smaller tables (128K rows, 256K keys) for a fast check;
 * `--facades-tiny` tiny ones with 2 short samples per figure (CI: the pairings run and agree).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Bag,
  createTable,
  type EmbeddingTable,
  type OptimizerSpec,
  optimizers,
  RaggedTensor,
  setDefaultBackend,
  SparseTensor,
} from '@embedstack/core';
import * as sok from '@embedstack/sok';
import * as de from '@embedstack/tfra';
import { Adagrad, FeatureConfig, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import type { Job, MeasureOptions } from '../harness.js';
import { type Figure, type Group, ratioTarget, type SuiteResult, type Target, valueTarget } from '../report.js';
import { drawIndices, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { FILL_BATCH, valuePattern } from '../tables.js';
import { type Entry, figure, overheadBeyond, POOL_BATCHES, rotating, runEntries, settle, TINY_MEASURE } from './common.js';
import { hotKeys, hpsFixture } from './hps.js';
import { type MemoryChildResult, runMemoryChild } from './memory.js';
import type { Suite, SuiteContext } from './types.js';

const DIM = 64;
const LEARNING_RATE = 0.001;
const INITIAL_ACCUMULATOR = 0.1;

interface Sizes {
  /** Rows of the static (tpu-embedding) table. */
  rows: number;
  /** Keys of the dynamic (tfra) tables, and of the memory figure. */
  keys: number;
  /** Rows of the HPS model. */
  hpsRows: number;
  /** Bags per call of the pooled lookups (tpu-embedding, sok, embeddingLookupSparse). */
  bags: number;
  /** Ids per bag. */
  idsPerBag: number;
  /** Keys per call of the tfra lookups and training step. */
  keyBatch: number;
  /** How long each figure is sampled. */
  measure: MeasureOptions;
}

/** More samples than the default: the facades' ratios are the point, on a machine others share. */
const MEASURE: MeasureOptions = { minSamples: 11 };
const SIZES: Sizes = { rows: 1 << 20, keys: 2 << 20, hpsRows: 1 << 18, bags: 4096, idsPerBag: 20, keyBatch: 65536, measure: MEASURE };
const QUICK: Sizes = { ...SIZES, rows: 1 << 17, keys: 1 << 18, hpsRows: 1 << 16 };
/** For CI (--facades-tiny): every pairing runs and its outputs are compared; a few short samples, the figures mean nothing. */
const TINY: Sizes = { rows: 4096, keys: 8192, hpsRows: 4096, bags: 64, idsPerBag: 4, keyBatch: 1024, measure: TINY_MEASURE };

const adagrad = (): OptimizerSpec => optimizers.adagrad({ learningRate: LEARNING_RATE, initialAccumulatorValue: INITIAL_ACCUMULATOR });

/** Row splits of `s.bags` bags of `s.idsPerBag` ids each. */
function bagSplits(s: Sizes): Int32Array {
  return Int32Array.from({ length: s.bags + 1 }, (_, r) => r * s.idsPerBag);
}

/** `s.bags` bags of `s.idsPerBag` ids each (uniform row indices below `s.rows`), rotating over POOL_BATCHES draws. */
function bagPool(s: Sizes, seed: number): { splits: Int32Array; ids: Int32Array[] } {
  const n = s.bags * s.idsPerBag;
  const all = drawIndices(POOL_BATCHES * n, s.rows, 'uniform', seed);
  const ids = Array.from({ length: POOL_BATCHES }, (_, b) => new Int32Array(all.buffer, b * n * 4, n));
  return { splits: bagSplits(s), ids };
}

/** A job awaited per call (a Promise API). */
const asyncJob = (label: string, fn: (i: number) => Promise<unknown>, items: number): Job => ({ label, fn: async (i) => void (await fn(i)), items, async: true });

/** A job whose fn times only part of its call and returns those seconds. */
const partJob = (label: string, fn: (i: number) => Promise<number>, items: number): Job => ({ label, fn, items, async: true });

/**
 * Figures of [ours, peer, ours, peer, ...], each pair interleaved on its own: a job
 * measured right after another pair's job would inherit that job's leftovers (its
 * result buffers' collection, an async call's tail), which biases one side only.
 */
async function runPairs(entries: readonly Entry[], measure: MeasureOptions): Promise<Figure[]> {
  const out: Figure[] = [];
  for (let i = 0; i < entries.length; i += 2) {
    out.push(...(await runEntries(entries.slice(i, i + 2), measure)));
    await settle();
  }
  return out;
}

/** Seconds spent in `fn`. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

const entry = (job: Job, kind: 'ours' | 'peer', unit: string, note?: string): Entry => ({ job, name: job.label, kind, unit, ...(note ? { note } : {}) });

/** Forward pairs whose first call's outputs were compared before timing: a fast facade that returns other values measures nothing. */
export interface Checks {
  pairs: number;
  /** `ours vs peer: n of m floats differ` per pair that disagreed. */
  differ: string[];
}

/** Compares a facade's output with the core op's (bit for bit: both pool in float64 and round once) and records the outcome in `c`. */
export function checkSame(c: Checks, what: string, ours: ArrayLike<number>, peer: ArrayLike<number>): void {
  c.pairs++;
  let count = Math.abs(ours.length - peer.length);
  for (let i = 0; i < Math.min(ours.length, peer.length); i++) if (!Object.is(ours[i], peer[i])) count++;
  if (count > 0) c.differ.push(`${what}: ${count} of ${peer.length} floats differ (lengths ${ours.length} vs ${peer.length})`);
}

/** tpu-embedding: forward and backward on one static table, against core on a copy of its rows. */
async function tpuGroups(ctx: SuiteContext, s: Sizes, groups: Group[], targets: Target[], checks: Checks): Promise<void> {
  const values = valuePattern(s.rows, DIM);
  const table = new TableConfig({ vocabularySize: s.rows, dim: DIM, combiner: 'sum', name: 'bench_tpu', initializer: () => values });
  const featureConfig = { f: new FeatureConfig({ table }) };
  const emb = new TPUEmbedding({ featureConfig, optimizer: new Adagrad({ learningRate: LEARNING_RATE, initialAccumulatorValue: INITIAL_ACCUMULATOR }), backend: ctx.backend });
  emb.build(s.bags);
  const core = createTable({ kind: 'static', dim: DIM, vocabularySize: s.rows, keyDtype: 'int32', name: 'bench_tpu_core', optimizer: adagrad() }, { backend: ctx.backend });
  try {
    const rowIds = Int32Array.from({ length: s.rows }, (_, i) => i);
    for (let b = 0; b < s.rows; b += FILL_BATCH) core.upsertSync(rowIds.subarray(b, b + FILL_BATCH), values.subarray(b * DIM, Math.min(s.rows, b + FILL_BATCH) * DIM));
    const { splits, ids } = bagPool(s, 41);
    const inputs = ids.map((v) => RaggedTensor.fromRowSplits(v, splits));
    const bags: Bag<Int32Array>[] = ids.map((keys) => ({ rowSplits: splits, keys, weights: null }));
    const nids = s.bags * s.idsPerBag;
    const outF = new Float32Array(s.bags * DIM);
    const outC = new Float32Array(s.bags * DIM);
    const forward = async (i: number, out: Float32Array | null): Promise<unknown> => {
      await emb.enqueue({ f: inputs[i % inputs.length]! }, { training: false });
      return emb.dequeue(out ? { out: { f: out } } : undefined);
    };
    const sum = { combiner: 'sum' } as const;
    const dequeued = (await forward(0, null)) as { f: { data: Float32Array } };
    checkSame(checks, 'tpu enqueue + dequeue vs core lookupCombined', dequeued.f.data, await core.lookupCombined(bags[0]!, sum));
    const fwd = await runPairs([
      entry(asyncJob('tpu enqueue + dequeue', (i) => forward(i, null), nids), 'ours', 'rows/s'),
      entry(asyncJob('core lookupCombined', (i) => core.lookupCombined(bags[i % bags.length]!, sum), nids), 'peer', 'rows/s'),
      entry(asyncJob('tpu enqueue + dequeue({ out })', (i) => forward(i, outF), nids), 'ours', 'rows/s', 'dequeue writes into the caller\'s Float32Array'),
      entry(asyncJob('core lookupCombined({ out })', (i) => core.lookupCombined(bags[i % bags.length]!, { ...sum, out: outC }), nids), 'peer', 'rows/s'),
    ], s.measure);
    const params = { rows: s.rows, dim: DIM, bags: s.bags, idsPerBag: s.idsPerBag, combiner: 'sum' };
    const what = `${formatCount(s.rows)}-row static table, dim ${DIM}, ${s.bags} x ${s.idsPerBag} ids, sum`;
    const gf: Group = { title: `tpu-embedding forward: ${what} (Promise forms)`, params, figures: fwd.slice(0, 2) };
    const go: Group = { title: `tpu-embedding forward into the caller's buffer: ${what}`, params, figures: fwd.slice(2) };
    groups.push(gf, go);
    targets.push(ratioTarget(gf, 'tpu enqueue + dequeue', 'core lookupCombined', '>=', 0.8, 'tpu-embedding enqueue+dequeue >= 0.8x core lookupCombined'));
    targets.push(ratioTarget(go, 'tpu enqueue + dequeue({ out })', 'core lookupCombined({ out })', '>=', 0.8, 'tpu-embedding enqueue+dequeue({ out }) >= 0.8x core lookupCombined({ out })'));

    await sokGroup(ctx, s, values, inputs, bags, groups, targets, checks);

    // backward: the gradient of each bag's activation; under 'sum' every id of a bag gets its bag's gradient
    const grad = valuePattern(s.bags, DIM).map((x) => x * 0.01);
    const perId = new Float32Array(nids * DIM);
    for (let b = 0; b < s.bags; b++) for (let j = 0; j < s.idsPerBag; j++) perId.set(grad.subarray(b * DIM, (b + 1) * DIM), (b * s.idsPerBag + j) * DIM);
    const spec = adagrad();
    let step = 1;
    const tpuStep = async (i: number): Promise<number> => {
      await emb.enqueue({ f: inputs[i % inputs.length]! }, { training: true });
      await emb.dequeue({ out: { f: outF } });
      return timed(() => emb.applyGradients({ f: grad }));
    };
    const bwd = await runEntries([
      entry(partJob('tpu applyGradients', tpuStep, nids), 'ours', 'ids/s', 'Adagrad; enqueue + dequeue before each step untimed'),
      entry(asyncJob('core applyGradients', (i) => core.applyGradients(bags[i % bags.length]!.keys, perId, spec, step++), nids), 'peer', 'ids/s', 'the same per-id gradients, Adagrad'),
      entry(asyncJob('core applyCombinedGradients', (i) => core.applyCombinedGradients(bags[i % bags.length]!, grad, spec, step++, sum), nids), 'peer', 'ids/s', 'the op the facade calls'),
    ], s.measure);
    const gb: Group = {
      title: `tpu-embedding backward: the same table and bags, Adagrad (lr ${LEARNING_RATE})`,
      params: { rows: s.rows, dim: DIM, bags: s.bags, idsPerBag: s.idsPerBag, optimizer: 'adagrad' },
      figures: bwd,
    };
    groups.push(gb);
    targets.push(ratioTarget(gb, 'tpu applyGradients', 'core applyGradients', '>=', 0.7, 'tpu-embedding applyGradients >= 0.7x core applyGradients'));
  } finally {
    emb.dispose();
    core.dispose();
    await settle();
  }
}

/** sok: `lookupSparse` on a one-device static Variable holding the same rows, against core lookupCombined on the same bags. */
async function sokGroup(
  ctx: SuiteContext,
  s: Sizes,
  values: Float32Array,
  inputs: RaggedTensor<Int32Array>[],
  bags: Bag<Int32Array>[],
  groups: Group[],
  targets: Target[],
  checks: Checks,
): Promise<void> {
  await sok.init({ numDevices: 1, backend: ctx.backend });
  try {
    const w = new sok.Variable({ shape: [s.rows, DIM], initializer: 'zeros', name: 'bench_sok' });
    for (let b = 0; b < s.rows; b += FILL_BATCH) {
      const n = Math.min(FILL_BATCH, s.rows - b);
      await sok.assign(w, Int32Array.from({ length: n }, (_, i) => b + i), values.subarray(b * DIM, (b + n) * DIM));
    }
    const core = createTable({ kind: 'static', dim: DIM, vocabularySize: s.rows, keyDtype: 'int32', name: 'bench_sok_core' }, { backend: ctx.backend });
    try {
      const rowIds = Int32Array.from({ length: s.rows }, (_, i) => i);
      for (let b = 0; b < s.rows; b += FILL_BATCH) core.upsertSync(rowIds.subarray(b, b + FILL_BATCH), values.subarray(b * DIM, Math.min(s.rows, b + FILL_BATCH) * DIM));
      const nids = s.bags * s.idsPerBag;
      const [pooledSok] = await sok.lookupSparse([w], [inputs[0]!], { combiners: 'sum', training: false });
      checkSame(checks, 'sok lookupSparse vs core lookupCombined', pooledSok!.data, await core.lookupCombined(bags[0]!, { combiner: 'sum' }));
      const figures = await runEntries(
        [
          entry(asyncJob('sok lookupSparse', (i) => sok.lookupSparse([w], [inputs[i % inputs.length]!], { combiners: 'sum', training: false }), nids), 'ours', 'rows/s', 'one device'),
          entry(asyncJob('core lookupCombined', (i) => core.lookupCombined(bags[i % bags.length]!, { combiner: 'sum' }), nids), 'peer', 'rows/s'),
        ],
        s.measure,
      );
      const g: Group = {
        title: `sok lookupSparse: ${formatCount(s.rows)}-row static Variable, dim ${DIM}, ${s.bags} x ${s.idsPerBag} ids, sum`,
        params: { rows: s.rows, dim: DIM, bags: s.bags, idsPerBag: s.idsPerBag, combiner: 'sum', devices: 1 },
        figures,
      };
      groups.push(g);
      targets.push(ratioTarget(g, 'sok lookupSparse', 'core lookupCombined', '>=', 0.8, 'sok lookupSparse >= 0.8x core lookupCombined'));
    } finally {
      core.dispose();
    }
  } finally {
    sok.shutdown();
    await settle();
  }
}

/** A tfra Variable on ctx's backend holding `keys` (values like the bench's tables). */
function tfraVariable(ctx: SuiteContext, keys: BigInt64Array, name: string): de.Variable<'int64'> {
  const v = new de.Variable({ keyDtype: 'int64', dim: DIM, name, initSize: keys.length });
  const backendName = (v.tables[0] as EmbeddingTable & { backendName?: string }).backendName;
  if (backendName !== undefined && backendName !== ctx.backend.name) ctx.log(`facades: tfra's tables are on '${backendName}', not '${ctx.backend.name}' (EMBEDSTACK_BACKEND?)`);
  const values = valuePattern(FILL_BATCH, DIM);
  for (let b = 0; b < keys.length; b += FILL_BATCH) {
    const k = keys.subarray(b, Math.min(keys.length, b + FILL_BATCH));
    v.upsertSync(k, values.subarray(0, k.length * DIM));
  }
  return v;
}

/** tfra: lookups, the sparse (pooled) lookup and one optimizer step, against core on a table with the same keys and rows. */
async function tfraGroups(ctx: SuiteContext, s: Sizes, groups: Group[], targets: Target[], checks: Checks): Promise<void> {
  const keys = ctx.fixtures.keys(s.keys);
  const core = ctx.fixtures.table(DIM, s.keys);
  const v = tfraVariable(ctx, keys, 'bench_tfra');
  try {
    const batch = s.keyBatch;
    const pool = pickKeys(keys, drawIndices(POOL_BATCHES * batch, s.keys, 'uniform', 51));
    const next = rotating(pool, batch);
    const outV = new Float32Array(batch * DIM);
    const outC = { values: new Float32Array(batch * DIM), exists: new Uint8Array(batch) };
    const sync = (label: string, fn: (i: number) => unknown, kind: 'ours' | 'peer', note?: string): Entry =>
      entry({ label, fn: (i) => void fn(i), items: batch }, kind, 'keys/s', note);
    checkSame(checks, 'tfra lookupSync vs core findSync', v.lookupSync(next(0)).data, core.findSync(next(0)).values);
    checkSame(checks, 'tfra lookup vs core find', (await v.lookup(next(1))).data, (await core.find(next(1))).values);
    const look = await runPairs([
      sync('tfra lookupSync', (i) => v.lookupSync(next(i)), 'ours'),
      sync('core findSync', (i) => core.findSync(next(i)), 'peer'),
      sync('tfra lookupSync({ out })', (i) => v.lookupSync(next(i), { out: outV }), 'ours'),
      sync('core findSync({ out })', (i) => core.findSync(next(i), { out: outC }), 'peer'),
      entry(asyncJob('tfra lookup', (i) => v.lookup(next(i)), batch), 'ours', 'keys/s'),
      entry(asyncJob('core find', (i) => core.find(next(i)), batch), 'peer', 'keys/s'),
    ], s.measure);
    const lookParams = { keys: s.keys, dim: DIM, batch };
    const lookWhat = `${formatCount(s.keys)} keys, dim ${DIM}, ${formatCount(batch)} keys per call, uniform`;
    const pairs: [string, string, string][] = [
      ['tfra lookupSync', 'core findSync', `tfra lookupSync: ${lookWhat}`],
      ['tfra lookupSync({ out })', 'core findSync({ out })', `tfra lookupSync into the caller's buffer: ${lookWhat}`],
      ['tfra lookup', 'core find', `tfra lookup (Promise): ${lookWhat}`],
    ];
    pairs.forEach(([ours, peer, title], i) => {
      const g: Group = { title, params: lookParams, figures: look.slice(2 * i, 2 * i + 2) };
      groups.push(g);
      targets.push(ratioTarget(g, ours, peer, '>=', 0.8, `${ours} >= 0.8x ${peer}`));
    });

    // the pooled lookup: s.bags bags of s.idsPerBag keys, sum
    const nids = s.bags * s.idsPerBag;
    const splits = bagSplits(s);
    const indices = new Int32Array(nids * 2);
    for (let b = 0; b < s.bags; b++) for (let j = 0; j < s.idsPerBag; j++) indices.set([b, j], (b * s.idsPerBag + j) * 2);
    const bagKeys = Array.from({ length: 4 }, (_, b) => pickKeys(keys, drawIndices(nids, s.keys, 'uniform', 61 + b)));
    const sparse = bagKeys.map((k) => new SparseTensor(indices, k, [s.bags, s.idsPerBag]));
    const bags: Bag<BigInt64Array>[] = bagKeys.map((k) => ({ rowSplits: splits, keys: k, weights: null }));
    const sparse0 = await de.embeddingLookupSparse(v, sparse[0]!, null, { combiner: 'sum', name: 'bench_sparse' });
    checkSame(checks, 'tfra embeddingLookupSparse vs core lookupCombined', sparse0.data, await core.lookupCombined(bags[0]!, { combiner: 'sum' }));
    const pooled = await runEntries([
      entry(asyncJob('tfra embeddingLookupSparse', (i) => de.embeddingLookupSparse(v, sparse[i % 4]!, null, { combiner: 'sum', name: 'bench_sparse' }), nids), 'ours', 'rows/s', 'train mode: records the lookup'),
      entry(asyncJob('core lookupCombined', (i) => core.lookupCombined(bags[i % 4]!, { combiner: 'sum' }), nids), 'peer', 'rows/s'),
      entry(asyncJob('core lookupCombined, the Variable\'s table', (i) => v.tables[0]!.lookupCombined(bags[i % 4]!, { combiner: 'sum' }), nids), 'peer', 'rows/s', 'the same op on the table the facade reads: the facade\'s own cost, apart from table placement'),
    ], s.measure);
    const gp: Group = {
      title: `tfra embeddingLookupSparse: ${s.bags} x ${s.idsPerBag} keys of the ${formatCount(s.keys)}-key table, sum`,
      params: { keys: s.keys, dim: DIM, bags: s.bags, idsPerBag: s.idsPerBag, combiner: 'sum' },
      figures: pooled,
    };
    groups.push(gp);
    targets.push(ratioTarget(gp, 'tfra embeddingLookupSparse', 'core lookupCombined', '>=', 0.8, 'tfra embeddingLookupSparse >= 0.8x core lookupCombined'));
    ctx.fixtures.releaseAll();
    await settle();

    // one training step: lookup (untimed) then DynamicEmbeddingOptimizer(Adagrad).applyGradients, vs core's fused step on a table with slots
    const trained = createTable({ dim: DIM, name: 'bench_tfra_core', initCapacity: s.keys, optimizer: adagrad() }, { backend: ctx.backend });
    try {
      const fill = valuePattern(FILL_BATCH, DIM);
      for (let b = 0; b < s.keys; b += FILL_BATCH) trained.upsertSync(keys.subarray(b, b + FILL_BATCH), fill.subarray(0, Math.min(FILL_BATCH, s.keys - b) * DIM));
      const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adagrad({ learningRate: LEARNING_RATE, initialAccumulatorValue: INITIAL_ACCUMULATOR }));
      const grad = valuePattern(batch, DIM).map((x) => x * 0.01);
      const spec = adagrad();
      let step = 1;
      const tfraStep = async (i: number): Promise<number> => {
        await de.embeddingLookup(v, next(i), { name: 'bench_train', out: outV });
        const t = v.getTrainableByName('bench_train')!;
        return timed(() => opt.applyGradients([[grad, t]]));
      };
      const train = await runEntries([
        entry(partJob('tfra optimizer step', tfraStep, batch), 'ours', 'keys/s', 'DynamicEmbeddingOptimizer(Adagrad).applyGradients; the embeddingLookup before it untimed'),
        entry(asyncJob('core applyGradients', (i) => trained.applyGradients(next(i), grad, spec, step++), batch), 'peer', 'keys/s', 'Adagrad, the same keys and gradients'),
      ], s.measure);
      const gt: Group = {
        title: `tfra training step: ${formatCount(batch)} keys of ${formatCount(s.keys)}, dim ${DIM}, Adagrad (lr ${LEARNING_RATE})`,
        params: { keys: s.keys, dim: DIM, batch, optimizer: 'adagrad' },
        figures: train,
      };
      groups.push(gt);
      targets.push(ratioTarget(gt, 'tfra optimizer step', 'core applyGradients', '>=', 0.7, 'tfra DynamicEmbeddingOptimizer step >= 0.7x core applyGradients'));
    } finally {
      trained.dispose();
    }
  } finally {
    v.dispose();
    ctx.fixtures.releaseAll();
    await settle();
  }
}

/** Bytes per key of a tfra Variable (grown from its default size) and of a core table, each in a fresh child process. */
async function memoryGroup(ctx: SuiteContext, s: Sizes, groups: Group[], targets: Target[]): Promise<void> {
  const base = { keys: s.keys, dim: DIM, backend: ctx.backend.name, presize: false };
  const perKey = (r: MemoryChildResult | Error): number => (r instanceof Error ? NaN : r.rssDelta / s.keys);
  const tfra = await runMemoryChild(ctx, `tfra Variable ${formatCount(s.keys)} keys`, { ...base, what: 'tfra' });
  const table = await runMemoryChild(ctx, `core table ${formatCount(s.keys)} keys`, { ...base, what: 'table' });
  const valueBytes = DIM * 4;
  const figures: Figure[] = [
    figure('tfra Variable RSS', 'ours', perKey(tfra), 'B/key', { lowerIsBetter: true, note: 'upsertSync in 64K batches, default initSize' }),
    figure('core table RSS', 'peer', perKey(table), 'B/key', { lowerIsBetter: true, note: 'grown from initCapacity 1024' }),
    figure('value bytes', 'peer', valueBytes, 'B/key', { lowerIsBetter: true, note: `dim ${DIM} x 4` }),
  ];
  groups.push({ title: `tfra memory: ${s.keys.toLocaleString('en-US')} keys, dim ${DIM} (fresh child process per figure)`, params: { keys: s.keys, dim: DIM }, figures });
  targets.push(valueTarget(overheadBeyond(perKey(tfra), valueBytes), '<=', 24, 'B/key', `tfra Variable overhead beyond value bytes <= 24 B/key at ${formatCount(s.keys)} keys`));
}

/** hps: the L1-hit path of HPS.lookup against core findSync of the same keys on the model's table. */
async function hpsGroup(ctx: SuiteContext, s: Sizes, groups: Group[], targets: Target[], checks: Checks): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-facades-hps-'));
  const { server, table, keys } = await hpsFixture(ctx, s.hpsRows, dir, { type: 'hash_map' });
  try {
    const hot = hotKeys(keys, s.hpsRows);
    for (let i = 0; i < 3; i++) await server.lookup(hot, 'bench', 0); // every hot key in L1
    checkSame(checks, 'hps lookup vs core findSync', (await server.lookup(hot, 'bench', 0)).data as Float32Array, table.findSync(hot).values);
    const figures = await runEntries([
      entry(asyncJob('hps lookup (L1 hits)', () => server.lookup(hot, 'bench', 0), hot.length), 'ours', 'keys/s'),
      entry({ label: 'core findSync', fn: () => void table.findSync(hot), items: hot.length }, 'peer', 'keys/s', 'the same keys, the table the model was exported from'),
    ], s.measure);
    const g: Group = { title: `hps: ${formatCount(hot.length)} keys all in L1, ${formatCount(s.hpsRows)}-row model, dim ${table.dim}`, params: { rows: s.hpsRows, keys: hot.length }, figures };
    groups.push(g);
    targets.push(ratioTarget(g, 'hps lookup (L1 hits)', 'core findSync', '>=', 0.8, 'hps lookup (L1-hit path) >= 0.8x core findSync'));
  } finally {
    await server.close();
    table.dispose();
    rmSync(dir, { recursive: true, force: true });
    await settle();
  }
}

export const facadesSuite: Suite = {
  name: 'facades',
  description: "each facade's hot path (tpu-embedding, tfra, sok, hps) vs the core op on the same rows and ids",
  options: [
    { flags: '--facades-quick', description: 'smaller tables (128K static rows, 256K dynamic keys) for a quick check', default: false },
    { flags: '--facades-tiny', description: 'tiny tables and batches (4K rows, 8K keys, 64 x 4 ids) and 2 short samples: checks that every pairing runs and agrees (CI); the figures mean nothing', default: false },
  ],
  steps: () => 4 + 2 + 3 + 6 + 2 + 2 + 2 + 2,
  async run(ctx) {
    const o = ctx.args.suiteOptions;
    const s = o.facadesTiny === true ? TINY : o.facadesQuick === true ? QUICK : SIZES;
    const groups: Group[] = [];
    const targets: Target[] = [];
    const checks: Checks = { pairs: 0, differ: [] };
    // tfra creates its tables on the registry's default backend: make it the one measured
    setDefaultBackend(ctx.backend.name);
    try {
      await tpuGroups(ctx, s, groups, targets, checks);
      await tfraGroups(ctx, s, groups, targets, checks);
      await hpsGroup(ctx, s, groups, targets, checks);
      await memoryGroup(ctx, s, groups, targets);
    } finally {
      setDefaultBackend(undefined);
    }
    for (const d of checks.differ) ctx.log(`facades: ${d}`);
    targets.push(valueTarget(checks.differ.length, '<=', 0, 'pairs differ', `every facade forward returns its core op's values bit for bit (${checks.pairs} pairs checked before timing)`));
    return {
      suite: 'facades',
      path: 'the facades as a user calls them (Promise forms unless the name says Sync) vs the core op on the same rows, ids and gradients',
      groups,
      targets,
      notes: [
        'each group is measured interleaved: ratios within a group are what counts on a busy machine',
        'a training step is timed alone (the lookup it needs runs untimed before it); both sides use Adagrad with the same learning rate and accumulator',
      ],
      charts: [],
    } satisfies SuiteResult;
  },
};
