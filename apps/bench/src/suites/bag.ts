/**
 * bag: lookupCombined (embedding bag) with 26 features x 20 ids per sample,
 * batch 4096 samples, sum and mean, on a static and a dynamic table, against a
 * plain JS Float32Array loop, tfjs-core gather+reshape+sum on its wasm and cpu
 * backends, PyTorch's nn.EmbeddingBag in a child process (same values, ids and threads;
 * when python3 has torch), the plain native gather-reduce loop and the native hash-bag ceiling
 * (hashBag.ts: what a dynamic table's layout allows: an index line and a key/score record per id
 * before the row). Then a size sweep: dynamic / static bag at 64K .. 4M keys, with both native
 * loops. Unit: gathered rows/s.
 */
import type { Bag } from '@embedstack/core';
import { measure } from '../harness.js';
import { jsGatherReduce } from '../peers/jsBag.js';
import { closeStarted, startTorchBag } from '../peers/torch.js';
import { type TfjsBackendName, tfjsBag, tfjsTable, useTfjs } from '../peers/tfjs.js';
import { type Figure, type Group, ratioTarget, requireSameOutput, type SuiteResult, type Target } from '../report.js';
import { drawIndices, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { staticTable, valuePattern } from '../tables.js';
import { type Entry, figure, measuredFigure, runEntries, settle, threadLabel } from './common.js';
import { bagSweep, bestCeiling, ceilingSummary, CEILING_VARIANTS, hashCeilingEntries, hashCeilingName, layoutFor, SWEEP_SIZES } from './hashBag.js';
import { bagDtypeGroups, type BagDtypeShape, startBagDtypePeers, sumsAgree } from './dtypes.js';
import type { Suite } from './types.js';

const DIM = 64;
const ROWS = 1 << 20;
const FEATURES = 26;
const IDS = 20;
const BATCH = 4096;
/** tfjs is ~100x slower: it gets fewer samples per call (rows/s does not depend on it). */
const TFJS_BATCH = 128;
const COMBINERS = ['sum', 'mean'] as const;

function bagInput(samples: number, seed: number): { splits: Int32Array; ids: Uint32Array } {
  const nrows = samples * FEATURES;
  const splits = new Int32Array(nrows + 1);
  for (let r = 0; r <= nrows; r++) splits[r] = r * IDS;
  return { splits, ids: drawIndices(nrows * IDS, ROWS, 'uniform', seed) };
}

async function tfjsFigures(ctx: { log(s: string): void }, values: Float32Array, ids: Uint32Array): Promise<Figure[][]> {
  const out: Figure[][] = COMBINERS.map(() => []);
  const ids32 = new Int32Array(ids.buffer, ids.byteOffset, TFJS_BATCH * FEATURES * IDS);
  for (const b of ['wasm', 'cpu'] as TfjsBackendName[]) {
    const why = await useTfjs(b);
    if (why !== null) {
      ctx.log(`bag: tfjs-core on ${b} is unavailable: ${why}`);
      COMBINERS.forEach((_, i) => out[i]!.push(figure(`tfjs-core ${b}`, 'peer', NaN, 'rows/s', { note: `unavailable: ${why}` })));
      continue;
    }
    const table = tfjsTable(values, ROWS, DIM);
    for (const [i, c] of COMBINERS.entries()) {
      const m = await measure(`tfjs-core ${b} ${c}`, () => void tfjsBag(table, ids32, TFJS_BATCH * FEATURES, IDS, c === 'mean'), ids32.length, {
        minSamples: 3,
        minMs: 0,
        maxMs: 2500,
      });
      out[i]!.push(measuredFigure(`tfjs-core ${b}`, 'peer', m, 'rows/s', `gather+reshape+${c}, batch ${TFJS_BATCH}`));
    }
    table.dispose();
  }
  return out;
}

export const bagSuite: Suite = {
  name: 'bag',
  description: 'lookupCombined (embedding bag) vs JS loop, tfjs-core and a native loop',
  steps: (ctx) => COMBINERS.length * (5 + 2 + CEILING_VARIANTS.length + (ctx.threads > 1 ? 2 : 1)) + 1 + (ctx.args.full ? (3 + CEILING_VARIANTS.length) * SWEEP_SIZES.length : 0),
  async run(ctx) {
    const { splits, ids } = bagInput(BATCH, 31);
    // PyTorch's children (one per combiner, one per storage dtype) start first and build their
    // weights while our tables fill (setup, untimed); every one is ready, and idle, before anything is timed.
    const dtypeShape: BagDtypeShape = { rows: ROWS, dim: DIM, splits, ids, perBag: IDS, title: `${FEATURES} features x ${IDS} ids, batch ${BATCH}, ${formatCount(ROWS)} rows, dim ${DIM}` };
    const torchStarts = COMBINERS.map((mode) => startTorchBag({ rows: ROWS, dim: DIM, threads: ctx.threads, mode, ids, perBag: IDS }));
    const dtypePeers = startBagDtypePeers(ctx, dtypeShape);
    try {
      const idsSigned = new Int32Array(ids.buffer, ids.byteOffset, ids.length);
      const values = valuePattern(ROWS, DIM); // the JS peers' table (and tfjs's source)
      const arena = ctx.fixtures.arena(ROWS, DIM);
      const stat = staticTable(ctx.backend, DIM, ROWS);
      const keys = ctx.fixtures.keys(ROWS);
      const dyn = ctx.fixtures.table(DIM, ROWS);
      await Promise.all([...torchStarts, ...dtypePeers]);
      const staticBag: Bag<Int32Array> = { rowSplits: splits, keys: idsSigned, weights: null };
      const dynamicBag: Bag<BigInt64Array> = { rowSplits: splits, keys: pickKeys(keys, ids), weights: null };
      const nids = ids.length;
      const tf = await tfjsFigures(ctx, values, ids);
      const groups: Group[] = [];
      const targets: Target[] = [];
      const nativeOut = new Float32Array(BATCH * FEATURES * DIM);
      const ourOut = new Float32Array(BATCH * FEATURES * DIM);
      // the hash-bag ceiling: an index and records of the dynamic table's sizes, rows from the gather-reduce's arena
      const hash = layoutFor(ctx.native, dyn, ROWS, ctx.threads);
      const ceilingNotes: string[] = [];
      for (const [ci, combiner] of COMBINERS.entries()) {
        const opts = { combiner };
        const mean = combiner === 'mean';
        const entry = (label: string, name: string, kind: 'ours' | 'peer', fn: () => void, extra: Partial<Entry> = {}): Entry => ({
          job: { label: `${label} ${combiner}`, fn, items: nids },
          name,
          kind,
          unit: 'rows/s',
          ...extra,
        });
        const torch = await torchStarts[ci]!;
        const torchName = `PyTorch EmbeddingBag (${threadLabel(ctx.threads)})`;
        let torchNote = '';
        let torchAgrees = false;
        if (typeof torch === 'string') ctx.log(`bag: ${torch}`);
        else {
          let ours = 0;
          for (const x of stat.lookupCombinedSync(staticBag, opts)) ours += x;
          torchAgrees = sumsAgree(ours, torch.checksum, 1e-5);
          torchNote = `torch ${torch.version}, nn.EmbeddingBag mode=${combiner}, no_grad; ${torchAgrees ? 'output sum equals ours' : `OUTPUT DIFFERS: sum ${torch.checksum} vs ours ${ours}`}`;
        }
        const measuredAll = await runEntries(
          [
            ...(typeof torch === 'string' ? [] : [{ job: torch.peer.job(`PyTorch ${combiner}`, nids), name: torchName, kind: 'peer' as const, unit: 'rows/s', note: torchNote }]),
            entry('static lookupCombinedSync', 'static lookupCombinedSync', 'ours', () => void stat.lookupCombinedSync(staticBag, opts)),
            entry('dynamic lookupCombinedSync', 'dynamic lookupCombinedSync', 'ours', () => void dyn.lookupCombinedSync(dynamicBag, opts)),
            entry('JS loop', 'JS loop', 'peer', () => void jsGatherReduce(values, DIM, splits, ids, mean), {
              note: 'Float32Array gather-reduce',
              isolated: true, // its 27 MB output per call would bring GCs into our samples
            }),
            ...[...new Set([1, ctx.threads])].map((t) =>
              entry(`native gather-reduce ${threadLabel(t)}`, `native loop (${threadLabel(t)})`, 'peer', () =>
                ctx.native.gatherReduce(arena, splits, ids, nativeOut, mean, t),
              ),
            ),
            ...hashCeilingEntries(`native hash-bag ceiling ${threadLabel(ctx.threads)}`, ctx.native, hash.layout, arena, splits, ids, nativeOut, mean, ctx.threads),
            // like for like with the native loop: one reused output (LookupCombinedOptions.out)
            entry('static lookupCombinedSync, reused out', 'static lookupCombinedSync, reused out', 'ours', () => void stat.lookupCombinedSync(staticBag, { combiner, out: ourOut })),
            entry('dynamic lookupCombinedSync, reused out', 'dynamic lookupCombinedSync, reused out', 'ours', () => void dyn.lookupCombinedSync(dynamicBag, { combiner, out: ourOut })),
          ],
          { minSamples: 3 },
        );
        const measured = bestCeiling(measuredAll, ctx.threads, hash.note);
        // its process gone before the next group is timed (its teardown would land in those samples)
        if (typeof torch !== 'string') await torch.stop();
        const torchFigure = typeof torch === 'string' ? figure(torchName, 'peer', NaN, 'rows/s', { note: torch }) : measured.shift()!;
        const g: Group = {
          title: `${combiner}: ${FEATURES} features x ${IDS} ids, batch ${BATCH} (${formatCount(nids)} ids/call), ${formatCount(ROWS)} rows, dim ${DIM}, uniform ids`,
          params: { combiner, features: FEATURES, idsPerFeature: IDS, batch: BATCH, rows: ROWS, dim: DIM },
          figures: [...measured.slice(0, 3), torchFigure, ...tf[ci]!, ...measured.slice(3)],
        };
        groups.push(g);
        const o = 'static lookupCombinedSync';
        // the native loop writes into a reused buffer: compared with ours into a reused out
        targets.push(ratioTarget(g, `${o}, reused out`, `native loop (${threadLabel(ctx.threads)})`, '>=', 0.8, `bag ${combiner} (static, reused out) >= 0.8x native loop (${threadLabel(ctx.threads)})`));
        if (typeof torch !== 'string') {
          const t = ratioTarget(g, o, torchName, '>=', 1, `bag ${combiner} (static) >= 1.0x PyTorch EmbeddingBag (${threadLabel(ctx.threads)})`);
          targets.push(requireSameOutput(t, torchAgrees, "PyTorch's output sum differs from ours"));
        }
        targets.push(ratioTarget(g, o, 'JS loop', '>=', 5, `bag ${combiner} (static) >= 5x JS loop`));
        targets.push(ratioTarget(g, 'dynamic lookupCombinedSync', o, '>=', 0.8, `bag ${combiner}: dynamic table >= 0.8x static table`));
        ceilingNotes.push(
          `${combiner}, into reused outputs: ${ceilingSummary(g, 'dynamic lookupCombinedSync, reused out', 'static lookupCombinedSync, reused out', `native loop (${threadLabel(ctx.threads)})`, hashCeilingName(ctx.threads))}`,
        );
        const best = g.figures.filter((f) => f.name.startsWith('tfjs-core') && Number.isFinite(f.value)).sort((a, b) => b.value - a.value)[0];
        if (best) targets.push(ratioTarget(g, o, best.name, '>=', 40, `bag ${combiner} (static) >= 40x tfjs-core (its faster backend: ${best.name.slice(10)})`));
      }
      const dt = await bagDtypeGroups(ctx, { ...dtypeShape, stat }, dtypePeers);
      groups.push(...dt.groups);
      targets.push(...dt.targets);
      ctx.native.freeHashLayout(hash.layout);
      const sweep = ctx.args.full ? await bagSweep(ctx, { dim: DIM, features: FEATURES, ids: IDS, batch: BATCH }, SWEEP_SIZES, { rows: ROWS, stat, dyn, arena }) : { groups: [], summary: [] };
      groups.push(...sweep.groups);
      stat.dispose();
      ctx.fixtures.releaseAll();
      await settle();
      const result: SuiteResult = {
        suite: 'bag',
        path: 'EmbeddingTable.lookupCombinedSync with a ragged Bag (Int32Array ids on the static table, BigInt64Array keys on the dynamic one)',
        groups,
        targets,
        notes: [
          'rows/s counts gathered ids (rows read), so bag sizes compare directly',
          `tfjs-core runs batch ${TFJS_BATCH} (${formatCount(TFJS_BATCH * FEATURES * IDS)} ids) to keep its time bounded`,
          'the native loop writes into a reused output buffer; lookupCombined and the JS loop allocate theirs per call, except the "reused out" rows (LookupCombinedOptions.out), which the native-loop target compares: a fresh multi-MB output per call costs page faults that can be as large as the lookup',
          'storage dtypes: the same rows and ids on float32, bfloat16 and float16 static tables (values rounded to nearest-even when stored; pooled in double, returned as float32) vs nn.EmbeddingBag on a weight of each dtype',
          `the native hash-bag ceiling (${hash.note}): per id a random line of an array of the dynamic table's index size, then the id's 12-byte key/score record (key compared, score stored), then its row, pooled as the gather-reduce pools (same output bits); no probe, no overflow: a dynamic bag with the cpu backend's current layout (index, key/score records, rows: three arrays) cannot touch fewer lines, so dynamic / ceiling is how close the table comes to what that layout allows on this machine, and ceiling / gather-reduce what the two extra lines per id cost here`,
          ...ceilingNotes,
          ...sweep.summary.map((line) => `size sweep, sum, reused out: ${line}`),
          ...(ctx.args.full ? [] : ['the size sweep (static and dynamic bag, native loop and hash-bag ceiling at 64K-4M keys) runs with --full']),
        ],
        charts: [],
      };
      return result;
    } finally {
      closeStarted([...torchStarts, ...dtypePeers]);
    }
  },
};
