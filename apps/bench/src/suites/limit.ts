/**
 * limit: the physical ceiling. A plain native memcpy (GB/s) and a plain native
 * random row gather (rows/s) over an arena the size of find's headline table,
 * on 1 .. all threads; our findSync on the same size, same batches, for scale.
 */
import { drawIndices, pickKeys } from '../rng.js';
import { type Chart, lineChart } from '../charts.js';
import type { SuiteResult } from '../report.js';
import { formatBytes } from '../format.js';
import { BATCH, figure, findEntry, gatherEntry, HEADLINE, POOL_BATCHES, runEntries, threadCounts, threadLabel } from './common.js';
import type { Suite } from './types.js';

export const limitSuite: Suite = {
  name: 'limit',
  description: 'native memcpy GB/s and random row gather rows/s (the physical ceiling)',
  steps: (ctx) => 2 * threadCounts(ctx.hwThreads).length + 1,
  // the arena and the table are find's headline row's (same keys, dim and rows)
  fixturesFor: ['find'],
  async run(ctx) {
    const { dim, keys: rows } = HEADLINE;
    const arena = ctx.fixtures.arena(rows, dim);
    const bytes = rows * dim * 4;
    const idx = drawIndices(POOL_BATCHES * BATCH, rows, 'uniform', 11);
    const counts = threadCounts(ctx.hwThreads);
    const copy = await runEntries(
      counts.map((t) => ({
        job: { label: `memcpy ${formatBytes(bytes)}, ${threadLabel(t)}`, fn: () => void ctx.native.copyArena(arena, t), items: bytes / 1e9 },
        name: `native memcpy (${threadLabel(t)})`,
        kind: 'peer' as const,
        unit: 'GB/s',
      })),
      { minSamples: 3, minMs: 0 },
    );
    const table = ctx.fixtures.table(dim, rows);
    const gatherAndFind = await runEntries([
      ...counts.map((t) => gatherEntry(`native gather, ${threadLabel(t)}`, ctx.native, arena, dim, idx, t)),
      findEntry('find (findSync)', table, pickKeys(ctx.fixtures.keys(rows), idx)),
    ]);
    const gather = gatherAndFind.slice(0, counts.length);
    const find = gatherAndFind[counts.length]!;
    const findBytes = figure('find (findSync), value bytes out', 'ours', (find.value * dim * 4) / 1e9, 'GB/s', {
      note: 'rows/s x row bytes',
    });
    const size = `${rows.toLocaleString('en-US')} rows x dim ${dim} (${formatBytes(bytes)})`;
    const charts: Chart[] = [
      lineChart({
        name: 'limit-copy-vs-threads',
        title: `Native memcpy of ${formatBytes(bytes)}`,
        xLabel: 'threads',
        yLabel: 'GB/s',
        series: [{ name: 'memcpy', points: copy.map((f, i) => [counts[i]!, f.value] as const) }],
      }),
      lineChart({
        name: 'limit-gather-vs-threads',
        title: `Native random row gather, ${size}`,
        xLabel: 'threads',
        yLabel: 'M rows/s',
        series: [
          { name: 'native gather', points: gather.map((f, i) => [counts[i]!, f.value / 1e6] as const) },
          { name: `find (${ctx.backend.name})`, points: [[ctx.threads, find.value / 1e6]] },
        ],
      }),
    ];
    const result: SuiteResult = {
      suite: 'limit',
      path: 'native loops (apps/bench/native) vs findSync on the same size',
      groups: [
        { title: `sequential copy, ${size}`, params: { rows, dim, bytes }, figures: [...copy, findBytes] },
        {
          title: `random row gather, ${size}, batch ${BATCH}, uniform`,
          params: { rows, dim, batch: BATCH, distribution: 'uniform' },
          figures: [...gather, find],
        },
      ],
      targets: [],
      notes: [`backend '${ctx.backend.name}' reports ${ctx.threads} thread(s); the machine has ${ctx.hwThreads}`],
      charts,
    };
    return result;
  },
};
