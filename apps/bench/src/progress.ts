/**
 * Progress on stderr, in one of three modes:
 *  - 'bars' (stderr is a terminal, not CI): two cli-progress bars, all suites' steps and
 *    the running suite's steps, each with its ETA, and the measurement under way;
 *  - 'lines' (pipes, CI logs): one plain line per measurement started;
 *  - 'off' (--json, tests): nothing.
 * Lines logged through {@link Progress.log} are printed in every mode (above the bars).
 * The bars live while a suite runs and are cleared before its report is printed, so
 * stdout and stderr can share one terminal.
 */
import { MultiBar, type SingleBar } from 'cli-progress';

export type ProgressMode = 'bars' | 'lines' | 'off';

/** The mode for a run: nothing with --json, bars on a terminal outside CI, else lines. */
export function progressMode(json: boolean, stream: { isTTY?: boolean } = process.stderr, env: NodeJS.ProcessEnv = process.env): ProgressMode {
  if (json) return 'off';
  return stream.isTTY && !env.CI ? 'bars' : 'lines';
}

/** ETA as "45s" / "3m05s"; "…" until there is a rate to tell from. */
export function formatEta(t: number | string): string {
  if (typeof t !== 'number' || !Number.isFinite(t) || t <= 0) return '…';
  const s = Math.round(t);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

export interface LabelOptions {
  /** Shown on the bars only, not printed as a line (warm-ups: short and many). */
  transient?: boolean;
}

export class Progress {
  #mode: ProgressMode = 'off';
  #out: NodeJS.WritableStream = process.stderr;
  #multi: MultiBar | null = null;
  #all: SingleBar | null = null;
  #suiteBar: SingleBar | null = null;
  #allTotal = 0;
  #allDone = 0;
  #suites = 0;
  #suiteIndex = 0;
  #suite = '';
  #total = 1;
  #done = 0;
  #label = '';

  get mode(): ProgressMode {
    return this.#mode;
  }

  /** Sets the mode and the stream (stderr unless told). */
  configure(mode: ProgressMode, out: NodeJS.WritableStream = process.stderr): void {
    this.stopBars();
    this.#mode = mode;
    this.#out = out;
  }

  /** Announces the run: how many steps each suite is expected to take. */
  startRun(steps: readonly number[]): void {
    this.#allTotal = Math.max(1, steps.reduce((a, b) => a + b, 0));
    this.#allDone = 0;
    this.#suites = steps.length;
    this.#suiteIndex = 0;
  }

  startSuite(name: string, steps: number): void {
    this.#suite = name;
    this.#total = Math.max(1, steps);
    this.#done = 0;
    this.#label = '';
    this.#suiteIndex++;
    if (this.#mode === 'lines') this.#write(`[${name}] suite ${this.#suiteIndex}/${Math.max(this.#suites, this.#suiteIndex)}, ${this.#total} measurements\n`);
    if (this.#mode !== 'bars') return;
    this.#multi = new MultiBar({
      stream: this.#out,
      format: '{name} [{bar}] {value}/{total} | ETA {eta_formatted} | {label}',
      barsize: 24,
      barCompleteChar: '\u2588',
      barIncompleteChar: '\u2591',
      hideCursor: true,
      clearOnComplete: true,
      etaBuffer: 20,
      fps: 10,
      formatTime: formatEta,
    });
    const allName = `suite ${this.#suiteIndex}/${Math.max(this.#suites, this.#suiteIndex)}`;
    const width = Math.max(allName.length, name.length);
    this.#all = this.#multi.create(this.#allTotal, this.#allDone, { name: allName.padEnd(width), label: `all suites (${name} running)` });
    this.#suiteBar = this.#multi.create(this.#total, 0, { name: name.padEnd(width), label: '' });
    this.#redraw();
  }

  /** Announces the work now starting (does not advance the bars). */
  label(text: string, o: LabelOptions = {}): void {
    this.#label = text;
    if (this.#mode === 'lines' && !o.transient) this.#write(`[${this.#suite} ${this.#done}/${this.#total}] ${text}\n`);
    this.#suiteBar?.update({ label: text });
    this.#redraw();
  }

  /** Marks one unit of work done. */
  step(): void {
    this.#done = Math.min(this.#total, this.#done + 1);
    this.#allDone = Math.min(this.#allTotal, this.#allDone + 1);
    this.#suiteBar?.update(this.#done);
    this.#all?.update(this.#allDone);
    this.#redraw();
  }

  /** Grows the suite's total when it discovers more work. */
  addTotal(n: number): void {
    this.#total += n;
    this.#allTotal += n;
    this.#suiteBar?.setTotal(this.#total);
    this.#all?.setTotal(this.#allTotal);
    this.#redraw();
  }

  /** Ends the suite: the steps it did not take count as done; the bars are cleared. */
  endSuite(): void {
    this.#allDone += this.#total - this.#done;
    this.stopBars();
  }

  /** Prints a line (above the bars when they are drawn). */
  log(line: string): void {
    if (this.#multi) {
      this.#multi.log(line + '\n');
      this.#redraw();
    } else this.#write(line + '\n');
  }

  /** Clears the bars (idempotent; also on errors). */
  stopBars(): void {
    this.#multi?.stop();
    this.#multi = null;
    this.#all = null;
    this.#suiteBar = null;
  }

  /** The measurement under way (for tests). */
  get current(): { suite: string; done: number; total: number; label: string } {
    return { suite: this.#suite, done: this.#done, total: this.#total, label: this.#label };
  }

  /**
   * Redraws now: the bars' own timer cannot fire while a measurement holds the event
   * loop, and progress events are few (a handful per measurement), so each redraws.
   */
  #redraw(): void {
    this.#multi?.update();
  }

  #write(s: string): void {
    this.#out.write(s);
  }
}

/** The process-wide progress the harness reports to ('off' until the CLI configures it). */
export const progress = new Progress();
