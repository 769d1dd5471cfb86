/** Measurement pieces shared by several suites. */
import type { EmbeddingTable } from '@embedstack/core';
import { collectGarbage, type Job, type MeasureOptions, type Measured, measureInterleaved } from '../harness.js';
import type { Arena, NativePeers } from '../native.js';
import type { Bar } from '../charts.js';
import type { Figure, Group } from '../report.js';

/** Batch size of find-like measurements (keys per call) unless a suite sweeps it. */
export const BATCH = 65536;
/** Batches per key pool: calls rotate through them so caches do not flatter. */
export const POOL_BATCHES = 16;

/** The headline configuration of the spec's find target (shared by limit and find). */
export const HEADLINE = { dim: 64, keys: 4 << 20 } as const;

/** For CI's suite tests (--facades-tiny, --sok-tiny, the bag sweep's test): every job runs, 2 short samples each; the figures mean nothing. */
export const TINY_MEASURE: MeasureOptions = { warmup: 1, minSamples: 2, maxSamples: 2, minMs: 0, sampleMs: 2 };

export const threadLabel = (t: number): string => `${t} thread${t === 1 ? '' : 's'}`;

/** 1, 2, 4, ... up to and including `max`. */
export function threadCounts(max: number): number[] {
  const out: number[] = [];
  for (let t = 1; t < max; t *= 2) out.push(t);
  out.push(max);
  return [...new Set(out)];
}

export function figure(name: string, kind: 'ours' | 'peer', value: number, unit: string, extra: Partial<Figure> = {}): Figure {
  return { name, kind, value, unit, ...extra };
}

/** A job plus how its figure is reported. */
export interface Entry {
  job: Job;
  name: string;
  kind: 'ours' | 'peer';
  unit: string;
  note?: string;
  /**
   * Timed on its own after the interleaved ones: for jobs that allocate large JS
   * buffers or heaps, whose garbage collection would otherwise land in the other
   * jobs' samples (our result allocations are what trigger the collections).
   */
  isolated?: boolean;
}

/** The figure of a measurement: its median rate, samples and spread. */
export function measuredFigure(name: string, kind: 'ours' | 'peer', m: Measured, unit: string, note?: string): Figure {
  return figure(name, kind, m.rate, unit, { samples: m.samples, spread: m.spread, ...(m.interleaved !== undefined ? { interleaved: m.interleaved } : {}), ...(note ? { note } : {}) });
}

/**
 * Measures the entries (interleaved, see measureInterleaved, except the isolated
 * ones, timed one by one afterwards) and returns their figures in entry order.
 */
export async function runEntries(entries: readonly Entry[], o?: MeasureOptions): Promise<Figure[]> {
  const shared = entries.filter((e) => !e.isolated);
  const measured = new Map<Entry, Measured>();
  if (shared.length > 0) {
    const ms = await measureInterleaved(
      shared.map((e) => e.job),
      o,
    );
    ms.forEach((m, i) => measured.set(shared[i]!, m));
  }
  for (const e of entries.filter((x) => x.isolated)) {
    collectGarbage();
    measured.set(e, (await measureInterleaved([e.job], o))[0]!);
  }
  return entries.map((e) => measuredFigure(e.name, e.kind, measured.get(e)!, e.unit, e.note));
}

/** Call i works on batch i mod (pool length / batch) of `pool`. */
export function rotating<T extends { length: number; subarray(a: number, b: number): T }>(pool: T, batch: number): (i: number) => T {
  const batches = Math.max(1, Math.floor(pool.length / batch));
  return (i) => pool.subarray((i % batches) * batch, (i % batches) * batch + batch);
}

/** findSync over rotating batches of `pool`; keys/s. */
export function findEntry(label: string, table: EmbeddingTable, pool: BigInt64Array, batch = BATCH, name = 'find (findSync)'): Entry {
  const next = rotating(pool, batch);
  return { job: { label, fn: (i) => void table.findSync(next(i)), items: batch }, name, kind: 'ours', unit: 'keys/s' };
}

/** The Promise form of find, one call awaited at a time, as an interleavable entry; keys/s. */
export function findAsyncEntry(label: string, table: EmbeddingTable, pool: BigInt64Array, batch = BATCH): Entry {
  const next = rotating(pool, batch);
  return { job: { label, fn: async (i) => void (await table.find(next(i))), items: batch, async: true }, name: 'find (Promise)', kind: 'ours', unit: 'keys/s' };
}

/**
 * The plain native gather over rotating batches of row indices; rows/s. Writes
 * into one reused output buffer, or with `freshOutput` into a new Float32Array
 * per call (the allocation find and the JS Map pay).
 */
export function gatherEntry(
  label: string,
  native: NativePeers,
  arena: Arena,
  dim: number,
  pool: Uint32Array,
  threads: number,
  batch = BATCH,
  freshOutput = false,
): Entry {
  const next = rotating(pool, batch);
  const reused = new Float32Array(batch * dim);
  const fn = (i: number): void => native.gather(arena, next(i), freshOutput ? new Float32Array(batch * dim) : reused, threads);
  const name = `native gather (${threadLabel(threads)}${freshOutput ? ', fresh output' : ''})`;
  return { job: { label, fn, items: batch }, name, kind: 'peer', unit: 'keys/s', isolated: freshOutput };
}

/**
 * Bytes per key beyond the value bytes, from a measured bytes-per-key figure: NaN when the figure
 * is below the value bytes themselves (or not finite), which no table can take, so such a figure
 * is a broken measurement (an RSS read that missed the table) and its `<=` target must not PASS.
 */
export function overheadBeyond(bytesPerKey: number, valueBytes: number): number {
  return Number.isFinite(bytesPerKey) && bytesPerKey >= valueBytes ? bytesPerKey - valueBytes : NaN;
}

/** Releases garbage and gives the event loop a turn (lets timers and GC settle). */
export async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  await new Promise((r) => setImmediate(r));
}

/**
 * Bars of a bar chart from the groups' measured figures of one unit, divided (1e6 for
 * M keys/s), with median -/+ MAD as the error bar. `caseName` shortens group titles.
 */
export function groupBars(groups: readonly Group[], unit: string, divisor: number, caseName: (g: Group) => string = (g) => g.title): Bar[] {
  return groups.flatMap((g) =>
    g.figures
      .filter((f) => f.unit === unit && Number.isFinite(f.value))
      .map((f) => ({
        group: caseName(g),
        name: f.name,
        value: f.value / divisor,
        ...(f.spread ? { low: (f.value - f.spread.mad) / divisor, high: (f.value + f.spread.mad) / divisor } : {}),
      })),
  );
}
