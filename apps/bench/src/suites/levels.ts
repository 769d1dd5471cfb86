/**
 * levels: the native CPU backend's prebuilt binaries of each CPU level this machine runs
 * (baseline, avx2, avx512; `EMBEDSTACK_CPU` picks one for a whole process) loaded side by
 * side in this process, each with its own tables of the same keys and values, and
 * measured interleaved on three paths: findSync (the find / gather path), lookupCombinedSync
 * (sum pooling) and one fused Adagrad applyGradientsSync step. Each level also must return
 * the same bits as the baseline binary on the first batch (the levels differ in speed only).
 * Runs with the 'cpu' backend only; a level whose binary is missing (no `build:prebuilds`)
 * is left out with the loader's reason.
 */
import { type Bag, type EmbeddingTable, optimizers } from '@embedstack/core';
import { CpuBackend, type CpuLevel, loadAddon, supportedCpuLevels } from '@embedstack/cpu-backend';
import { type Group, ratioTarget, type SuiteResult, valueTarget } from '../report.js';
import { drawIndices, makeKeys, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { dynamicTable } from '../tables.js';
import { BATCH, type Entry, findEntry, POOL_BATCHES, rotating, runEntries, settle } from './common.js';
import type { Suite } from './types.js';

const DIM = 64;
const ROWS = 1 << 18;
const FEATURES = 26;
const IDS = 20;
/** Samples per bag call (x 26 features x 20 ids = 266K ids). */
const BAG_SAMPLES = 512;
/** A level may be this much slower than baseline before its target fails (noise on a shared machine). */
const NO_SLOWER = 0.9;

interface LevelRun {
  level: CpuLevel;
  /** Tables on this level's binary: the find / bag table, the Adagrad table. */
  find: EmbeddingTable;
  train: EmbeddingTable;
}

/** A Float32Array's bytes as text, to compare exact bits. */
const bits = (a: Float32Array): string => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');

export const levelsSuite: Suite = {
  name: 'levels',
  description: "native CPU backend: each CPU level's prebuilt binary (baseline / avx2 / avx512) on find, bag and an Adagrad step, interleaved",
  steps: () => 3,
  async run(ctx) {
    const result: SuiteResult = {
      suite: 'levels',
      path: "findSync, lookupCombinedSync (sum), applyGradientsSync (Adagrad) on tables of each level's binary (CpuBackend over loadAddon with EMBEDSTACK_CPU=<level>)",
      groups: [],
      targets: [],
      notes: [],
      charts: [],
    };
    if (ctx.backend.name !== 'cpu') {
      result.notes.push(`skipped: measures the native CPU backend's levels, not '${ctx.backend.name}'`);
      return result;
    }
    const keys = makeKeys(ROWS, 71);
    const runs: LevelRun[] = [];
    for (const level of supportedCpuLevels()) {
      const load = loadAddon(undefined, { EMBEDSTACK_CPU: level });
      if (!load.binding || load.build !== 'prebuilt') {
        result.notes.push(`${level}: not measured: ${load.reason ?? `no prebuilt ${level} binary (a source build is loaded); run pnpm --filter @embedstack/cpu-backend build:prebuilds`}`);
        continue;
      }
      const backend = new CpuBackend({ load: () => load });
      runs.push({
        level,
        find: dynamicTable(backend, DIM, keys, { name: `bench_${level}` }),
        train: dynamicTable(backend, DIM, keys, { name: `bench_${level}_adagrad`, optimizer: optimizers.adagrad({ learningRate: 0.001 }) }),
      });
    }
    if (runs.length === 0) {
      result.notes.push('skipped: no prebuilt binary loads here');
      return result;
    }
    const name = (r: LevelRun): string => `${r.level}${r === runs[0] ? ' (baseline binary)' : ''}`;
    const pool = pickKeys(keys, drawIndices(POOL_BATCHES * BATCH, ROWS, 'uniform', 72));
    const bagKeys = pickKeys(keys, drawIndices(BAG_SAMPLES * FEATURES * IDS, ROWS, 'uniform', 73));
    const splits = Int32Array.from({ length: BAG_SAMPLES * FEATURES + 1 }, (_, r) => r * IDS);
    const bag: Bag<BigInt64Array> = { rowSplits: splits, keys: bagKeys, weights: null };
    const grads = Float32Array.from({ length: BATCH * DIM }, (_, i) => Math.sin(i * 0.37) * 1e-3);
    const adagrad = optimizers.adagrad({ learningRate: 0.001 });

    // Same bits on every level (first batch of each path), before any timing changes the tables:
    // find's rows, the bag's sums, and the rows of the first batch after one Adagrad step on it.
    const first = (r: LevelRun): string[] => {
      const batch = pool.subarray(0, BATCH);
      r.train.applyGradientsSync(batch, grads, adagrad, 1);
      return [bits(r.find.findSync(batch).values), bits(r.find.lookupCombinedSync(bag, { combiner: 'sum' })), bits(r.train.findSync(batch).values)];
    };
    const reference = first(runs[0]!);
    for (const r of runs.slice(1)) {
      const differ = first(r).filter((b, i) => b !== reference[i]).length;
      result.notes.push(`${r.level}: find, bag and Adagrad-step outputs ${differ === 0 ? 'have the same bits as' : `DIFFER FROM (${differ} of 3 paths)`} ${runs[0]!.level}'s`);
      result.targets.push(valueTarget(differ, '<=', 0, 'paths differ', `${r.level} find, bag and Adagrad-step outputs == ${runs[0]!.level}'s, bit for bit`));
    }

    const nextBatch = rotating(pool, BATCH);
    const paths: { title: string; unit: string; entry: (r: LevelRun) => Entry }[] = [
      {
        title: `find: findSync, dim ${DIM}, ${formatCount(ROWS)} keys, uniform, batch ${formatCount(BATCH)}`,
        unit: 'keys/s',
        entry: (r) => findEntry(`find ${r.level}`, r.find, pool, BATCH, name(r)),
      },
      {
        title: `bag: lookupCombinedSync sum, ${FEATURES} features x ${IDS} ids, batch ${BAG_SAMPLES}, ${formatCount(ROWS)} keys, dim ${DIM}`,
        unit: 'rows/s',
        entry: (r) => ({ job: { label: `bag ${r.level}`, fn: () => void r.find.lookupCombinedSync(bag, { combiner: 'sum' }), items: bagKeys.length }, name: name(r), kind: 'ours', unit: 'rows/s' }),
      },
      {
        title: `train: applyGradientsSync Adagrad, batch ${formatCount(BATCH)} uniform keys, ${formatCount(ROWS)} keys, dim ${DIM}`,
        unit: 'keys/s',
        entry: (r) => {
          let step = 1;
          return { job: { label: `adagrad ${r.level}`, fn: (i) => r.train.applyGradientsSync(nextBatch(i), grads, adagrad, step++), items: BATCH }, name: name(r), kind: 'ours', unit: 'keys/s' };
        },
      },
    ];
    for (const p of paths) {
      const figures = await runEntries(runs.map(p.entry), { minSamples: 5, minMs: 300 });
      const g: Group = { title: `CPU levels, ${p.title}`, params: { dim: DIM, rows: ROWS, levels: runs.length }, figures };
      result.groups.push(g);
      for (const r of runs.slice(1)) {
        result.targets.push(ratioTarget(g, name(r), name(runs[0]!), '>=', NO_SLOWER, `${p.title.split(':')[0]}: ${r.level} >= ${NO_SLOWER}x ${runs[0]!.level} (a higher level is never slower)`));
      }
    }
    for (const r of runs) {
      r.find.dispose();
      r.train.dispose();
    }
    await settle();
    result.notes.push(
      `levels this CPU runs: ${supportedCpuLevels().join(', ')}; each is a whole prebuilt binary (x86-64, x86-64-v3, x86-64-v4), loaded side by side in this process`,
      'a process picks one level at load: the highest this CPU runs, or EMBEDSTACK_CPU=baseline|avx2|avx512; the run header says which',
    );
    return result;
  },
};
