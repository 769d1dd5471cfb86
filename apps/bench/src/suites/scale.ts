/**
 * scale: find keys/s as one table grows (1M -> 16M keys by default, -> 64M with
 * --full) at a fixed batch, then as the batch grows (1K -> 1M keys) on the
 * largest table. A flat per-key cost is the goal, so every figure is compared
 * with the first one of its sweep. The largest batch is also timed into a reused out
 * (its fresh result is a new mapping every call). The growth's upsert rate is reported too.
 */
import { createTable, type EmbeddingTable } from '@embedstack/core';
import { lineChart } from '../charts.js';
import { type Figure, type Group, ratioTarget, type SuiteResult } from '../report.js';
import { drawIndices, makeKeys, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { fillTable } from '../tables.js';
import { BATCH, type Entry, figure, findEntry, rotating, runEntries, settle } from './common.js';
import type { Suite } from './types.js';

const DIM = 32;
const POOL_KEYS = 1 << 20;

const sizesFor = (full: boolean): number[] =>
  full ? [1, 2, 4, 8, 16, 32, 64].map((m) => m << 20) : [1 << 20, 4 << 20, 16 << 20];
const BATCHES = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20];

/**
 * findSync of `batch` keys into one out reused by every call: the batch sweep's last figure
 * without its fresh result (a JS array of 32 MiB or more is a new mapping each call).
 */
function reusedOutEntry(label: string, table: EmbeddingTable, pool: BigInt64Array, batch: number): Entry {
  const next = rotating(pool, batch);
  const out = { values: new Float32Array(batch * table.dim), exists: new Uint8Array(batch) };
  return {
    job: { label, fn: (i) => void table.findSync(next(i), { out }), items: batch },
    name: `find, batch ${formatCount(batch)}, reused out`,
    kind: 'ours',
    unit: 'keys/s',
    note: 'no fresh result per call',
  };
}

/** The first figure of a sweep becomes the baseline peer of the others. */
function sweep(figures: Figure[]): Figure[] {
  return figures.map((f, i) => (i === 0 ? { ...f, kind: 'peer' as const, name: `${f.name} (baseline)` } : f));
}

