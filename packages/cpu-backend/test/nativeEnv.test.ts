import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { BackendUnavailableError, createTable, ErrorCodes } from '@embedstack/core';
import { CpuBackend, candidatePaths, loadAddon, nativeEnvProblem } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

// The variables the addon reads itself (its pool's threads and idle spin, the malloc tuning):
// the loader refuses a value the addon would not accept, naming it, instead of the addon
// silently taking its default.

const require = createRequire(import.meta.url);
const cpuPackage = require.resolve('@embedstack/cpu-backend');
const real = loadAddon();
const notBuilt = `the addon is not built (${real.reason ?? ''})`;

/** The addon's info() in a child process whose environment adds `env` (loaded through the loader, or the .node file directly). */
function infoWith(env: NodeJS.ProcessEnv, direct = false): { threads: number; idleSpinUs: number; hardwareConcurrency: number } {
  const load = direct ? `require(${JSON.stringify(real.path)})` : `require(${JSON.stringify(cpuPackage)}).loadAddon().binding`;
  const script = `const i = ${load}.info(); console.log(JSON.stringify({ threads: i.threads, idleSpinUs: i.idleSpinUs, hardwareConcurrency: i.hardwareConcurrency }));`;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, EMBEDSTACK_CPU_THREADS: undefined, EMBEDSTACK_CPU_SPIN_US: undefined, ...env } });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim()) as { threads: number; idleSpinUs: number; hardwareConcurrency: number };
}

describe('nativeEnvProblem', () => {
  it('accepts unset, empty and whole numbers in range', () => {
    expect(nativeEnvProblem({})).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_THREADS: '', EMBEDSTACK_CPU_SPIN_US: '', EMBEDSTACK_TUNE_MALLOC: '' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_THREADS: '1', EMBEDSTACK_CPU_SPIN_US: '0', EMBEDSTACK_TUNE_MALLOC: '0' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_THREADS: '1024', EMBEDSTACK_CPU_SPIN_US: '100000', EMBEDSTACK_TUNE_MALLOC: '1' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_RESULT_CACHE_MB: '0' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_RESULT_CACHE_MB: '65536' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_EARLY_WAIT_US: '0' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_EARLY_WAIT_US: '1000000' })).toBeNull();
    expect(nativeEnvProblem({ EMBEDSTACK_CPU_THREADS: '004' })).toBeNull();
  });

  const bad: [string, string][] = [
    ['EMBEDSTACK_CPU_THREADS', '0'],
    ['EMBEDSTACK_CPU_THREADS', '1025'],
    ['EMBEDSTACK_CPU_THREADS', 'four'],
    ['EMBEDSTACK_CPU_THREADS', '4abc'],
    ['EMBEDSTACK_CPU_THREADS', ' 4'],
    ['EMBEDSTACK_CPU_THREADS', '+4'],
    ['EMBEDSTACK_CPU_THREADS', '4.0'],
    ['EMBEDSTACK_CPU_SPIN_US', '-1'],
    ['EMBEDSTACK_CPU_SPIN_US', '100001'],
    ['EMBEDSTACK_CPU_SPIN_US', '1e3'],
    ['EMBEDSTACK_CPU_SPIN_US', '99999999999999999999'],
    ['EMBEDSTACK_TUNE_MALLOC', '2'],
    ['EMBEDSTACK_TUNE_MALLOC', 'no'],
    ['EMBEDSTACK_CPU_RESULT_CACHE_MB', '-1'],
    ['EMBEDSTACK_CPU_RESULT_CACHE_MB', '65537'],
    ['EMBEDSTACK_CPU_RESULT_CACHE_MB', '12x'],
    ['EMBEDSTACK_CPU_EARLY_WAIT_US', '1000001'],
    ['EMBEDSTACK_CPU_EARLY_WAIT_US', '-5'],
  ];
  it.each(bad)('refuses %s=%j, naming the variable, the value and the range', (name, value) => {
    const problem = nativeEnvProblem({ [name]: value });
    expect(problem).toContain(`${name}=${JSON.stringify(value)} is not accepted`);
    expect(problem).toMatch(/expected a whole number from \d+ to \d+/);
  });

  it('refuses a non-object env with InvalidTypeError', () => {
    expect(() => nativeEnvProblem(null as unknown as NodeJS.ProcessEnv)).toThrowError(expect.objectContaining({ code: ErrorCodes.INVALID_TYPE }));
  });
});

describe('a refused value makes the backend unusable, saying why', () => {
  const env = { EMBEDSTACK_CPU_SPIN_US: 'lots' };

  it('candidatePaths is empty and loadAddon (with or without candidates) loads nothing', () => {
    expect(candidatePaths(env)).toEqual([]);
    const load = loadAddon(undefined, env);
    expect(load.binding).toBeNull();
    expect(load.reason).toContain('EMBEDSTACK_CPU_SPIN_US="lots" is not accepted');
    const given = loadAddon(real.path ? [real.path] : [], env);
    expect(given.binding).toBeNull();
    expect(given.reason).toContain('EMBEDSTACK_CPU_SPIN_US="lots"');
  });

  it('createTable throws BACKEND_UNAVAILABLE with the reason', () => {
    const backend = new CpuBackend({ load: () => loadAddon(undefined, { EMBEDSTACK_CPU_THREADS: '0' }) });
    expect(backend.isUsable()).toBe(false);
    expect(backend.clearResultCache()).toBe(0); // nothing loaded, nothing held
    const create = () => createTable({ dim: 2 }, { backend });
    expect(create).toThrow(BackendUnavailableError);
    expect(create).toThrow(
      expect.objectContaining({
        code: ErrorCodes.BACKEND_UNAVAILABLE,
        message: expect.stringContaining('EMBEDSTACK_CPU_THREADS="0" is not accepted: expected a whole number from 1 to 1024'),
      }),
    );
  });
});

describe.skipIf(!real.binding)(`the pool takes the accepted values (${real.binding ? 'child processes' : notBuilt})`, () => {
  it('EMBEDSTACK_CPU_THREADS and EMBEDSTACK_CPU_SPIN_US set the pool; unset, the defaults', () => {
    const set = infoWith({ EMBEDSTACK_CPU_THREADS: '3', EMBEDSTACK_CPU_SPIN_US: '750' });
    expect(set.threads).toBe(3);
    expect(set.idleSpinUs).toBe(750);
    const unset = infoWith({});
    expect(unset.threads).toBe(Math.max(1, unset.hardwareConcurrency));
    expect(unset.idleSpinUs).toBe(200);
  }, 60_000);

  it('the addon loaded directly (bypassing the loader) takes the defaults for values the loader refuses', () => {
    const direct = infoWith({ EMBEDSTACK_CPU_THREADS: '3x', EMBEDSTACK_CPU_SPIN_US: ' 750' }, true);
    expect(direct.threads).toBe(Math.max(1, direct.hardwareConcurrency));
    expect(direct.idleSpinUs).toBe(200);
  }, 60_000);
});
