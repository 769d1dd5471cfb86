import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

/**
 * The addon raises glibc malloc's mmap and trim thresholds at load (native/src/memory.h,
 * tuneAllocator), so that multi-MB results the garbage collector frees some calls later
 * stay in the heap and the next results reuse their pages (the effect on speed is
 * measured in apps/bench's bag suite: fresh-output rows against reused-output rows).
 * Each case runs in a child process: the thresholds are process-wide and set once.
 */
const require = createRequire(import.meta.url);
const cpuPackage = require.resolve('@embedstack/cpu-backend');
const glibc = process.platform === 'linux' && Boolean((process.report?.getReport() as { header?: { glibcVersionRuntime?: string } })?.header?.glibcVersionRuntime);

/** Loads the addon in a child process with `env` and returns the tuning it reports. */
function tuningWith(env: NodeJS.ProcessEnv): string {
  const script = `
    const { loadAddon } = require(${JSON.stringify(cpuPackage)});
    console.log(loadAddon().binding.info().mallocTuning);
  `;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, EMBEDSTACK_TUNE_MALLOC: undefined, GLIBC_TUNABLES: undefined, MALLOC_MMAP_THRESHOLD_: undefined, MALLOC_TRIM_THRESHOLD_: undefined, ...env } });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim();
}

describe.skipIf(!glibc)('glibc malloc thresholds (skipped where the C library is not glibc: the tuning is glibc-only)', () => {
  it('loading the addon raises the thresholds', () => {
    expect(tuningWith({})).toBe('tuned');
  }, 60_000);

  it('EMBEDSTACK_TUNE_MALLOC=0 leaves them alone, and so does a user who set them (GLIBC_TUNABLES or MALLOC_*_THRESHOLD_)', () => {
    expect(tuningWith({ EMBEDSTACK_TUNE_MALLOC: '0' })).toBe('opted-out');
    expect(tuningWith({ EMBEDSTACK_TUNE_MALLOC: '1' })).toBe('tuned');
    expect(tuningWith({ GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=1048576' })).toBe('user-set');
    expect(tuningWith({ GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=262144' })).toBe('user-set');
    expect(tuningWith({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })).toBe('tuned');
    expect(tuningWith({ MALLOC_MMAP_THRESHOLD_: '262144' })).toBe('user-set');
    expect(tuningWith({ MALLOC_TRIM_THRESHOLD_: '262144' })).toBe('user-set');
  }, 120_000);
});
