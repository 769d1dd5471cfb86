import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  benchProgram,
  closest,
  defaultBackendName,
  fraction,
  ignoredSuiteOptions,
  oneOf,
  parseBenchArgs,
  positiveInt,
  positiveNumber,
  preparePlotDir,
  type ProgramSpec,
} from './options.js';
import { handsFixtures, SUITES } from './suites/index.js';
import type { Suite } from './suites/types.js';

const AVAILABLE = ['limit', 'find', 'insert', 'bag', 'train', 'levels', 'facades', 'sok', 'memory', 'scale', 'cuda', 'hps', 'redis'];

const extra: Suite = {
  name: 'extra',
  description: 'a suite with options of its own',
  options: [
    { flags: '--extra-batch <n>', description: 'keys per call', default: 4096, parse: positiveInt },
    { flags: '--extra-mode <mode>', description: 'how', default: 'fast', parse: oneOf(['fast', 'slow']) },
    { flags: '--extra-weights', description: 'weighted bags', default: false },
  ],
  steps: () => 1,
  run: () => Promise.reject(new Error('not run here')),
};

/** Planned suites of the test's own (the real list shrinks as suites land). */
const PLANNED = [
  { name: 'later', description: 'LATER a suite the spec plans' },
  { name: 'someday', description: 'SOMEDAY another planned suite' },
];
const spec: ProgramSpec = { suites: [...SUITES, extra], planned: PLANNED, defaultBackend: 'cpu' };

/** Parses like the CLI, but errors throw (CommanderError) and output is captured. */
function parse(argv: string[]): { args: ReturnType<typeof parseBenchArgs>; out: string } {
  let out = '';
  const program = benchProgram(spec)
    .exitOverride()
    .configureOutput({ writeOut: (s) => void (out += s), writeErr: (s) => void (out += s) });
  return { args: parseBenchArgs(program, spec, argv), out };
}

function errorOf(argv: string[]): CommanderError {
  try {
    parse(argv);
  } catch (e) {
    if (e instanceof CommanderError) return e;
    throw e;
  }
  throw new Error(`expected ${argv.join(' ')} to be rejected`);
}

