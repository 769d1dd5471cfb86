/**
 * Timing: warm up, then repeat until enough samples (and time) are in, report the
 * median rate. Calls are grouped into samples of >= `sampleMs` so the timer's
 * resolution does not matter. Single-threaded; measures wall time.
 */
import { median } from './stats.js';
import { progress } from './progress.js';

export interface MeasureOptions {
  /** Untimed calls first. Default 1. */
  warmup?: number;
  /** Default 5. */
  minSamples?: number;
  /** Default 40. */
  maxSamples?: number;
  /** Keep sampling at least this long (ms), once minSamples are in. Default 400. */
  minMs?: number;
  /** Stop after this long (ms) even before minSamples (at least one sample). Default 4000. */
  maxMs?: number;
  /** Group calls so that one sample lasts at least this long (ms). Default 20. */
  sampleMs?: number;
}

export interface Measured {
  /** Median of the samples' rates, items per second. */
  rate: number;
  /** Rate of each sample, items/s. */
  samples: number[];
  /** Timed calls in all. */
  calls: number;
}

type Resolved = Required<MeasureOptions>;

function resolve(o: MeasureOptions): Resolved {
  return { warmup: 1, minSamples: 5, maxSamples: 40, minMs: 400, maxMs: 4000, sampleMs: 20, ...o };
}

/** Whether sampling is over, given the samples so far and the time since sampling began. */
export function enough(samples: number, elapsedMs: number, o: Resolved): boolean {
  return samples >= o.maxSamples || (samples >= o.minSamples && elapsedMs >= o.minMs) || (samples >= 1 && elapsedMs >= o.maxMs);
}

const callsPerSample = (o: Resolved, lastMs: number): number => Math.max(1, Math.ceil(o.sampleMs / Math.max(lastMs, 1e-3)));

/**
 * `fn(i)` does one call's work on `items` items (i counts calls, so callers can
 * rotate through batches). If it returns a number, that is the call's own timed
 * seconds (for calls with untimed setup) and every sample is one call.
 */
export function measure(label: string, fn: (i: number) => number | void, items: number, opts: MeasureOptions = {}): Measured {
  progress.label(label);
  const o = resolve(opts);
  let call = 0;
  let lastMs = 0;
  let selfTimed = false;
  for (let w = 0; w < o.warmup; w++) {
    const t0 = performance.now();
    const r = fn(call++);
    selfTimed = typeof r === 'number';
    lastMs = selfTimed ? (r as number) * 1000 : performance.now() - t0;
  }
  // Without a warm-up there is no timing to group calls by: one call per sample.
  const perSample = selfTimed || o.warmup === 0 ? 1 : callsPerSample(o, lastMs);
  const samples: number[] = [];
  const start = performance.now();
  do {
    let seconds = 0;
    const t0 = performance.now();
    for (let c = 0; c < perSample; c++) {
      const r = fn(call++);
      if (typeof r === 'number') {
        seconds += r;
        selfTimed = true;
      }
    }
    if (!selfTimed) seconds = (performance.now() - t0) / 1000;
    samples.push((items * perSample) / seconds);
  } while (!enough(samples.length, performance.now() - start, o));
  progress.step();
  return { rate: median(samples), samples, calls: call - o.warmup };
}

/** The Promise form of {@link measure}: each call is awaited (one at a time). */
export async function measureAsync(label: string, fn: (i: number) => Promise<unknown>, items: number, opts: MeasureOptions = {}): Promise<Measured> {
  progress.label(label);
  const o = resolve(opts);
  let call = 0;
  let lastMs = 0;
  for (let w = 0; w < o.warmup; w++) {
    const t0 = performance.now();
    await fn(call++);
    lastMs = performance.now() - t0;
  }
  const perSample = o.warmup === 0 ? 1 : callsPerSample(o, lastMs);
  const samples: number[] = [];
  const start = performance.now();
  do {
    const t0 = performance.now();
    for (let c = 0; c < perSample; c++) await fn(call++);
    samples.push((items * perSample) / ((performance.now() - t0) / 1000));
  } while (!enough(samples.length, performance.now() - start, o));
  progress.step();
  return { rate: median(samples), samples, calls: call - o.warmup };
}

/** Runs the garbage collector when node runs with --expose-gc (the CLI makes sure it does). */
export function collectGarbage(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
}
