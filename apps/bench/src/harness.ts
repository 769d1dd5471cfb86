/**
 * Timing, on tinybench: each sample is a tinybench task run (calls grouped until the
 * sample lasts `sampleMs`, each call timed by tinybench; warm-up calls by its
 * warm-up), and the rate statistics of a job (median, MAD, min/max, margin of error)
 * are tinybench's statistics over the samples.
 *
 * What tinybench cannot do, and so this file does: interleave. A tinybench task runs
 * all its samples before the next task starts, so a change in machine load (another
 * process, a busy second core) lands on one job and skews every ratio against it.
 * Here a thin loop takes one sample of each job per round, so load changes hit all
 * jobs alike; rounds stop by {@link enough}. The same loop runs a peer that lives in
 * a child process (its calls are awaited and timed by the child itself, see
 * childPeer.ts), which no in-process benchmark library can time.
 */
import { Bench, type Statistics, type Task } from 'tinybench';
import { progress } from './progress.js';

export interface MeasureOptions {
  /** Untimed calls first (tinybench's warm-up). Default 1. */
  warmup?: number;
  /** Default 5. */
  minSamples?: number;
  /** Default 40. */
  maxSamples?: number;
  /** Keep sampling at least this long (ms), once minSamples are in. Default 200. */
  minMs?: number;
  /** Stop after this long (ms) even before minSamples (at least one sample). Default 4000. */
  maxMs?: number;
  /**
   * Group calls so that one sample lasts at least this long (ms). Default 50: long
   * enough that each sample averages over the periodic costs of a call (the GCs its
   * result buffers trigger every few tens of ms), so the median is not a coin toss
   * between samples with and without one. (100 until stop 52, when the default run was
   * brought near the spec's 3 minutes: the same number of samples, each half as long.)
   */
  sampleMs?: number;
}

/** How far the samples of a figure spread (all in the figure's unit, e.g. keys/s). */
export interface Spread {
  /** Median absolute deviation of the sample rates (unscaled). */
  mad: number;
  /** The slowest and the fastest sample. */
  min: number;
  max: number;
  /** Relative margin of error of the mean rate, 95% (percent). */
  rme: number;
  /**
   * Samples further from the median than 3 scaled MADs (3 x 1.4826 x mad): counted,
   * not dropped (the median is already robust to them). 0 below 8 samples, where
   * the MAD is too coarse to tell.
   */
  outliers: number;
  /** Samples taken. */
  samples: number;
  /**
   * Cores this process kept busy while the samples ran: the median over samples of the
   * process's CPU time (every thread: the caller, the backend's pool, the collector)
   * divided by the sample's wall time. It tells a 2-thread op that got two cores from
   * one that ran on about one (a busy or descheduled second vCPU). Absent for calls
   * that time themselves (a peer in a child process: its CPU is not this process's).
   */
  cores?: number;
}

export interface Measured {
  /** Median of the samples' rates, items per second. */
  rate: number;
  /** Rate of each sample, items/s, in the order taken. */
  samples: number[];
  /**
   * Which {@link measureInterleaved} call took the samples (one id per call): jobs with
   * the same id were sampled in the same rounds, sample i of each in round i, so their
   * ratio can be taken round by round (report.ts, pairedRatio). Absent for samples
   * pooled from several calls.
   */
  interleaved?: number;
  /** Timed calls in all. */
  calls: number;
  spread: Spread;
}

type Resolved = Required<MeasureOptions>;

function resolve(o: MeasureOptions): Resolved {
  return { warmup: 1, minSamples: 5, maxSamples: 40, minMs: 200, maxMs: 4000, sampleMs: 50, ...o };
}

/** Whether sampling is over, given the samples so far and the time since sampling began. */
export function enough(samples: number, elapsedMs: number, o: Resolved): boolean {
  return samples >= o.maxSamples || (samples >= o.minSamples && elapsedMs >= o.minMs) || (samples >= 1 && elapsedMs >= o.maxMs);
}

/** One thing to time: `fn(i)` does call i's work on `items` items. */
export interface Job {
  label: string;
  /**
   * i counts the job's calls, so callers can rotate through batches. If it returns a
   * number, that is the call's own timed seconds (for calls with untimed setup, or
   * timed elsewhere) and every sample is one call.
   */
  fn: (i: number) => number | void | Promise<number | void>;
  items: number;
  /** Overrides MeasureOptions.warmup for this job. */
  warmup?: number;
  /** fn returns a Promise, awaited before the next call: a Promise API, or a peer in a child process. */
  async?: boolean;
}

