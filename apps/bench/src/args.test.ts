import { describe, expect, it } from 'vitest';
import { ArgumentError, helpText, parseArgs, SUITES } from './args.js';

const AVAILABLE = ['limit', 'find', 'insert', 'bag', 'train', 'memory', 'scale', 'cuda', 'hps', 'redis'];

describe('parseArgs', () => {
  it('defaults to every available suite, cpu backend, no json, no plot', () => {
    expect(parseArgs([])).toEqual({ suites: AVAILABLE, full: false, json: false, plot: null, backend: 'cpu', help: false });
  });

  it('takes repeated and comma-separated suites, in run order, once each', () => {
    expect(parseArgs(['--suite', 'bag,find', '--suite', 'limit', '-s', 'find']).suites).toEqual(['limit', 'find', 'bag']);
    expect(parseArgs(['--suite=scale']).suites).toEqual(['scale']);
  });

  it('reads flags and values in both spellings', () => {
    const a = parseArgs(['--full', '--json', '--plot', 'out/charts', '--backend=reference']);
    expect(a).toMatchObject({ full: true, json: true, plot: 'out/charts', backend: 'reference' });
    expect(parseArgs(['-h']).help).toBe(true);
  });

  it('rejects an unknown suite, naming it and the known ones', () => {
    expect(() => parseArgs(['--suite', 'finds'])).toThrow(ArgumentError);
    expect(() => parseArgs(['--suite', 'finds'])).toThrow(/Expected --suite to be one of limit, find.*but received "finds"/);
  });

  it('rejects suites that are listed but not yet available', () => {
    for (const s of SUITES.filter((x) => !x.available)) expect(() => parseArgs(['--suite', `find,${s.name}`])).toThrow(`received "${s.name}" (not yet available)`);
    for (const s of SUITES.filter((x) => x.available)) expect(parseArgs(['--suite', s.name]).suites).toEqual([s.name]);
  });

  it('rejects unknown flags, missing values and values on plain flags', () => {
    expect(() => parseArgs(['--fast'])).toThrow(/but received "--fast"/);
    expect(() => parseArgs(['--plot'])).toThrow(/Expected a value after --plot but received nothing/);
    expect(() => parseArgs(['--plot', '--json'])).toThrow(/after --plot/);
    expect(() => parseArgs(['--full=yes'])).toThrow(/Expected --full to take no value but received "yes"/);
    expect(() => parseArgs(['--backend='])).toThrow(/--backend/);
  });
});

describe('helpText', () => {
  it('lists every suite and marks the unavailable ones', () => {
    const h = helpText();
    for (const s of SUITES) expect(h).toContain(`  ${s.name.padEnd(8)} `);
    for (const s of SUITES) expect(h.includes(`  ${s.name.padEnd(8)} ${s.what} (not yet available)`)).toBe(!s.available);
  });
});
