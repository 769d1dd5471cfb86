/**
 * hps: HugeCTR HPS lookups through the API a user calls (`HPS.lookup`): L1 = 20% of
 * the rows (synchronous fill), L2 in-process hash map, L3 RocksDB, Zipf(1.2) keys.
 * Peer: the same table fully in memory (a core dynamic table on the same backend),
 * measured alternately in the same run. Figures: hit rate, keys/s, latency
 * percentiles, event-loop delay while 1M keys of lookups run, and the L1 hit path
 * against core's findSync on the same (cached) keys.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createTable, type EmbeddingTable } from '@embedstack/core';
import { exportModel, HPS } from '@embedstack/hps';
import { type Group, ratioTarget, type SuiteResult, valueTarget } from '../report.js';
import { drawIndices, makeKeys, pickKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { FILL_BATCH, valuePattern } from '../tables.js';
import { figure, rotating, runEntries, settle } from './common.js';
import type { Suite, SuiteContext } from './types.js';

const DIM = 32;
const BATCH = 8192;
const ZIPF = 1.2;
/** Samples of each interleaved pair: about as long as the three alternating measurements per side this replaced. */
const PAIRED = { minSamples: 9, minMs: 600 } as const;

/**
 * The event-loop delay p99 of a monitor, in ms; NaN when it recorded no delay at all (a monitor
 * that never ran says nothing, and a `<` target must not PASS on its empty histogram's 0).
 */
export function delayP99Ms(h: { count: number; percentile(p: number): number }): number {
  return h.count > 0 ? h.percentile(99) / 1e6 : NaN;
}

/**
 * 4096 keys of the L1-hit comparisons: uniform draws among the hottest 1% of `rows` ranks,
 * each rank r spread to row r * 2654435761 mod rows. A real hot set is scattered over the
 * key space; the first 1% of rows inserted would sit side by side in a core table's arena
 * (in the CPU cache whole), a locality no hash-placed cache, HPS's L1 included, can have.
 */
export function hotKeys(keys: BigInt64Array, rows: number): BigInt64Array {
  return pickKeys(keys, drawIndices(4096, Math.max(1, Math.floor(rows / 100)), 'uniform', 95).map((r) => (r * 2654435761) % rows));
}

/** A table of `rows` keys exported in HugeCTR's layout and served by HPS (L1 20%, L2 hash map, L3 RocksDB). */
export async function hpsFixture(ctx: SuiteContext, rows: number, dir: string, volatileDb: Record<string, unknown>, gpucache = true): Promise<{ server: HPS; table: EmbeddingTable; keys: BigInt64Array }> {
  const keys = makeKeys(rows, 91);
  const table = createTable({ kind: 'dynamic', dim: DIM, initCapacity: rows, name: 'bench_hps' }, { backend: ctx.backend });
  const values = valuePattern(FILL_BATCH, DIM);
  for (let i = 0; i < rows; i += FILL_BATCH) table.upsertSync(keys.subarray(i, Math.min(rows, i + FILL_BATCH)), values.subarray(0, Math.min(FILL_BATCH, rows - i) * DIM));
  const psConfig = await exportModel({
    model: 'bench',
    dir,
    tables: [{ table, name: 'emb' }],
    modelOptions: { gpucache, gpucacheper: 0.2, hit_rate_threshold: 1.1, max_batch_size: 1 << 20, maxnum_catfeature_query_per_table_per_sample: [1] },
    globalOptions: { volatile_db: volatileDb, persistent_db: { type: 'rocks_db', path: join(dir, 'rocksdb') } },
  });
  const server = await HPS.create({ psConfig, backend: ctx.backend });
  return { server, table, keys };
}

