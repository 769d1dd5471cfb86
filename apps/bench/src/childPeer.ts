/**
 * A peer that runs in a child process (PyTorch in `/usr/bin/python3`, another runtime),
 * sampled in the same interleaved rounds as the in-process jobs (harness.ts). Neither
 * tinybench nor mitata can time work in another process, so this is hand-written: a
 * line protocol over the child's stdin/stdout, and the child times its own calls.
 *
 * Protocol (one line each, UTF-8):
 *  - the child sets up (untimed: build tables, warm caches), then prints `ready`;
 *    lines printed before `ready` are passed to the log;
 *  - per call, the parent writes `call <i>`; the child runs call i (i counts from 0,
 *    so it can rotate batches like the in-process jobs), times just that work with its
 *    own clock, and answers `<seconds>` (a decimal number); or `error <message>`;
 *  - the parent closes stdin when done; the child exits.
 * The seconds are the call's own, so the IPC round trip is not in the figure.
 *
 * In Python, the whole child side is:
 *
 *     import sys, time
 *     # ... setup ...
 *     print('ready', flush=True)
 *     for line in sys.stdin:
 *         i = int(line.split()[1])
 *         t0 = time.perf_counter(); work(i); t1 = time.perf_counter()
 *         print(t1 - t0, flush=True)
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import type { Job } from './harness.js';

export interface ChildPeerOptions {
  /** Extra environment for the child (merged over process.env). */
  env?: Record<string, string>;
  cwd?: string;
  /** How long setup may take before `ready` (ms). Default 120000. */
  readyTimeoutMs?: number;
  /** Where lines printed before `ready`, and stderr lines, go. Default: dropped. */
  log?: (line: string) => void;
  /**
   * After each call's answer, wait this long (ms) before the next job runs. For a child
   * whose threads stay busy after its answer (OpenMP's workers spin for a while before they
   * sleep: PyTorch's kept one core busy for 5-12 ms after each bag call on the bench VM),
   * so that work is not charged to the job sampled next. Not in the peer's figure (the
   * child times its own calls). Default 0.
   */
  quietMs?: number;
}

export class ChildPeer {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #lines: Interface;
  readonly #queued: string[] = [];
  #waiting: ((line: string) => void) | null = null;
  #exited: string | null = null;
  /** Settles when the child process has gone (closed, or never started). */
  #gone: Promise<void>;
  #quietMs = 0;
  #stderr: string[] = [];

  private constructor(child: ChildProcessWithoutNullStreams, log: (line: string) => void) {
    this.#child = child;
    this.#lines = createInterface({ input: child.stdout });
    // readline may emit several lines in one tick: queue them for #next.
    this.#lines.on('line', (line) => {
      const w = this.#waiting;
      if (w) {
        this.#waiting = null;
        this.#reject = null;
        w(line);
      } else this.#queued.push(line);
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      this.#stderr = [...this.#stderr.slice(-19), line];
      log(line);
    });
    this.#gone = new Promise((resolve) => {
      child.once('close', () => resolve());
      child.once('error', () => resolve());
    });
    child.on('error', (e) => this.#fail(`could not start: ${e.message}`));
    // 'close' comes after the child's stdio closed, so its last stderr lines are in.
    child.on('close', (code, signal) => this.#fail(`exited (${signal ?? `code ${code}`})`));
  }

  /**
   * Starts `command args` and waits for its `ready` line.
   * @throws Error when the child cannot start, exits or fails to say `ready` in time (with its last stderr lines)
   */
  static async start(command: string, args: readonly string[], o: ChildPeerOptions = {}): Promise<ChildPeer> {
    const child = spawn(command, args, { cwd: o.cwd, env: { ...process.env, ...o.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const peer = new ChildPeer(child, o.log ?? (() => {}));
    peer.#quietMs = o.quietMs ?? 0;
    const timeout = o.readyTimeoutMs ?? 120_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        (async () => {
          for (;;) {
            const line = await peer.#next();
            if (line.trim() === 'ready') return;
            o.log?.(line);
          }
        })(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`${command}: expected "ready" within ${timeout} ms but received nothing`)), timeout);
        }),
      ]);
    } catch (e) {
      peer.close();
      throw e;
    } finally {
      clearTimeout(timer);
    }
    return peer;
  }

  /** Runs call i in the child; resolves to the seconds the child timed. */
  async call(i: number): Promise<number> {
    this.#child.stdin.write(`call ${i}\n`);
    const line = (await this.#next()).trim();
    if (line.startsWith('error')) throw new Error(`child peer call ${i} failed: ${line.slice(5).trim()}`);
    const seconds = Number(line);
    if (!Number.isFinite(seconds) || seconds < 0) throw new Error(`child peer call ${i}: expected the call's seconds but received "${line}"`);
    if (this.#quietMs > 0) await new Promise((r) => setTimeout(r, this.#quietMs));
    return seconds;
  }

  /** A harness job for this peer: `items` per call, awaited, timed by the child. */
  job(label: string, items: number, warmup?: number): Job {
    return { label, items, async: true, fn: (i) => this.call(i), ...(warmup !== undefined ? { warmup } : {}) };
  }

  /**
   * Closes the child (see close) and resolves once its process has exited: a suite awaits it before
   * timing anything else, so the child's teardown (freeing its tables, its threads) is not in a sample.
   */
  stop(): Promise<void> {
    this.close();
    return this.#gone;
  }

  /** Closes the child's stdin (it should exit) and kills it if it has not exited. */
  close(): void {
    this.#child.stdin.end();
    this.#lines.close();
    if (this.#exited === null) setTimeout(() => this.#exited === null && this.#child.kill(), 2000).unref();
  }

  #reject: ((e: Error) => void) | null = null;

  #next(): Promise<string> {
    const queued = this.#queued.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#exited !== null) return Promise.reject(new Error(this.#why()));
    return new Promise((resolve, reject) => {
      this.#waiting = resolve;
      this.#reject = reject;
    });
  }

  #fail(why: string): void {
    this.#exited ??= why;
    const reject = this.#reject;
    this.#waiting = null;
    this.#reject = null;
    reject?.(new Error(this.#why()));
  }

  #why(): string {
    const tail = this.#stderr.length > 0 ? `; its stderr ended with:\n${this.#stderr.join('\n')}` : '';
    return `child peer ${this.#exited}${tail}`;
  }
}