export const scaleSuite: Suite = {
  name: 'scale',
  description: 'find keys/s as the table grows and as the batch grows',
  // one measurement per size, the interleaved pair, each batch, the largest batch into a reused out
  steps: (ctx) => sizesFor(ctx.args.full).length + 2 + BATCHES.length + 1,
  async run(ctx) {
    const sizes = sizesFor(ctx.args.full);
    const maxKeys = sizes[sizes.length - 1]!;
    const keys = makeKeys(maxKeys, 13);
    const table = createTable({ dim: DIM, name: 'bench_scale' }, { backend: ctx.backend });
    const bySize: Figure[] = [];
    const upserts: [number, number][] = [];
    let filled = 0;
    for (const n of sizes) {
      const seconds = fillTable(table, keys, filled, n);
      upserts.push([n, (n - filled) / seconds]);
      filled = n;
      const pool = pickKeys(keys, drawIndices(POOL_KEYS, n, 'uniform', 51));
      bySize.push(...(await runEntries([findEntry(`find on ${formatCount(n)} keys`, table, pool, BATCH, `find @ ${formatCount(n)} keys`)])));
      await settle();
    }
    // The largest table against a fresh 1M-key one, interleaved (the sweep above runs one size at a time).
    const small = createTable({ dim: DIM, name: 'bench_scale_1m' }, { backend: ctx.backend });
    fillTable(small, keys, 0, sizes[0]!);
    const interleaved = await runEntries([
      findEntry(`find on ${formatCount(sizes[0]!)} keys (interleaved)`, small, pickKeys(keys, drawIndices(POOL_KEYS, sizes[0]!, 'uniform', 53)), BATCH, `find @ ${formatCount(sizes[0]!)} keys`),
      findEntry(`find on ${formatCount(maxKeys)} keys (interleaved)`, table, pickKeys(keys, drawIndices(POOL_KEYS, maxKeys, 'uniform', 54)), BATCH, `find @ ${formatCount(maxKeys)} keys`),
    ]);
    small.dispose();
    const lastBatch = BATCHES[BATCHES.length - 1]!;
    const pool = pickKeys(keys, drawIndices(2 * lastBatch, maxKeys, 'uniform', 52));
    // The largest batch once more into one reused out, in the same rounds: its fresh 128 MiB
    // result is a new mapping from the C library every call, whose page faults cost as much as
    // the find or more (cpu-backend MEASUREMENTS.md, "A 30x slow find at 16M keys").
    const measuredByBatch = await runEntries([
      ...BATCHES.map((b) => findEntry(`find, batch ${formatCount(b)}`, table, pool, b, `find, batch ${formatCount(b)}`)),
      reusedOutEntry(`find, batch ${formatCount(lastBatch)} into a reused out`, table, pool, lastBatch),
    ]);
    const byBatch = measuredByBatch.slice(0, BATCHES.length);
    table.dispose();
    await settle();
    const sizeGroup: Group = {
      title: `${formatCount(maxKeys)} vs ${formatCount(sizes[0]!)} keys, two tables sampled interleaved: dim ${DIM}, batch ${formatCount(BATCH)}, uniform`,
      params: { dim: DIM, batch: BATCH },
      figures: sweep(interleaved),
    };
    const groups: Group[] = [
      { title: `table size sweep: dim ${DIM}, batch ${formatCount(BATCH)}, uniform`, params: { dim: DIM, batch: BATCH }, figures: sweep(bySize) },
      sizeGroup,
      { title: `batch sweep: ${formatCount(maxKeys)} keys, dim ${DIM}, uniform`, params: { dim: DIM, keys: maxKeys }, figures: [...sweep(byBatch), measuredByBatch[BATCHES.length]!] },
      {
        title: `growth: upsertSync of new keys into the growing table (from initCapacity 1024), batch ${formatCount(BATCH)}`,
        params: { dim: DIM },
        figures: sweep(upserts.map(([n, r]) => figure(`upsert up to ${formatCount(n)} keys`, 'ours', r, 'keys/s'))),
      },
    ];
    const result: SuiteResult = {
      suite: 'scale',
      path: 'EmbeddingTable.findSync on one growing table; upsertSync for the growth',
      groups,
      targets: [
        ratioTarget(sizeGroup, `find @ ${formatCount(maxKeys)} keys`, `find @ ${formatCount(sizes[0]!)} keys (baseline)`, '>=', 0.75, `find at ${formatCount(maxKeys)} keys >= 0.75x find at ${formatCount(sizes[0]!)} keys (interleaved)`),
      ],
      notes: [`ratios compare with the sweep's first figure: 1.00x = flat per-key cost`],
      charts: [
        lineChart({
          name: 'scale-table-size',
          title: `find and upsert throughput vs table size (dim ${DIM})`,
          xLabel: 'keys in the table',
          yLabel: 'M keys/s',
          xLog: true,
          xCounts: true,
          series: [
            { name: 'findSync', points: bySize.map((f, i) => [sizes[i]!, f.value / 1e6] as const) },
            { name: 'upsertSync (growth)', points: upserts.map(([n, r]) => [n, r / 1e6] as const) },
          ],
        }),
        lineChart({
          name: 'scale-batch',
          title: `find throughput vs batch (${formatCount(maxKeys)} keys, dim ${DIM})`,
          xLabel: 'keys per call',
          yLabel: 'M keys/s',
          xLog: true,
          xCounts: true,
          series: [{ name: 'findSync', points: byBatch.map((f, i) => [BATCHES[i]!, f.value / 1e6] as const) }],
        }),
      ],
    };
    return result;
  },
};