describe('parseBenchArgs', () => {
  it('defaults to every suite, the registry default backend, no json, no plot, suite option defaults', () => {
    expect(parse([]).args).toEqual({
      suites: [...AVAILABLE, 'extra'],
      full: false,
      json: false,
      plot: null,
      backend: 'cpu',
      suiteOptions: { facadesQuick: false, facadesTiny: false, extraBatch: 4096, extraMode: 'fast', extraWeights: false, sokBags: 512, sokRows: 1048576, sokTiny: false },
    });
  });

  it('takes repeated and comma-separated suites, in run order, once each', () => {
    expect(parse(['--suite', 'bag,find', '--suite', 'limit', '-s', 'find']).args.suites).toEqual(['limit', 'find', 'bag']);
    expect(parse(['--suite=scale']).args.suites).toEqual(['scale']);
  });

  it('reads flags, values in both spellings, and typed suite options', () => {
    const { args } = parse(['--full', '--json', '--plot', 'out/charts', '--backend=reference', '--extra-batch', '128', '--extra-weights']);
    expect(args).toMatchObject({ full: true, json: true, plot: 'out/charts', backend: 'reference' });
    expect(args.suiteOptions).toEqual({ facadesQuick: false, facadesTiny: false, extraBatch: 128, extraMode: 'fast', extraWeights: true, sokBags: 512, sokRows: 1048576, sokTiny: false });
  });

  it('rejects an unknown suite, naming it and the known ones', () => {
    const e = errorOf(['--suite', 'finds']);
    expect(e.code).toBe('commander.invalidArgument');
    expect(e.message).toBe(
      `error: option '-s, --suite <names>' argument 'finds' is invalid. Expected one of ${[...AVAILABLE, 'extra'].join(', ')} but received "finds". Did you mean "find"?`,
    );
  });

  it('suggests the suite a typo likely meant, when exactly one is near', () => {
    expect(errorOf(['--suite', 'fnd']).message).toMatch(/but received "fnd"\. Did you mean "find"\?$/);
    expect(errorOf(['--suite', 'FIND']).message).toMatch(/Did you mean "find"\?$/);
    expect(errorOf(['--suite', 'memroy']).message).toMatch(/Did you mean "memory"\?$/);
    expect(errorOf(['--suite', 'xyzzy']).message).toMatch(/but received "xyzzy"\.$/);
    expect(closest('sok', ['sok', 'bag'])).toBe('sok');
    expect(closest('ba', ['bag', 'sok'])).toBe('bag');
    expect(closest('bog', ['bag', 'big'])).toBeNull(); // two as near: no guess
  });

  it('rejects an empty --suite (which would otherwise mean every suite)', () => {
    for (const value of ['', ',', ' , ']) {
      const e = errorOf(['--suite', value]);
      expect(e.code).toBe('commander.invalidArgument');
      expect(e.message).toContain(`Expected a suite name or a comma list of names (${[...AVAILABLE, 'extra'].join(', ')}) but received "${value}".`);
    }
    expect(errorOf(['--suite=']).code).toBe('commander.invalidArgument');
    expect(parse(['--suite', 'find,']).args.suites).toEqual(['find']); // a trailing comma is harmless
  });

  it('rejects suites that are listed but not yet available', () => {
    expect(errorOf(['--suite', 'later']).message).toContain('Expected an available suite but received "later" (not yet available).');
    expect(errorOf(['--suite', 'find,someday']).message).toContain('"someday"');
  });

  it('rejects unknown options, missing values, empty values and malformed suite options', () => {
    expect(errorOf(['--fast'])).toMatchObject({ code: 'commander.unknownOption', message: "error: unknown option '--fast'" });
    expect(errorOf(['--jsn']).message).toBe("error: unknown option '--jsn'\n(Did you mean --json?)");
    expect(errorOf(['--plot'])).toMatchObject({ code: 'commander.optionMissingArgument', message: "error: option '--plot <dir>' argument missing" });
    expect(errorOf(['--backend='])).toMatchObject({ code: 'commander.invalidArgument' });
    expect(errorOf(['--extra-batch', '0']).message).toBe(`error: option '--extra-batch <n>' argument '0' is invalid. Expected a positive integer but received "0".`);
    expect(errorOf(['--extra-batch', '1.5']).message).toContain('Expected a positive integer but received "1.5".');
    expect(errorOf(['--extra-mode', 'medium']).message).toContain('Expected one of fast, slow but received "medium".');
    expect(errorOf(['stray']).code).toBe('commander.excessArguments');
  });
});

describe('ignoredSuiteOptions', () => {
  const ignored = (argv: string[]): string[] => {
    const program = benchProgram(spec).exitOverride();
    return ignoredSuiteOptions(program, spec, parseBenchArgs(program, spec, argv));
  };
  it('lists the suite options given for suites the run leaves out, and only those', () => {
    expect(ignored(['--suite', 'find', '--extra-batch', '64', '--sok-bags', '8'])).toEqual(['--sok-bags (sok suite)', '--extra-batch (extra suite)']);
    expect(ignored(['--suite', 'extra', '--extra-batch', '64', '--extra-weights'])).toEqual([]);
    expect(ignored(['--extra-batch', '64'])).toEqual([]); // every suite runs
    expect(ignored(['--suite', 'find'])).toEqual([]); // defaults are not "given"
  });
});

describe('value parsers', () => {
  it('positiveNumber takes finite numbers > 0 and names what it got otherwise', () => {
    expect(positiveNumber('0.05')).toBe(0.05);
    expect(positiveNumber('2e-3')).toBe(0.002);
    for (const v of ['0', '-1', 'abc', '', 'Infinity', 'NaN']) expect(() => positiveNumber(v)).toThrow(`Expected a number > 0 but received "${v}".`);
  });
  it('fraction takes (0, 1]', () => {
    expect(fraction('1')).toBe(1);
    expect(fraction('0.2')).toBe(0.2);
    for (const v of ['0', '2', '-0.5', 'x', '']) expect(() => fraction(v)).toThrow(`Expected a number in (0, 1] but received "${v}".`);
  });
});