export const hpsSuite: Suite = {
  name: 'hps',
  description: 'HPS L1/L2/L3 lookups, hit rate, latency, event-loop lag',
  // two interleaved pairs (a step per job)
  steps: () => 4,
  async run(ctx) {
    const result: SuiteResult = { suite: 'hps', path: 'HPS.lookup (Promise) vs EmbeddingTable.find / findSync', groups: [], targets: [], notes: [], charts: [] };
    const rows = ctx.args.full ? 4 << 20 : 1 << 19;
    const dir = mkdtempSync(join(tmpdir(), 'bench-hps-'));
    const { server, table, keys } = await hpsFixture(ctx, rows, dir, { type: 'hash_map' });
    try {
      // warm the cache on one stream of draws, then count hits on fresh draws
      const warm = rotating(pickKeys(keys, drawIndices(64 * BATCH, rows, { zipf: ZIPF }, 92)), BATCH);
      for (let i = 0; i < 64; i++) await server.lookup(warm(i), 'bench', 0);
      const pool = pickKeys(keys, drawIndices(32 * BATCH, rows, { zipf: ZIPF }, 93));
      const next = rotating(pool, BATCH);
      const before = server.stats('bench', 0).l1;
      for (let i = 0; i < 32; i++) await server.lookup(next(i), 'bench', 0);
      const after = server.stats('bench', 0).l1;
      const hitRate = (after.hits - before.hits) / (after.hits + after.misses - before.hits - before.misses);
      // ours and the peer sampled in alternation (one sample of each per round), so each target is the median of per-round ratios
      const tput = await runEntries(
        [
          { job: { label: 'hps lookup', fn: async (i) => void (await server.lookup(next(i), 'bench', 0)), items: BATCH, async: true }, name: 'HPS.lookup', kind: 'ours', unit: 'keys/s' },
          { job: { label: 'in-memory find', fn: async (i) => void (await table.find(next(i))), items: BATCH, async: true }, name: 'same table fully in memory (find, Promise)', kind: 'peer', unit: 'keys/s' },
        ],
        PAIRED,
      );
      // the L1 hit path: keys all cached (the hottest ranks), against findSync of the same keys (a sync call, as a user makes it)
      const hot = hotKeys(keys, rows);
      await server.lookup(hot, 'bench', 0);
      await server.lookup(hot, 'bench', 0);
      const hit = await runEntries(
        [
          { job: { label: 'hps L1 hits', fn: async () => void (await server.lookup(hot, 'bench', 0)), items: hot.length, async: true }, name: 'HPS.lookup, all keys in L1', kind: 'ours', unit: 'keys/s (L1 hits)' },
          { job: { label: 'core findSync', fn: () => void table.findSync(hot), items: hot.length }, name: 'core findSync, same keys', kind: 'peer', unit: 'keys/s (L1 hits)' },
        ],
        PAIRED,
      );
      // event-loop delay while 1M keys of lookups run (16 concurrent lookups of 64K keys)
      const big = pickKeys(keys, drawIndices(1 << 20, rows, { zipf: ZIPF }, 97));
      await settle();
      const loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      const t0 = performance.now();
      await Promise.all(Array.from({ length: 16 }, (_, j) => server.lookup(big.subarray(j << 16, (j + 1) << 16), 'bench', 0)));
      const bigSeconds = (performance.now() - t0) / 1000;
      loop.disable();
      const lagP99 = delayP99Ms(loop);
      // the same monitor for as long over a loop that is as busy but whose turns are tiny (50 us of work
      // each): what the machine's scheduler alone costs a CPU-hungry process (on a loaded machine it is
      // preempted whatever its turns), so that a loaded run's figure can be read against it
      const busy = monitorEventLoopDelay({ resolution: 1 });
      busy.enable();
      const until = performance.now() + Math.max(500, bigSeconds * 1000);
      await new Promise<void>((done) => {
        const turn = (): void => {
          const end = performance.now() + 0.05;
          while (performance.now() < end);
          if (performance.now() < until) setImmediate(turn);
          else done();
        };
        setImmediate(turn);
      });
      busy.disable();
      const busyP99 = delayP99Ms(busy);
      const st = server.stats('bench', 0);
      const group: Group = {
        title: `HPS lookups, ${formatCount(rows)} rows, dim ${DIM}, batch ${formatCount(BATCH)}, zipf(${ZIPF}); L1 20%, L2 hash map, L3 RocksDB`,
        params: { rows, dim: DIM, batch: BATCH, zipf: ZIPF },
        figures: [
          ...tput,
          ...hit,
          figure('L1 hit rate after warm-up', 'ours', hitRate, 'ratio'),
          figure('lookup latency p50', 'ours', st.latencyMs.p50, 'ms', { lowerIsBetter: true }),
          figure('lookup latency p99', 'ours', st.latencyMs.p99, 'ms', { lowerIsBetter: true }),
          figure('event-loop delay p99 during 1M-key lookups', 'ours', lagP99, 'ms (loop)', { lowerIsBetter: true, note: `16 concurrent lookups of 64K keys took ${bigSeconds.toFixed(2)} s` }),
          figure('event-loop delay p99, a loop of 50 us turns as long (the scheduler alone)', 'peer', busyP99, 'ms (loop)', { lowerIsBetter: true }),
        ],
      };
      result.groups.push(group);
      result.targets.push(
        valueTarget(hitRate, '>=', 0.85, 'ratio', 'L1 hit rate >= 0.85 at 20% cache, zipf(1.2)'),
        ratioTarget(group, 'HPS.lookup', 'same table fully in memory (find, Promise)', '>=', 0.5, 'lookup throughput >= 0.5x the table fully in memory'),
        valueTarget(lagP99, '<', 10, 'ms', 'event-loop delay p99 < 10 ms while 1M-key lookups run'),
        ratioTarget(group, 'HPS.lookup, all keys in L1', 'core findSync, same keys', '>=', 0.8, "L1 hit path >= 0.8x core's findSync on the same keys"),
      );
      result.notes.push(
        'ours and each peer are sampled in alternation (one sample of each per round; the ratios are the median of the per-round ratios); hit rate over 32 fresh batches after 64 warm-up batches of other draws',
        'event-loop delay: the target is absolute (a quiet machine); on a loaded one read it against the loop of 50 us turns measured right after, which is the delay the scheduler alone gives a busy process',
      );
    } finally {
      await server.close();
      table.dispose();
      rmSync(dir, { recursive: true, force: true });
      await settle();
    }
    return result;
  },
};