/** A tinybench task on its own bench (bench options are per bench). */
function benchTask(name: string, fn: () => unknown, async: boolean, options: ConstructorParameters<typeof Bench>[0]): Task {
  const bench = new Bench({ warmup: false, throws: true, ...options });
  bench.add(name, fn, { async });
  return bench.getTask(name)!;
}

/** The results of a task run that must have completed (tinybench throws the job's own errors). */
function completed(t: Task): { period: number; throughput: Statistics } {
  const r = t.result;
  if (r.state !== 'completed') throw new Error(`${t.name}: expected the tinybench run to complete but its state is '${r.state}'`);
  return r;
}

/**
 * tinybench's statistics of samples taken outside one task run: the samples (ms per
 * call) are replayed to a task as overridden durations, one per iteration.
 * @returns throughput statistics in calls per second
 */
export function statisticsOf(msPerCall: readonly number[]): Statistics {
  let k = 0;
  const t = benchTask('statistics', () => ({ overriddenDuration: msPerCall[k++] }), false, { iterations: msPerCall.length, time: 0 });
  t.runSync();
  return completed(t).throughput;
}

/** The spread and median of rates computed from ms-per-call samples of `items` items per call. */
export function summarize(msPerCall: readonly number[], items: number, cores?: readonly number[]): Omit<Measured, 'calls'> {
  const s = statisticsOf(msPerCall);
  const samples = msPerCall.map((ms) => (items * 1000) / ms);
  const rate = s.p50 * items;
  const mad = s.mad * items;
  const outliers = mad > 0 && samples.length >= 8 ? samples.filter((x) => Math.abs(x - rate) > 3 * 1.4826 * mad).length : 0;
  const spread: Spread = { mad, min: s.min * items, max: s.max * items, rme: s.rme, outliers, samples: samples.length };
  if (cores && cores.length > 0) spread.cores = median(cores);
  return { rate, samples, spread };
}