describe('preparePlotDir', () => {
  it('makes the folder with its parents, and refuses a file in the way', () => {
    const root = mkdtempSync(join(tmpdir(), 'bench-plot-'));
    try {
      expect(preparePlotDir(join(root, 'a', 'b'))).toBeNull();
      expect(preparePlotDir(join(root, 'a', 'b'))).toBeNull(); // existing: fine
      const file = join(root, 'file');
      writeFileSync(file, 'x');
      expect(preparePlotDir(file)).toBe(`Expected a folder but received "${file}", which is a file.`);
      expect(preparePlotDir(join(file, 'sub'))).toBe(`Expected a folder the charts can be written to but received "${join(file, 'sub')}" (a file is in the way).`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('--help', () => {
  const help = (() => {
    let out = '';
    const program = benchProgram(spec)
      .exitOverride()
      .configureOutput({ writeOut: (s) => void (out += s) });
    expect(() => program.parse(['--help'], { from: 'user' })).toThrow(expect.objectContaining({ code: 'commander.helpDisplayed' }));
    return out.replace(/\s+/g, ' ');
  })();

  it('lists every option with its default', () => {
    const defaults: [string, string][] = [
      ['-s, --suite <names>', 'every available suite'],
      ['--full', 'false'],
      ['--json', 'false'],
      ['--plot <dir>', 'none'],
      ['--backend <name>', "cpu, the registry's default"],
      ['--extra-batch <n>', '4096'],
      ['--extra-mode <mode>', '"fast"'],
      ['--extra-weights', 'false'],
    ];
    const escape = (x: string): string => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const [flag, def] of defaults) {
      expect(help).toMatch(new RegExp(`${escape(flag)} .*?\\(default: ${escape(def)}`));
    }
    expect(help).toContain('Options of the extra suite:');
  });

  it('lists every suite and marks the planned ones', () => {
    for (const s of [...SUITES, extra]) expect(help).toContain(` ${s.name} ${s.description}`);
    expect(help).toMatch(/ later +LATER .*?\(not yet available\)/);
    expect(help).toMatch(/ someday +SOMEDAY .*?\(not yet available\)/);
    expect(help).not.toMatch(/ find dynamic[^(]*\(not yet available\)/);
  });

  it('says where the demo is', () => {
    expect(help).toContain('embedstack-bench demo [options]');
  });
});

describe('defaultBackendName', () => {
  it('is EMBEDSTACK_BACKEND when set, else cpu', () => {
    expect(defaultBackendName({})).toBe('cpu');
    expect(defaultBackendName({ EMBEDSTACK_BACKEND: 'reference' })).toBe('reference');
    expect(defaultBackendName({ EMBEDSTACK_BACKEND: '' })).toBe('cpu');
  });
});

describe('the suite registry', () => {
  it('has unique names, a description each, and no planned suite that also runs', () => {
    const names = [...SUITES, ...PLANNED].map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    expect(SUITES.map((s) => s.name)).toEqual(AVAILABLE);
    for (const s of SUITES) expect(s.description.length).toBeGreaterThan(10);
  });
});

describe('fixtures handed from one suite to the next (Suite.fixturesFor)', () => {
  const byName = (n: string): Suite => SUITES.find((s) => s.name === n)!;
  it('limit hands find its table and arena when find runs right after it, and nobody else', () => {
    expect(handsFixtures(byName('limit'), byName('find'))).toBe(true);
    expect(handsFixtures(byName('limit'), byName('insert'))).toBe(false); // --suite limit,insert
    expect(handsFixtures(byName('limit'), undefined)).toBe(false); // limit last: released
    expect(handsFixtures(byName('find'), byName('insert'))).toBe(false);
    expect(handsFixtures(extra, byName('find'))).toBe(false); // no fixturesFor
  });
  it('names only suites that run after the one handing them over', () => {
    for (const [i, s] of SUITES.entries()) {
      for (const n of s.fixturesFor ?? []) expect(SUITES.findIndex((t) => t.name === n), `${s.name} -> ${n}`).toBeGreaterThan(i);
    }
  });
});
