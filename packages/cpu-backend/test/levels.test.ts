import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BackendUnavailableError, createTable, ErrorCodes } from '@embedstack/core';
import { runConformanceSuite } from '@embedstack/core/testing';
import { CPU_LEVELS, CpuBackend, type CpuLevel, candidatePaths, loadAddon, requestedCpuLevel, supportedCpuLevels } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

// The prebuilt binaries of each CPU level (scripts/prebuild.mjs; `pnpm test` builds
// this machine's before the tests): core's conformance suite under every level this
// CPU runs, EMBEDSTACK_CPU's refusals, and the baseline binary on an emulated CPU
// without AVX (qemu-user), where the AVX2 binary dies.

const pkg = fileURLToPath(new URL('..', import.meta.url));
const supported = supportedCpuLevels();
const x64Linux = process.platform === 'linux' && process.arch === 'x64';
const tupleDir = join(pkg, 'prebuilds', `${process.platform}-${process.arch}`);
const built = existsSync(tupleDir);
const notBuilt = `no prebuilt binaries in ${tupleDir}: run \`pnpm --filter @embedstack/cpu-backend build:prebuilds\``;

/** /proc/cpuinfo of a CPU with SSE4.2 and no AVX (the flags of qemu's Nehalem model). */
const NEHALEM = 'processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm constant_tsc pni ssse3 cx16 sse4_1 sse4_2 popcnt\n';
const HASWELL = NEHALEM.replace('popcnt', 'popcnt movbe fma xsave avx f16c rdrand abm bmi1 avx2 bmi2 erms');

const hasObjdump = spawnSync('objdump', ['--version']).status === 0;

describe('cpu levels: the binaries use no instruction a level does not check for', () => {
  // The avx2 / avx512 binaries are compiled with -mno-lzcnt, since the loader does not
  // require the abm flag (VMs hide it): a LZCNT there would run as BSR on a CPU without it.
  for (const level of ['avx2', 'avx512'] as const) {
    const file = join(tupleDir, level, '@embedstack+cpu-backend.napi.glibc.node');
    const why = !x64Linux ? 'not x86-64 Linux' : !hasObjdump ? 'objdump (binutils) is not installed' : !existsSync(file) ? notBuilt : '';
    it.skipIf(why !== '')(`the ${level} binary holds no lzcnt${why ? `: skipped, ${why}` : ''}`, () => {
      const r = spawnSync('sh', ['-c', `objdump -d --no-show-raw-insn '${file}' | grep -c -w lzcnt || true`], { encoding: 'utf8', maxBuffer: 1 << 20 });
      expect(r.status, r.stderr).toBe(0);
      expect(Number(r.stdout.trim())).toBe(0);
    });
  }
});

describe('cpu levels: detection and EMBEDSTACK_CPU', () => {
  it('reads the levels from /proc/cpuinfo flags', () => {
    expect(supportedCpuLevels(NEHALEM)).toEqual(['baseline']);
    expect(supportedCpuLevels(HASWELL)).toEqual(['baseline', 'avx2']);
    expect(supportedCpuLevels(HASWELL.replace('erms', 'erms avx512f avx512dq avx512cd avx512bw avx512vl'))).toEqual(['baseline', 'avx2', 'avx512']);
    // avx512f alone (Xeon Phi) is not x86-64 v4
    expect(supportedCpuLevels(HASWELL.replace('erms', 'erms avx512f'))).toEqual(['baseline', 'avx2']);
    expect(supportedCpuLevels('')).toEqual(['baseline']);
    // a VM that hides LZCNT (AMD EPYC guests list no abm): the levels are compiled without it
    expect(supportedCpuLevels(HASWELL.replace(' abm', ''))).toEqual(['baseline', 'avx2']);
    expect(supportedCpuLevels(HASWELL.replace(' abm', '').replace('erms', 'erms avx512f avx512dq avx512cd avx512bw avx512vl'))).toEqual(['baseline', 'avx2', 'avx512']);
    // a flag a level does need still counts
    expect(supportedCpuLevels(HASWELL.replace(' movbe', ''))).toEqual(['baseline']);
  });

  it('refuses a level the CPU lacks and a value that is no level, naming the levels it runs', () => {
    const lacks = requestedCpuLevel({ EMBEDSTACK_CPU: 'avx512' }, ['baseline', 'avx2']);
    expect(lacks.level).toBeNull();
    expect(lacks.problem).toContain('does not run avx512');
    expect(lacks.problem).toContain('it runs: baseline, avx2');
    expect(requestedCpuLevel({ EMBEDSTACK_CPU: 'sse4' }, ['baseline']).problem).toContain('expected one of baseline, avx2, avx512');
    expect(requestedCpuLevel({ EMBEDSTACK_CPU: 'AVX2' }, ['baseline', 'avx2'])).toEqual({ level: 'avx2', problem: null });
    expect(requestedCpuLevel({}, ['baseline'])).toEqual({ level: null, problem: null });
  });

  it('a refused level makes the backend unusable: createTable throws BACKEND_UNAVAILABLE with the reason', () => {
    const missing = CPU_LEVELS.find((l) => !supported.includes(l));
    const env = { EMBEDSTACK_CPU: missing ?? 'sse4' };
    const backend = new CpuBackend({ load: () => loadAddon(undefined, env) });
    expect(backend.isUsable()).toBe(false);
    expect(candidatePaths(env)).toEqual([]);
    let err: unknown;
    try {
      createTable({ dim: 2 }, { backend });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BackendUnavailableError);
    expect((err as BackendUnavailableError).code).toBe(ErrorCodes.BACKEND_UNAVAILABLE);
    expect((err as Error).message).toContain(`EMBEDSTACK_CPU=${env.EMBEDSTACK_CPU}`);
  });
});