/** The median (the middle two averaged for an even count). */
export function median(xs: readonly number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 === 1 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

/** A job's state while it is being sampled. */
class Runner {
  call = 0;
  calls = 0;
  selfTimed = false;
  readonly msPerCall: number[] = [];
  /** Process CPU time / wall time of each sample. */
  readonly cores: number[] = [];
  readonly #o: Resolved;
  readonly #async: boolean;

  constructor(
    readonly job: Job,
    o: Resolved,
  ) {
    this.#o = o;
    this.#async = job.async ?? false;
  }

  /** One call, with its own seconds handed to tinybench as the duration when it reports them. */
  #call = (): unknown => {
    const r = this.job.fn(this.call++);
    if (r instanceof Promise) return r.then((x) => this.#timed(x));
    return this.#timed(r);
  };

  #timed(r: number | void): { overriddenDuration: number } | undefined {
    if (typeof r !== 'number') return undefined;
    this.selfTimed = true;
    return { overriddenDuration: r * 1000 };
  }

  get #warmups(): number {
    return this.job.warmup ?? this.#o.warmup;
  }

  async warmUp(): Promise<void> {
    const t = benchTask(this.job.label, this.#call, this.#async, { warmupIterations: this.#warmups, warmupTime: 0 });
    if (this.#async) await t.warmup();
    else t.warmupSync();
  }

  /**
   * One sample: calls until it lasts sampleMs; one call for self-timed calls, and without
   * a warm-up (nothing yet tells whether calls time themselves).
   */
  sample(): Promise<void> | void {
    const single = this.selfTimed || this.#warmups === 0;
    const t = benchTask(this.job.label, this.#call, this.#async, { iterations: 1, time: single ? 0 : this.#o.sampleMs });
    const cpu0 = process.cpuUsage();
    const wall0 = performance.now();
    if (this.#async) return t.run().then(() => this.#record(t, cpu0, wall0));
    t.runSync();
    this.#record(t, cpu0, wall0);
  }

  #record(t: Task, cpu0: NodeJS.CpuUsage, wall0: number): void {
    const wallMs = performance.now() - wall0;
    const cpu = process.cpuUsage(cpu0);
    this.msPerCall.push(completed(t).period);
    this.calls += t.runs;
    if (wallMs > 0) this.cores.push((cpu.user + cpu.system) / 1000 / wallMs);
  }

  result(): Measured {
    return { ...summarize(this.msPerCall, this.job.items, this.selfTimed ? undefined : this.cores), calls: this.calls };
  }
}

/**
 * Times several jobs in alternation: after each job's warm-up, every round takes one
 * sample of each (in the given order, reversed on odd rounds), so a change in machine load
 * hits every job alike and their ratios stay meaningful. Rounds stop by {@link enough}, with minMs and maxMs counted per job.
 * Every result carries the same `interleaved` id, new for each call.
 */
let interleavedCalls = 0;

export async function measureInterleaved(jobs: readonly Job[], opts: MeasureOptions = {}): Promise<Measured[]> {
  const o = resolve(opts);
  const id = ++interleavedCalls;
  const perRound = { ...o, minMs: o.minMs * jobs.length, maxMs: o.maxMs * jobs.length };
  const runners = jobs.map((j) => new Runner(j, o));
  for (const r of runners) {
    progress.label(`${r.job.label} (warm-up)`, { transient: true });
    await r.warmUp();
  }
  progress.label(joinLabels(jobs.map((j) => j.label)));
  const start = performance.now();
  let rounds = 0;
  // Odd rounds take the jobs in reverse order (A B, B A, A B, ...): what one job leaves behind
  // for the next (a collection, a pool thread still awake, a cache) falls on each side alike.
  // Sample i of every job is still from round i.
  const reversed = [...runners].reverse();
  do {
    for (const r of rounds % 2 === 0 ? runners : reversed) await r.sample();
    rounds++;
  } while (!enough(rounds, performance.now() - start, perRound));
  for (let i = 0; i < jobs.length; i++) progress.step();
  return runners.map((r) => ({ ...r.result(), interleaved: id }));
}

/**
 * Jobs measured together in several {@link measureInterleaved} calls, pooled: `calls[c][j]` is
 * job j's result of call c (`items[j]` items per call). Job j's samples are every call's in
 * call order, and its cores the median of the calls' medians. When each call's results share
 * one interleaved id and sample count, the pooled results get one new id: sample i of each
 * is still from one round, so their ratio is taken round by round (report.ts, pairedRatio).
 */
export function poolInterleaved(calls: readonly (readonly Measured[])[], items: readonly number[]): Measured[] {
  const paired = calls.every((ms) => ms.length > 0 && ms.every((m) => m.interleaved !== undefined && m.interleaved === ms[0]!.interleaved && m.samples.length === ms[0]!.samples.length));
  const id = paired ? ++interleavedCalls : undefined;
  return items.map((n, j) => {
    const ms = calls.map((c) => c[j]!);
    const msPerCall = ms.flatMap((m) => m.samples.map((rate) => (n * 1000) / rate));
    const cores = ms.flatMap((m) => (m.spread.cores === undefined ? [] : [m.spread.cores]));
    return { ...summarize(msPerCall, n, cores), calls: ms.reduce((a, m) => a + m.calls, 0), ...(id !== undefined ? { interleaved: id } : {}) };
  });
}

/** "case: a | case: b" -> "case: a | b" (labels of one case share their prefix up to ': '). */
export function joinLabels(labels: readonly string[]): string {
  const cut = labels[0]?.lastIndexOf(': ') ?? -1;
  const prefix = cut >= 0 ? labels[0]!.slice(0, cut + 2) : '';
  if (labels.length < 2 || prefix === '' || !labels.every((l) => l.startsWith(prefix))) return labels.join(' | ');
  return prefix + labels.map((l) => l.slice(prefix.length)).join(' | ');
}

/** Times one job (see {@link Job}). */
export async function measure(label: string, fn: Job['fn'], items: number, opts: MeasureOptions & { async?: boolean } = {}): Promise<Measured> {
  const { async, ...o } = opts;
  return (await measureInterleaved([{ label, fn, items, ...(async ? { async } : {}) }], o))[0]!;
}

/** Runs the garbage collector when node runs with --expose-gc (the CLI makes sure it does). */
export function collectGarbage(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
}
