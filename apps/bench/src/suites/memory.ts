/**
 * memory: bytes per key of a dim-64 table at 1M and 10M keys, as the RSS growth
 * of a fresh child process (so nothing else pollutes the delta) and as the
 * table's own memoryUsage(); against a JS Map<bigint, Float32Array> and the
 * values' own bytes. The child fills through small reused batches, so the
 * inputs add nothing to the delta. Each RSS reading follows two collections and a trim of the C
 * heap (the bench's addon: glibc malloc_trim), so the delta is what the filled table keeps
 * resident: the table's own trims cannot return free heap pages that were resident before the fill
 * and so lower the figure (they did, by 2.6-3.6 B/key at 10M keys, stop 36).
 * The child's V8 young generation is pinned at 1 MiB semi-spaces ({@link CHILD_HEAP_FLAGS}): left
 * free, V8 grew it while loading modules and shrank it during a 10M-key fill (heapTotal 58 -> 26 MB),
 * and the RSS delta credited that release to the table (about 1.5 B/key at 10M keys, stop 37). The
 * child reports V8's heapTotal at both readings; the suite prints the largest change.
 * The children run one at a time: two filling side by side raised the figures (1M keys grown 22.0
 * against 19.9 B/key, 10M keys 17.2 against 16.8-17.0, in three runs each, stop 52), so a child's RSS
 * delta depends on what fills beside it.
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import { createTable, setDefaultBackend } from '@embedstack/core';
import { loadBackend } from '../backend.js';
import { loadNative } from '../native.js';
import { collectGarbage } from '../harness.js';
import { progress } from '../progress.js';
import { type Figure, type Group, type SuiteResult, type Target, valueTarget } from '../report.js';
import { fillKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { valuePattern } from '../tables.js';
import { figure, overheadBeyond } from './common.js';
import type { Suite, SuiteContext } from './types.js';

const DIM = 64;
const BATCH = 65536;

/** V8 flags of every memory child: young generation fixed at 1 MiB semi-spaces, so V8's own heap barely moves between the readings. */
export const CHILD_HEAP_FLAGS = ['--max-semi-space-size=1', '--min-semi-space-size=1'] as const;

export interface MemoryChildSpec {
  /** A core table, a JS Map, or a tfra Variable (the facades suite) on `backend`. */
  what: 'table' | 'jsmap' | 'tfra';
  keys: number;
  dim: number;
  presize: boolean;
  backend: string;
}

export interface MemoryChildResult {
  rssDelta: number;
  memoryUsage: number | null;
  size: number;
  capacity: number | null;
  /** V8's heapTotal at the two readings (bytes); their difference is V8's, not the table's. */
  heapTotal: [number, number];
}

const rssNow = async (): Promise<number> => {
  collectGarbage();
  await new Promise((r) => setTimeout(r, 50));
  collectGarbage();
  // false without glibc, where the table's write path does not trim either (memory.cc)
  loadNative().trimHeap();
  return process.memoryUsage().rss;
};

/** Runs inside the child (cli.js --memory-child JSON): fills, prints one JSON line. */
export async function memoryChild(spec: MemoryChildSpec): Promise<MemoryChildResult> {
  const { backend } = spec.what === 'jsmap' ? { backend: null } : await loadBackend(spec.backend);
  const tfra = spec.what === 'tfra' ? await import('@embedstack/tfra') : null;
  if (tfra) setDefaultBackend(backend!.name);
  const keys = new BigInt64Array(BATCH);
  const values = valuePattern(BATCH, spec.dim);
  const rss0 = await rssNow();
  const heap0 = process.memoryUsage().heapTotal;
  const heap = (): [number, number] => [heap0, process.memoryUsage().heapTotal];
  const each = (fn: (k: BigInt64Array, v: Float32Array) => void): void => {
    for (let b = 0; b < spec.keys; b += BATCH) {
      const n = Math.min(BATCH, spec.keys - b);
      fn(fillKeys(keys.subarray(0, n), b, 9), values.subarray(0, n * spec.dim));
    }
  };
  if (spec.what === 'jsmap') {
    const map = new Map<bigint, Float32Array>();
    each((k, v) => {
      for (let i = 0; i < k.length; i++) map.set(k[i]!, v.slice(i * spec.dim, (i + 1) * spec.dim));
    });
    const rss1 = await rssNow();
    return { rssDelta: rss1 - rss0, memoryUsage: null, size: map.size, capacity: null, heapTotal: heap() };
  }
  if (tfra) {
    const v = new tfra.Variable({ keyDtype: 'int64', dim: spec.dim, name: 'bench_memory', ...(spec.presize ? { initSize: spec.keys } : {}) });
    each((k, x) => v.upsertSync(k, x));
    const rss1 = await rssNow();
    const usage = v.tables.reduce((a, t) => a + t.memoryUsage(), 0);
    return { rssDelta: rss1 - rss0, memoryUsage: usage, size: v.sizeSync(), capacity: v.tables.reduce((a, t) => a + t.capacity(), 0), heapTotal: heap() };
  }
  const table = createTable({ dim: spec.dim, name: 'bench_memory', ...(spec.presize ? { initCapacity: spec.keys } : {}) }, { backend: backend! });
  each((k, v) => table.upsertSync(k, v));
  const rss1 = await rssNow();
  return { rssDelta: rss1 - rss0, memoryUsage: table.memoryUsage(), size: table.size(), capacity: table.capacity(), heapTotal: heap() };
}

