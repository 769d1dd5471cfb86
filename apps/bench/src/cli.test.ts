// The built CLIs (dist/cli.js, dist/demo.js) on a user's mistakes: one message that names the option,
// what it takes and what it got, exit code 1, no stack trace, nothing measured.
// The test command builds before it tests; run `pnpm build` first when running this file alone.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getBackend } from '@embedstack/core';
import { describe, expect, it } from 'vitest';
import { backendUsageError, KNOWN_BACKENDS } from './backend.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const demo = fileURLToPath(new URL('../dist/demo.js', import.meta.url));

function run(script: string, args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  expect(existsSync(script), `${script} (run pnpm build first)`).toBe(true);
  const e = { ...process.env, ...env };
  if (!('EMBEDSTACK_BACKEND' in env)) delete e.EMBEDSTACK_BACKEND;
  const r = spawnSync(process.execPath, [script, ...args], { encoding: 'utf8', timeout: 60_000, env: e });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A one-message usage error: exit 1, the message and the hint on stderr, no stack frames, nothing on stdout. */
function expectUsageError(r: ReturnType<typeof run>, message: string): void {
  expect(r.stderr).toContain(message);
  expect(r.stderr).toContain('(run with --help for the options)');
  expect(r.stderr).not.toMatch(/^\s+at /m);
  expect(r.stdout).toBe('');
  expect(r.status).toBe(1);
}

describe('backendUsageError', () => {
  const notFound = ((): unknown => {
    try {
      getBackend('no-such-backend');
    } catch (e) {
      return e;
    }
    throw new Error('getBackend should have refused the name');
  })();

  it('names the option, every backend the bench can load and the name it got', () => {
    const names = KNOWN_BACKENDS.join(', ');
    expect(backendUsageError('no-such-backend', notFound, 'cli')).toMatch(
      new RegExp(`^error: option '--backend <name>' argument 'no-such-backend' is invalid\\. Expected one of ${names}(, [a-z-]+)* but received "no-such-backend"\\.$`),
    );
    expect(backendUsageError('no-such-backend', notFound, 'env')).toContain('error: EMBEDSTACK_BACKEND="no-such-backend" (no --backend given) is invalid.');
  });

  it("passes on a backend's own reason for not running; leaves other errors (bugs) alone", () => {
    const unavailable = Object.assign(new Error('no driver'), { code: 'BACKEND_UNAVAILABLE' });
    expect(backendUsageError('cuda', unavailable, 'cli')).toBe("error: option '--backend <name>' argument 'cuda': the backend cannot run here. no driver");
    expect(backendUsageError('cpu', unavailable, 'default')).toBe("error: the default backend 'cpu': the backend cannot run here. no driver");
    expect(backendUsageError('cpu', new TypeError('x is not a function'), 'cli')).toBeNull();
  });
});

describe('embedstack-bench (the built CLI) on mistakes', () => {
  it('an unknown --backend, or EMBEDSTACK_BACKEND: one message listing the backends, exit 1', () => {
    const r = run(cli, ['--backend', 'gpu', '--suite', 'limit']);
    expectUsageError(r, `error: option '--backend <name>' argument 'gpu' is invalid. Expected one of ${KNOWN_BACKENDS.join(', ')}`);
    expect(r.stderr).toContain('but received "gpu".');
    expectUsageError(run(cli, ['--suite', 'limit'], { EMBEDSTACK_BACKEND: 'gpu' }), 'error: EMBEDSTACK_BACKEND="gpu" (no --backend given) is invalid.');
  }, 60_000);

  it('--plot onto a file: refused before anything is measured', () => {
    const root = mkdtempSync(join(tmpdir(), 'bench-cli-'));
    try {
      const file = join(root, 'charts');
      writeFileSync(file, 'not a folder');
      expectUsageError(run(cli, ['--suite', 'limit', '--plot', file]), `error: option '--plot <dir>' argument '${file}' is invalid. Expected a folder but received "${file}", which is a file.`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 60_000);

  // Node 20's mkdirSync(dir, { recursive: true }) never returns for such a path; in a child with a timeout a
  // regression fails here (status null) instead of hanging the test run.
  it.runIf(process.platform === 'linux')('--plot into a folder that cannot be made (/proc/x/y): refused, without hanging', () => {
    expectUsageError(
      run(cli, ['--suite', 'limit', '--plot', '/proc/x/y']),
      `error: option '--plot <dir>' argument '/proc/x/y' is invalid. Expected a folder the charts can be written to but received "/proc/x/y" (it cannot be made there).`,
    );
  }, 60_000);

  // The memory suite trims the C heap before each RSS reading; this checks that the trim returns free heap pages
  // (a heap with 125 MiB freed in 64 KiB blocks between live ones, which glibc cannot give back from its top).
  it.runIf(process.platform === 'linux' && (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime !== undefined)(
    "the bench addon's trimHeap returns the C heap's free pages to the OS",
    () => {
      const addon = fileURLToPath(new URL('../build/Release/bench_native.node', import.meta.url));
      const script = [
        `const n = require(${JSON.stringify(addon)});`,
        'let all = [], keep = [];',
        'for (let i = 0; i < 2000; i++) { const b = new Uint8Array(65536); b.fill(1); all.push(b); if (i % 10 === 9) keep.push(b); }',
        'all = null; gc(); gc();',
        'const before = process.memoryUsage().rss; const ok = n.trimHeap(); const after = process.memoryUsage().rss;',
        'console.log(JSON.stringify({ ok, dropMiB: (before - after) / 2 ** 20, kept: keep.length }));',
      ].join('\n');
      const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim()) as { ok: boolean; dropMiB: number; kept: number };
      expect(out.ok).toBe(true);
      expect(out.kept).toBe(200);
      expect(out.dropMiB).toBeGreaterThan(64); // 1800 x 64 KiB = 112.5 MiB freed
    },
    60_000,
  );

  it('an empty --suite is refused (it would have run every suite)', () => {
    const r = run(cli, ['--suite', '']);
    expect(r.stderr).toContain(`argument '' is invalid. Expected a suite name or a comma list of names`);
    expect(r.status).toBe(1);
  }, 60_000);

  it('`demo` runs the demo command (its --help here)', () => {
    const r = run(cli, ['demo', '--help']);
    expect(r.stdout).toContain('Usage: embedstack-demo [options]');
    expect(r.status).toBe(0);
  }, 60_000);
});

describe('embedstack-demo (the built CLI) on mistakes', () => {
  it('float options out of range: one message, exit 1, before any work', () => {
    expectUsageError(run(demo, ['--cache-fraction', '2']), `error: option '--cache-fraction <x>' argument '2' is invalid. Expected a number in (0, 1] but received "2".`);
    expectUsageError(run(demo, ['--embedding-rate', 'abc']), `error: option '--embedding-rate <x>' argument 'abc' is invalid. Expected a number > 0 but received "abc".`);
    expectUsageError(run(demo, ['--head-rate', '-1']), `error: option '--head-rate <x>' argument '-1' is invalid. Expected a number > 0 but received "-1".`);
  }, 60_000);

  it('sizes past the memory: one message, exit 1, before any work', () => {
    expectUsageError(run(demo, ['--quick', '--dim', '100000000']), 'error: --vocab 1000, --dim 100000000, --train 16384 and --test 4096 need at least 18.9 TiB');
  }, 60_000);
});
