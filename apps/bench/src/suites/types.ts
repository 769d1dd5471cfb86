/**
 * The contract between the CLI and a suite. A suite is one file under src/suites/
 * exporting a {@link Suite}, listed once in SUITES (suites/index.ts); the CLI adds its
 * options to --help, runs it with a {@link SuiteContext}, draws its progress and prints
 * (or writes as JSON, or plots) the {@link SuiteResult} it returns.
 */
import type { EmbeddingBackend } from '@embedstack/core';
import type { Fixtures } from '../fixtures.js';
import type { NativePeers } from '../native.js';
import type { SuiteResult } from '../report.js';

/** The options every run has (the suite-independent part of the command line). */
export interface BenchArgs {
  /** Suites to run, in SUITES order, without duplicates. */
  suites: string[];
  /** The large sizes. Default false. */
  full: boolean;
  /** One JSON object per suite on stdout instead of tables. Default false. */
  json: boolean;
  /** Directory for the charts (.svg and .vl.json), or null. Default null. */
  plot: string | null;
  /** Backend to measure, by registry name. Default: the registry's default (EMBEDSTACK_BACKEND, else 'cpu'). */
  backend: string;
  /** Values of the suites' own options, by commander attribute name (`--bag-batch` -> `bagBatch`), defaults applied. */
  suiteOptions: Readonly<Record<string, unknown>>;
}

/** An option a suite adds to the command line (listed in --help under the suite's name). */
export interface SuiteOption {
  /** commander flags: `--bag-batch <n>` (a value), `--bag-weights` (a switch). Prefix them with the suite's name. */
  flags: string;
  description: string;
  /** Value when the option is not given (shown in --help). */
  default: string | number | boolean;
  /** Parses and checks a given value; throw commander's InvalidArgumentError (see options.ts: positiveInt, oneOf). */
  parse?: (value: string) => unknown;
}

/** What every suite receives from the CLI. */
export interface SuiteContext {
  args: BenchArgs;
  backend: EmbeddingBackend;
  /** How the run names the backend: its name, and the device when that tells more ('cuda-host' is the CUDA host mode, on CPU threads). */
  backendLabel: string;
  /** Threads the backend uses for large batches (its capabilities()). */
  threads: number;
  /** Hardware threads of the machine. */
  hwThreads: number;
  native: NativePeers;
  /** Tables, keys and arenas shared between suites (limit hands find its 4M-key table and arena: Suite.fixturesFor). */
  fixtures: Fixtures;
  /** Absolute path of the CLI script (for child processes of the bench itself). */
  cliPath: string;
  /** Prints a line without breaking the progress bars (stderr). */
  log(line: string): void;
}

export interface Suite {
  name: string;
  /** One line for --help: what is measured, against what. */
  description: string;
  /** Options of this suite only. */
  options?: readonly SuiteOption[];
  /** Measurements the suite takes (the progress bars' total; an estimate). */
  steps(ctx: SuiteContext): number;
  /**
   * Suites that reuse this suite's fixtures (tables, keys, arenas of `ctx.fixtures`): when one of
   * them runs right after this one, the CLI hands them over instead of releasing them. Default none.
   */
  fixturesFor?: readonly string[];
  run(ctx: SuiteContext): Promise<SuiteResult>;
}
