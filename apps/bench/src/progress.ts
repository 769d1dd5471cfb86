/**
 * A hand-written progress bar on stderr, drawn only when stderr is a TTY (never
 * in pipes, CI logs or --json runs). One bar per suite: `start`, `step`, `done`.
 */

export class Progress {
  #enabled: boolean;
  #suite = '';
  #total = 1;
  #done = 0;
  #label = '';
  #width = 24;

  constructor(enabled = Boolean(process.stderr.isTTY)) {
    this.#enabled = enabled;
  }

  start(suite: string, total: number): void {
    this.#suite = suite;
    this.#total = Math.max(1, total);
    this.#done = 0;
    this.#label = '';
    this.#draw();
  }

  /** Announces the work now starting (does not advance the bar). */
  label(text: string): void {
    this.#label = text;
    this.#draw();
  }

  /** Marks one unit of work done. */
  step(): void {
    this.#done = Math.min(this.#total, this.#done + 1);
    this.#draw();
  }

  /** Grows the total when a suite discovers more work. */
  addTotal(n: number): void {
    this.#total += n;
    this.#draw();
  }

  done(): void {
    if (this.#enabled) process.stderr.write('\r\x1b[K');
  }

  /** Prints a line above the bar. */
  log(line: string): void {
    if (this.#enabled) process.stderr.write('\r\x1b[K');
    process.stderr.write(line + '\n');
    this.#draw();
  }

  #draw(): void {
    if (!this.#enabled) return;
    const filled = Math.round((this.#done / this.#total) * this.#width);
    const bar = '█'.repeat(filled) + '░'.repeat(this.#width - filled);
    const cols = process.stderr.columns ?? 100;
    const text = `${this.#suite} [${bar}] ${this.#done}/${this.#total} ${this.#label}`;
    process.stderr.write('\r\x1b[K' + text.slice(0, Math.max(10, cols - 1)));
  }
}

/** The process-wide bar the harness reports to. */
export const progress = new Progress();