for (const level of CPU_LEVELS) {
  const title = `cpu level ${level}`;
  if (!x64Linux && level !== 'baseline') {
    describe.skip(`${title}: levels above baseline exist only on x86-64 Linux`, () => {});
    continue;
  }
  if (!supported.includes(level)) {
    describe.skip(`${title}: this CPU does not run ${level} code (it runs ${supported.join(', ')})`, () => {});
    continue;
  }
  if (!built) {
    describe.skip(`${title}: ${notBuilt}`, () => {});
    continue;
  }
  const load = loadAddon(undefined, { EMBEDSTACK_CPU: level });
  if (load.attempts.some((a) => a.error.startsWith('stale prebuilt binary'))) {
    // One failure naming the fix (build:prebuilds), not the conformance suite failing test by test.
    it(`${title}: the prebuilt binary is built from the sources here`, () => {
      expect.fail(load.reason ?? 'stale prebuilt binary');
    });
    continue;
  }
  const backend = new CpuBackend({ load: () => load });
  describe(title, () => {
    it(`EMBEDSTACK_CPU=${level} loads that level's prebuilt binary`, () => {
      expect(load.reason).toBeNull();
      expect(load.level).toBe(level);
      expect(load.build).toBe('prebuilt');
      expect(load.path).toBe(join(tupleDir, ...(level === 'baseline' ? [] : [level]), load.path!.split(/[\\/]/).pop()!));
      expect(backend.cpuLevel()).toMatchObject({ level, build: 'prebuilt' });
    });
  });
  runConformanceSuite({ name: `cpu (${level} prebuild)`, backend: () => backend, propertyRuns: 20 });
}

/** Runs node under qemu-user emulating `cpu`; null when qemu-x86_64 is not installed. */
function underQemu(cpu: string, script: string, env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync('qemu-x86_64', ['-cpu', cpu, process.execPath, '-e', script], {
    cwd: pkg,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, ...env },
  });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') return null;
  return r;
}

const hasQemu = x64Linux && spawnSync('qemu-x86_64', ['--version'], { stdio: 'ignore' }).status === 0;
const distBuilt = existsSync(join(pkg, 'dist', 'index.cjs'));
const qemuSkip = !x64Linux
  ? 'the emulated-CPU check is for x86-64 Linux'
  : !hasQemu
    ? 'qemu-x86_64 is not installed (apt-get install -y qemu-user)'
    : !built
      ? notBuilt
      : !distBuilt
        ? 'dist/ is not built (pnpm --filter @embedstack/cpu-backend build)'
        : null;

(qemuSkip ? describe.skip : describe)(`baseline prebuild on a CPU without AVX2${qemuSkip ? `: ${qemuSkip}` : ''}`, () => {
  const lookup =
    "const m = require('./dist/index.cjs'); const core = require('@embedstack/core'); " +
    "const t = core.createTable({ dim: 8 }, { backend: 'cpu' }); t.upsertSync([5n], new Float32Array(8).fill(1.5)); " +
    'const r = t.findOrInsertSync([5n, 6n]); console.log(JSON.stringify({ level: m.cpuLevel().level, v: Array.from(r.values.subarray(0, 8)), e: Array.from(r.exists) }));';

  it('the package loads its baseline binary and runs lookups on an emulated Nehalem (SSE4.2, no AVX)', () => {
    const r = underQemu('Nehalem', lookup, { EMBEDSTACK_CPU: 'baseline' })!;
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ level: 'baseline', v: [1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5], e: [1, 0] });
  });

  // EMBEDSTACK_CPU only takes a level the host's /proc/cpuinfo lists (a VM may hide a flag, e.g. abm)
  const levels = supported.filter((l): l is Exclude<CpuLevel, 'baseline'> => l !== 'baseline');
  it.skipIf(levels.length === 0)(`the avx2 binary dies there with an illegal instruction (why the level is chosen at run time)${levels.length === 0 ? ': this host lists no level above baseline' : ''}`, () => {
    for (const level of levels) {
      const r = underQemu('Nehalem', lookup, { EMBEDSTACK_CPU: level })!;
      // EMBEDSTACK_CPU reads the host's /proc/cpuinfo under qemu-user, so the level is allowed and its binary loads
      expect(r.status === 132 || r.signal === 'SIGILL' || /Illegal instruction/.test(r.stderr), `${level}: ${r.status} ${r.stderr}`).toBe(true);
    }
  });
});
