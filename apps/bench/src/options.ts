/**
 * The command line of embedstack-bench, on commander: the run's options, each suite's
 * own options (grouped under the suite in --help), generated --help with every
 * default, and commander's errors for unknown or malformed options.
 */
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { BenchArgs, Suite } from './suites/types.js';

/** A suite of the spec that is not built yet: listed in --help; asking for it says so. */
export interface PlannedSuite {
  name: string;
  description: string;
}

export interface ProgramSpec {
  suites: readonly Suite[];
  planned: readonly PlannedSuite[];
  /** The backend the registry picks when none is named (see defaultBackendName). */
  defaultBackend: string;
}

/** The registry's default when no backend is named: EMBEDSTACK_BACKEND, else the cpu backend (core's loadDefaultBackend). */
export function defaultBackendName(env: NodeJS.ProcessEnv = process.env): string {
  return env.EMBEDSTACK_BACKEND || 'cpu';
}

/** Parser of a positive integer option value (for suites' options). */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`Expected a positive integer but received "${value}".`);
  return n;
}

/** Parser of a finite number > 0 (learning rates and the like). */
export function positiveNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`Expected a number > 0 but received "${value}".`);
  return n;
}

/** Parser of a fraction in (0, 1]. */
export function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n > 0 && n <= 1)) throw new InvalidArgumentError(`Expected a number in (0, 1] but received "${value}".`);
  return n;
}

/** Parser of a value from a fixed list (for suites' options). */
export function oneOf(choices: readonly string[]): (value: string) => string {
  return (value) => {
    if (!choices.includes(value)) throw new InvalidArgumentError(`Expected one of ${choices.join(', ')} but received "${value}".`);
    return value;
  };
}

function nonEmpty(what: string): (value: string) => string {
  return (value) => {
    if (value.trim() === '') throw new InvalidArgumentError(`Expected ${what} but received "".`);
    return value;
  };
}

/** Levenshtein distance of two short strings. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length]!;
}

/** The one name within 2 edits of `name` (a typo's likely meaning), else null. */
export function closest(name: string, names: readonly string[]): string | null {
  const near = names.filter((n) => distance(name, n) <= Math.min(2, Math.floor(n.length / 2)));
  return near.length === 1 ? near[0]! : null;
}

/** --suite: repeatable, comma lists; each name checked against the runnable and the planned suites. */
function suiteParser(spec: ProgramSpec): (value: string, previous: string[]) => string[] {
  const names = spec.suites.map((s) => s.name);
  const planned = new Set(spec.planned.map((s) => s.name));
  return (value, previous) => {
    const out = [...previous];
    // An empty value would leave the list empty, which means "every suite": refuse it rather than start a full run.
    if (value.split(',').every((raw) => raw.trim() === '')) {
      throw new InvalidArgumentError(`Expected a suite name or a comma list of names (${names.join(', ')}) but received "${value}".`);
    }
    for (const raw of value.split(',')) {
      const name = raw.trim();
      if (name === '') continue;
      if (planned.has(name)) throw new InvalidArgumentError(`Expected an available suite but received "${name}" (not yet available).`);
      if (!names.includes(name)) {
        const near = closest(name.toLowerCase(), names);
        throw new InvalidArgumentError(`Expected one of ${names.join(', ')} but received "${name}".${near ? ` Did you mean "${near}"?` : ''}`);
      }
      out.push(name);
    }
    return out;
  };
}

function suitesHelp(spec: ProgramSpec): string {
  const width = Math.max(...[...spec.suites, ...spec.planned].map((s) => s.name.length));
  return [
    '',
    'Suites (all available ones run unless --suite is given):',
    ...spec.suites.map((s) => `  ${s.name.padEnd(width)}  ${s.description}`),
    ...spec.planned.map((s) => `  ${s.name.padEnd(width)}  ${s.description} (not yet available)`),
    '',
    'The demo (train, checkpoint, export, serve) is its own command: embedstack-demo [options], or',
    'embedstack-bench demo [options] (pnpm demo from the repository); --help lists its options.',
    '',
    'Figures are medians of samples taken after a warm-up, with their spread (MAD); ours and the',
    'peers are sampled in alternation, and ratios compare figures of the same run.',
  ].join('\n');
}

