import type { EmbeddingBackend } from '@embedstack/core';
import type { BenchArgs } from '../args.js';
import type { Fixtures } from '../fixtures.js';
import type { NativePeers } from '../native.js';
import type { SuiteResult } from '../report.js';

/** What every suite receives from the CLI. */
export interface SuiteContext {
  args: BenchArgs;
  backend: EmbeddingBackend;
  /** Threads the backend uses for large batches (its capabilities()). */
  threads: number;
  /** Hardware threads of the machine. */
  hwThreads: number;
  native: NativePeers;
  /** Tables, keys and arenas shared between suites (limit and find share the big table). */
  fixtures: Fixtures;
  /** Absolute path of the CLI script (for child processes). */
  cliPath: string;
  /** Prints a line without breaking the progress bar. */
  log(line: string): void;
}

export interface Suite {
  name: string;
  /** Measurements the suite takes (the progress bar's total; an estimate). */
  steps(ctx: SuiteContext): number;
  run(ctx: SuiteContext): Promise<SuiteResult>;
}
