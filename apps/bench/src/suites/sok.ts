/**
 * sok: `sok.lookupSparse` forward and one training step (tape.gradient +
 * OptimizerWrapper(SGD).applyGradients) on numDevices 1, 2 and 4 at equal total
 * work, against core on one dynamic table of the same keys and rows (forward:
 * `lookupCombined`; backward: `applyCombinedGradients`, the op SOK's one device calls).
 *
 * sok.init is process-wide (one device count at a time), so each device count is
 * measured interleaved with the same core peer, and the device counts are compared
 * through their ratios to it (nd2 / nd1 = (nd2 / core) / (nd1 / core)), which cancels
 * load drift between the runs.
 *
 * The batch (512 bags x 26 ids = 13,312 ids per call) stays under the CPU backend's
 * 16K-key threshold for splitting one call over its thread pool, so one call uses one
 * native thread: that is a device's "own thread" of the spec, and the devices' calls
 * (each over 128K floats, so on the addon's thread pool as Promise calls) are what runs in parallel. The
 * `--sok-bags` option measures other batches (above the threshold core already splits
 * one call over the pool, and N devices cannot add cores).
 */
import * as sok from '@embedstack/sok';
import { type Bag, optimizers, RaggedTensor, setDefaultBackend, Tensor } from '@embedstack/core';
import type { Job } from '../harness.js';
import { formatCount } from '../format.js';
import { positiveInt } from '../options.js';
import { type Group, ratioTarget, type SuiteResult, type Target, valueTarget } from '../report.js';
import { drawIndices, pickKeys } from '../rng.js';
import { dynamicTable, FILL_BATCH, valuePattern } from '../tables.js';
import { type Entry, POOL_BATCHES, runEntries, settle } from './common.js';
import type { Suite, SuiteContext } from './types.js';

const DIM = 64;
const IDS = 26;
const DEVICES = [1, 2, 4] as const;
const LR = 0.001;
const MEASURE = { minSamples: 9 } as const;

/** Seconds spent in `fn`. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

const entry = (job: Job, kind: 'ours' | 'peer', unit: string, note?: string): Entry => ({ job, name: job.label, kind, unit, ...(note ? { note } : {}) });

interface Workload {
  keys: BigInt64Array;
  bags: Bag<BigInt64Array>[];
  inputs: RaggedTensor[];
  grads: Float32Array;
  ids: number;
}

function workload(ctx: SuiteContext, rows: number, bags: number): Workload {
  const keys = ctx.fixtures.keys(rows);
  const splits = new Int32Array(bags + 1);
  for (let r = 0; r <= bags; r++) splits[r] = r * IDS;
  const pool = pickKeys(keys, drawIndices(POOL_BATCHES * bags * IDS, rows, 'uniform', 61));
  const batch = Array.from({ length: POOL_BATCHES }, (_, b) => pool.subarray(b * bags * IDS, (b + 1) * bags * IDS));
  const grads = valuePattern(bags, DIM).map((x) => x * 0.01);
  return {
    keys,
    bags: batch.map((k) => ({ rowSplits: splits, keys: k, weights: null })),
    inputs: batch.map((k) => RaggedTensor.fromRowSplits(k, splits)),
    grads,
    ids: bags * IDS,
  };
}

/** A DynamicVariable on the current init holding `keys` with the bench's value pattern (as the core fixture table). */
async function filledVariable(keys: BigInt64Array): Promise<sok.DynamicVariable> {
  const v = new sok.DynamicVariable({ dimension: DIM, initializer: 'zeros', name: `bench_sok_${keys.length}`, initCapacity: keys.length });
  const values = valuePattern(FILL_BATCH, DIM);
  for (let b = 0; b < keys.length; b += FILL_BATCH) {
    const k = keys.subarray(b, Math.min(keys.length, b + FILL_BATCH));
    await sok.assign(v, k, values.subarray(0, k.length * DIM));
  }
  return v;
}