/** The commander program (not yet parsed). */
export function benchProgram(spec: ProgramSpec): Command {
  const program = new Command('embedstack-bench')
    .description('embedstack measured against what you would use instead, in one run')
    .usage('[options]')
    .showHelpAfterError('(run with --help for the options)')
    .addOption(
      new Option('-s, --suite <names>', 'run only these suites: a name or a comma list; repeatable')
        .default([], 'every available suite')
        .argParser(suiteParser(spec)),
    )
    .addOption(new Option('--full', 'the large sizes (find 1M-16M keys at dims 8, 64 and 128, scale up to 64M, memory 10M JS Map) and the bag size sweep; slow').default(false))
    .addOption(new Option('--json', 'machine output: one JSON object per suite per line on stdout, no tables, no progress').default(false))
    .addOption(
      new Option('--plot <dir>', 'write each chart as <name>.svg (rendered by Vega) and <name>.vl.json (its Vega-Lite spec) to dir')
        .default(null, 'none')
        .argParser(nonEmpty('a directory')),
    )
    .addOption(
      new Option('--backend <name>', "backend to measure: cpu, reference (the TypeScript oracle), cuda (the GPU), cuda-host (CUDA's kernels on CPU threads), or another registered name")
        .default(spec.defaultBackend, `${spec.defaultBackend}, the registry's default: EMBEDSTACK_BACKEND if set, else cpu`)
        .argParser(nonEmpty('a backend name')),
    );
  for (const s of spec.suites) {
    for (const o of s.options ?? []) {
      const opt = new Option(o.flags, o.description).default(o.default).helpGroup(`Options of the ${s.name} suite:`);
      if (o.parse) opt.argParser(o.parse);
      program.addOption(opt);
    }
  }
  return program.addHelpText('after', suitesHelp(spec));
}

const RUN_OPTIONS = new Set(['suite', 'full', 'json', 'plot', 'backend']);

/**
 * Parses argv (without node and the script) with a program from {@link benchProgram}.
 * commander prints errors and --help and exits, unless the program has exitOverride()
 * (then it throws a CommanderError).
 */
export function parseBenchArgs(program: Command, spec: ProgramSpec, argv: readonly string[]): BenchArgs {
  program.parse(argv as string[], { from: 'user' });
  const o = program.opts<{ suite: string[]; full: boolean; json: boolean; plot: string | null; backend: string }>();
  const chosen = o.suite.length === 0 ? spec.suites.map((s) => s.name) : o.suite;
  const suiteOptions = Object.fromEntries(Object.entries(o).filter(([k]) => !RUN_OPTIONS.has(k)));
  return {
    suites: spec.suites.map((s) => s.name).filter((n) => chosen.includes(n)),
    full: o.full,
    json: o.json,
    plot: o.plot,
    backend: o.backend,
    suiteOptions,
  };
}

/**
 * The suite options given on the command line for suites this run leaves out (they have no effect):
 * their long flags, as `--sok-bags (sok suite)`.
 */
export function ignoredSuiteOptions(program: Command, spec: ProgramSpec, args: BenchArgs): string[] {
  const out: string[] = [];
  for (const s of spec.suites) {
    if (args.suites.includes(s.name)) continue;
    for (const o of s.options ?? []) {
      const opt = new Option(o.flags, o.description);
      if (program.getOptionValueSource(opt.attributeName()) === 'cli') out.push(`${opt.long ?? o.flags} (${s.name} suite)`);
    }
  }
  return out;
}

/**
 * mkdir -p, one level at a time from the nearest existing ancestor. Node 20's
 * `mkdirSync(dir, { recursive: true })` never returns for a path under a folder that refuses
 * new entries with ENOENT (e.g. `/proc/x`); a plain mkdir throws there.
 */
function makeFolders(dir: string): void {
  const missing: string[] = [];
  for (let d = resolve(dir); statSync(d, { throwIfNoEntry: false }) === undefined; d = dirname(d)) {
    missing.push(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing.reverse()) mkdirSync(d);
}

/**
 * Makes folder `dir` (and its parents) and checks that it is a writable folder; `existing` may refuse a
 * folder that is already there. `what` ends the message ("a folder the charts can be written to").
 * @returns what is wrong, or null
 */
export function prepareFolder(dir: string, what: string, existing?: (dir: string) => string | null): string | null {
  try {
    const st = statSync(dir, { throwIfNoEntry: false });
    if (st?.isDirectory() === false) return `Expected a folder but received "${dir}", which is a file.`;
    const refused = st && existing ? existing(dir) : null;
    if (refused !== null) return refused;
    makeFolders(dir);
    accessSync(dir, constants.W_OK);
    return null;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === 'ENOTDIR' || err.code === 'EEXIST' ? 'a file is in the way' 
        : err.code === 'EACCES' || err.code === 'EPERM' || err.code === 'EROFS' ? 'not writable'
          : err.code === 'ENOENT' ? 'it cannot be made there' : (err.code ?? err.message);
    return `Expected ${what} but received "${dir}" (${why}).`;
  }
}

/**
 * Makes the --plot folder (and its parents) and checks that it is a writable folder, before
 * anything is measured; returns what is wrong, or null when charts can be written there.
 */
export function preparePlotDir(dir: string): string | null {
  return prepareFolder(dir, 'a folder the charts can be written to');
}
