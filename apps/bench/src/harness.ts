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
  /**
   * Group calls so that one sample lasts at least this long (ms). Default 100: long
   * enough that each sample averages over the periodic costs of a call (the GCs its
   * result buffers trigger every few tens of ms), so the median is not a coin toss
   * between samples with and without one.
   */
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
  return { warmup: 1, minSamples: 5, maxSamples: 40, minMs: 400, maxMs: 4000, sampleMs: 100, ...o };
}

/** Whether sampling is over, given the samples so far and the time since sampling began. */
export function enough(samples: number, elapsedMs: number, o: Resolved): boolean {
  return samples >= o.maxSamples || (samples >= o.minSamples && elapsedMs >= o.minMs) || (samples >= 1 && elapsedMs >= o.maxMs);
}

const callsPerSample = (o: Resolved, lastMs: number): number => Math.max(1, Math.ceil(o.sampleMs / Math.max(lastMs, 1e-3)));

/** One thing to time: `fn(i)` does call i's work on `items` items. */
export interface Job {
  label: string;
  /**
   * i counts the job's calls, so callers can rotate through batches. If it returns
   * a number, that is the call's own timed seconds (for calls with untimed setup)
   * and every sample is one call.
   */
  fn: (i: number) => number | void;
  items: number;
  /** Overrides MeasureOptions.warmup for this job. */
  warmup?: number;
}

/** A job's state while it is being sampled. */
class Runner {
  call = 0;
  perSample = 1;
  selfTimed = false;
  readonly samples: number[] = [];
  constructor(readonly job: Job) {}

  warmUp(o: Resolved): void {
    let lastMs = 0;
    const warmup = this.job.warmup ?? o.warmup;
    for (let w = 0; w < warmup; w++) {
      const t0 = performance.now();
      const r = this.job.fn(this.call++);
      this.selfTimed = typeof r === 'number';
      lastMs = this.selfTimed ? (r as number) * 1000 : performance.now() - t0;
    }
    // Without a warm-up there is no timing to group calls by: one call per sample.
    this.perSample = this.selfTimed || warmup === 0 ? 1 : callsPerSample(o, lastMs);
  }

  sample(): void {
    let seconds = 0;
    const t0 = performance.now();
    for (let c = 0; c < this.perSample; c++) {
      const r = this.job.fn(this.call++);
      if (typeof r === 'number') {
        seconds += r;
        this.selfTimed = true;
      }
    }
    if (!this.selfTimed) seconds = (performance.now() - t0) / 1000;
    this.samples.push((this.job.items * this.perSample) / seconds);
  }

  result(o: Resolved): Measured {
    return { rate: median(this.samples), samples: this.samples, calls: this.call - (this.job.warmup ?? o.warmup) };
  }
}

/**
 * Times several jobs in alternation: after each job's warm-up, every round takes
 * one sample of each, so a change in machine load (other processes, a busy
 * second core) hits every job alike and their ratios stay meaningful. Rounds stop
 * by {@link enough}, with minMs and maxMs counted per job.
 */
export function measureInterleaved(jobs: readonly Job[], opts: MeasureOptions = {}): Measured[] {
  const o = resolve(opts);
  const perRound = { ...o, minMs: o.minMs * jobs.length, maxMs: o.maxMs * jobs.length };
  const runners = jobs.map((j) => new Runner(j));
  for (const r of runners) {
    progress.label(`${r.job.label} (warm-up)`);
    r.warmUp(o);
  }
  progress.label(jobs.map((j) => j.label).join(' | '));
  const start = performance.now();
  let rounds = 0;
  do {
    for (const r of runners) r.sample();
    rounds++;
  } while (!enough(rounds, performance.now() - start, perRound));
  for (let i = 0; i < jobs.length; i++) progress.step();
  return runners.map((r) => r.result(o));
}

/** Times one job (see {@link Job}). */
export function measure(label: string, fn: (i: number) => number | void, items: number, opts: MeasureOptions = {}): Measured {
  return measureInterleaved([{ label, fn, items }], opts)[0]!;
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