/** Forward and backward of one device count, each interleaved with its core peer. */
async function measureDevices(ctx: SuiteContext, n: number, w: Workload, rows: number): Promise<{ fwd: Group; bwd: Group }> {
  sok.shutdown();
  await sok.init({ numDevices: n, backend: ctx.backend });
  const v = await filledVariable(w.keys);
  // A table of its own (the training step writes it), filled as the shared fixture tables.
  const core = dynamicTable(ctx.backend, DIM, w.keys, { name: 'bench_sok_core' });
  const opt = new sok.OptimizerWrapper(new sok.optimizers.SGD({ learningRate: LR }));
  const spec = optimizers.sgd({ learningRate: LR });
  let step = 1;
  const grads = [new Tensor(w.grads, [w.bags[0]!.rowSplits.length - 1, DIM])];
  const pick = <T>(a: T[], i: number): T => a[i % a.length]!;
  try {
    const label = `sok lookupSparse (${n} device${n === 1 ? '' : 's'})`;
    const fwd = await runEntries([
      entry({ label, fn: async (i) => void (await sok.lookupSparse([v], [pick(w.inputs, i)], { combiners: ['sum'] })), items: w.ids, async: true }, 'ours', 'ids/s'),
      entry({ label: 'core lookupCombined', fn: async (i) => void (await core.lookupCombined(pick(w.bags, i), { combiner: 'sum' })), items: w.ids, async: true }, 'peer', 'ids/s', 'one table of the same keys and rows'),
    ], MEASURE);
    const trainStep = async (i: number): Promise<number> => {
      const tape = new sok.GradientTape();
      await sok.lookupSparse([v], [pick(w.inputs, i)], { combiners: ['sum'], tape });
      return timed(() => opt.applyGradients(tape.gradient(grads)));
    };
    const bwdLabel = `sok gradient + applyGradients (${n} device${n === 1 ? '' : 's'})`;
    const bwd = await runEntries([
      entry({ label: bwdLabel, fn: trainStep, items: w.ids, async: true }, 'ours', 'ids/s', 'SGD; the training lookup before each step untimed'),
      entry({ label: 'core applyCombinedGradients', fn: async (i) => void (await core.applyCombinedGradients(pick(w.bags, i), w.grads, spec, step++, { combiner: 'sum' })), items: w.ids, async: true }, 'peer', 'ids/s', 'SGD, the same pooled gradients'),
    ], MEASURE);
    const what = `${formatCount(rows)} keys, dim ${DIM}, ${w.bags[0]!.rowSplits.length - 1} x ${IDS} ids, sum`;
    const params = { rows, dim: DIM, bags: w.bags[0]!.rowSplits.length - 1, idsPerBag: IDS, numDevices: n };
    return {
      fwd: { title: `sok forward, ${n} device${n === 1 ? '' : 's'}: ${what}`, params, figures: fwd },
      bwd: { title: `sok backward (SGD step), ${n} device${n === 1 ? '' : 's'}: ${what}`, params, figures: bwd },
    };
  } finally {
    v.dispose();
    core.dispose();
    sok.shutdown();
    await settle();
  }
}

/** ours / core of a group (its first two figures). */
const toCore = (g: Group): number => g.figures[0]!.value / g.figures[1]!.value;

export const sokSuite: Suite = {
  name: 'sok',
  description: 'sok lookupSparse forward and training step on 1, 2, 4 devices vs core lookupCombined / applyCombinedGradients on one table',
  options: [
    { flags: '--sok-bags <n>', description: `bags per call (${IDS} ids each)`, default: 512, parse: positiveInt },
    { flags: '--sok-rows <n>', description: 'keys in the table', default: 1 << 20, parse: positiveInt },
  ],
  steps: () => DEVICES.length * 4,
  async run(ctx) {
    const bags = Number(ctx.args.suiteOptions.sokBags ?? 512);
    const rows = Number(ctx.args.suiteOptions.sokRows ?? 1 << 20);
    const w = workload(ctx, rows, bags);
    const groups: Group[] = [];
    const targets: Target[] = [];
    const fwd: Group[] = [];
    const bwd: Group[] = [];
    setDefaultBackend(ctx.backend.name);
    try {
      for (const n of DEVICES) {
        const g = await measureDevices(ctx, n, w, rows);
        fwd.push(g.fwd);
        bwd.push(g.bwd);
        groups.push(g.fwd, g.bwd);
      }
    } finally {
      setDefaultBackend(undefined);
    }
    const [f1, f2, f4] = fwd as [Group, Group, Group];
    const [b1, b2, b4] = bwd as [Group, Group, Group];
    targets.push(ratioTarget(f1, f1.figures[0]!.name, 'core lookupCombined', '>=', 0.8, 'nd1: sok lookupSparse forward >= 0.8x core lookupCombined'));
    targets.push(valueTarget(toCore(f2) / toCore(f1), '>=', 1.3, 'ratio', 'nd2 forward >= 1.3x nd1 (equal total work; each normalised by its interleaved core run)'));
    targets.push(valueTarget(toCore(f4) / toCore(f2), '>=', 1.0, 'ratio', 'nd4 forward >= nd2'));
    targets.push(ratioTarget(b1, b1.figures[0]!.name, 'core applyCombinedGradients', '>=', 0.8, 'nd1: sok training step >= 0.8x core applyCombinedGradients (this suite\'s own check, not an issue target)'));
    targets.push(valueTarget(toCore(b2) / toCore(b1), '>=', 1.3, 'ratio', 'nd2 training step >= 1.3x nd1'));
    targets.push(valueTarget(toCore(b4) / toCore(b2), '>=', 1.0, 'ratio', 'nd4 training step >= nd2'));
    return {
      suite: 'sok',
      path: 'sok.lookupSparse and OptimizerWrapper.applyGradients (Promise forms) vs the core op on one table',
      groups,
      targets,
      notes: [
        'each device count is measured interleaved with the same core peer; device counts compare through their ratios to it',
        `${bags * IDS} ids per call: ${bags * IDS < 16384 ? 'under' : 'over'} the CPU backend's 16K-id threshold for splitting one call over its pool`,
        'load average: see the run header; ratios within a group are what counts on a busy machine',
      ],
      charts: [],
    } satisfies SuiteResult;
  },
};