function runChild(ctx: SuiteContext, spec: MemoryChildSpec): Promise<MemoryChildResult> {
  const heapMb = Math.floor((os.totalmem() / 2 ** 20) * 0.75);
  const args = ['--expose-gc', `--max-old-space-size=${heapMb}`, ...CHILD_HEAP_FLAGS, ctx.cliPath, '--memory-child', JSON.stringify(spec)];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { maxBuffer: 1 << 20, env: { ...process.env, EMBEDSTACK_BENCH_CHILD: '1' } }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`memory child ${JSON.stringify(spec)} failed: ${err.message}\n${stderr}`));
      const line = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line) as MemoryChildResult);
      } catch {
        reject(new Error(`memory child printed no result: ${stdout}\n${stderr}`));
      }
    });
  });
}

/** One child measurement with its progress step; an Error (logged) when the child failed. */
export async function runMemoryChild(ctx: SuiteContext, label: string, spec: MemoryChildSpec): Promise<MemoryChildResult | Error> {
  progress.label(label);
  try {
    return await runChild(ctx, spec);
  } catch (e) {
    ctx.log(`memory: ${(e as Error).message}`);
    return e as Error;
  } finally {
    progress.step();
  }
}

const perKey = (r: MemoryChildResult | Error, n: number, pick: (r: MemoryChildResult) => number | null): number =>
  r instanceof Error ? NaN : (pick(r) ?? NaN) / n;

/** The largest change of V8's heapTotal between a table child's two readings (V8's own, inside its RSS delta; a JS Map's is its memory). */
export function heapChangeNote(children: readonly (MemoryChildResult | Error)[]): string {
  const changes = children.filter((r): r is MemoryChildResult => !(r instanceof Error)).map((r) => r.heapTotal[1] - r.heapTotal[0]);
  if (changes.length === 0) return 'V8 heapTotal change between the readings: no child result';
  const worst = changes.reduce((a, b) => (Math.abs(b) > Math.abs(a) ? b : a));
  const mb = (worst / 2 ** 20).toFixed(1);
  return `V8 heapTotal change between a table child's readings: at most ${worst > 0 ? '+' : ''}${mb} MiB (young generation pinned at 1 MiB semi-spaces; 10 MiB would be 1 B/key at 10M keys)`;
}

export const memorySuite: Suite = {
  name: 'memory',
  description: 'bytes per key (RSS delta, memoryUsage()) vs JS Map and the value bytes',
  steps: (ctx) => 5 + (ctx.args.full ? 1 : 0),
  async run(ctx) {
    const groups: Group[] = [];
    const targets: Target[] = [];
    const valueBytes = DIM * 4;
    const children: (MemoryChildResult | Error)[] = [];
    for (const n of [1_000_000, 10_000_000]) {
      const base = { keys: n, dim: DIM, backend: ctx.backend.name };
      const grown = await runMemoryChild(ctx, `table ${formatCount(n)} keys (grown)`, { ...base, what: 'table', presize: false });
      const presized = await runMemoryChild(ctx, `table ${formatCount(n)} keys (presized)`, { ...base, what: 'table', presize: true });
      const figures: Figure[] = [
        figure('table RSS (grown)', 'ours', perKey(grown, n, (r) => r.rssDelta), 'B/key', { lowerIsBetter: true, note: 'from initCapacity 1024' }),
        figure('table RSS (presized)', 'ours', perKey(presized, n, (r) => r.rssDelta), 'B/key', { lowerIsBetter: true, note: 'initCapacity = keys' }),
        figure('table memoryUsage() (grown)', 'ours', perKey(grown, n, (r) => r.memoryUsage), 'B/key', { lowerIsBetter: true }),
        figure('table memoryUsage() (presized)', 'ours', perKey(presized, n, (r) => r.memoryUsage), 'B/key', { lowerIsBetter: true }),
      ];
      children.push(grown, presized);
      if (n === 1_000_000 || ctx.args.full) {
        const map = await runMemoryChild(ctx, `JS Map ${formatCount(n)} keys`, { ...base, what: 'jsmap', presize: false });
        figures.push(figure('JS Map RSS', 'peer', perKey(map, n, (r) => r.rssDelta), 'B/key', { lowerIsBetter: true, note: 'Map<bigint, Float32Array>' }));
      }
      figures.push(figure('value bytes', 'peer', valueBytes, 'B/key', { lowerIsBetter: true, note: `dim ${DIM} x 4` }));
      groups.push({ title: `${n.toLocaleString('en-US')} keys, dim ${DIM} (fresh child process per figure)`, params: { keys: n, dim: DIM }, figures });
      for (const f of figures.slice(0, 2)) {
        // #14: <= 16 B/key beyond the values at 10M keys (24 at 1M, where the partly used huge pages weigh more)
        const bound = n >= 10_000_000 ? 16 : 24;
        targets.push(valueTarget(overheadBeyond(f.value, valueBytes), '<=', bound, 'B/key', `${f.name} overhead beyond value bytes, ${n.toLocaleString('en-US')} keys`));
      }
    }
    const result: SuiteResult = {
      suite: 'memory',
      path: 'RSS growth of a fresh process filled with upsertSync in 64K batches; EmbeddingTable.memoryUsage()',
      groups,
      targets,
      notes: [
        'ratios here are cost ratios: "0.9x value bytes" means 10% more than the bare values',
        `the JS Map at 10M keys runs with --full only`,
        heapChangeNote(children),
      ],
      charts: [],
    };
    return result;
  },
};
