import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The built tfra package in a process where the native CPU backend cannot load
// (EMBEDSTACK_CPU_ADDON points at an empty directory, as on a machine with neither a
// matching prebuilt binary nor a source build): the first table says why and how to fix
// it; with EMBEDSTACK_FALLBACK=reference it runs on the reference backend, warning once.
const pkg = fileURLToPath(new URL('..', import.meta.url));
const empty = mkdtempSync(join(tmpdir(), 'embedstack-tfra-noaddon-'));

function run(env: NodeJS.ProcessEnv): { status: number | null; stdout: string; stderr: string } {
  const script =
    "const de = require('./dist/index.cjs'); (async () => { let out; try { " +
    "const v = new de.Variable({ name: 'm', dim: 2, initializer: [1, 2], kvCreator: new de.CuckooHashTableCreator() }); " +
    'await v.upsert([3n], new Float32Array([5, 6])); const x = await v.lookup([3n, 4n]); ' +
    'out = { v: Array.from(x.data), backend: v.tables[0].backendName }; } ' +
    'catch (e) { out = { code: e.code, name: e.name, message: e.message }; } console.log(JSON.stringify(out)); })();';
  const r = spawnSync(process.execPath, ['-e', script], {
    cwd: pkg,
    encoding: 'utf8',
    timeout: 60_000,
    // NODE_PATH cleared: vitest's reaches pnpm's store, where @embedstack/cuda-backend (whose host mode would serve) is found
    env: { ...process.env, NODE_PATH: '', EMBEDSTACK_BACKEND: '', EMBEDSTACK_CPU: '', EMBEDSTACK_CPU_ADDON: empty, ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('tfra without a loadable native backend', () => {
  it('the first table throws BACKEND_UNAVAILABLE naming the platform, what was tried, the build command and the reference fallback', () => {
    const r = run({ EMBEDSTACK_FALLBACK: '' });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { code: string; name: string; message: string };
    expect(out.code).toBe('BACKEND_UNAVAILABLE');
    expect(out.name).toBe('BackendUnavailableError');
    expect(out.message).toContain('can run on this machine (cpu)');
    expect(out.message).toContain(`on ${process.platform}-${process.arch}`);
    expect(out.message).toContain(`Tried:\n  - ${join(empty, 'embedstack_cpu.node')}: no such file`);
    expect(out.message).toContain('pnpm --filter @embedstack/cpu-backend build');
    expect(out.message).toContain('EMBEDSTACK_FALLBACK=reference');
  });

  it('EMBEDSTACK_FALLBACK=reference: the lookups run on the reference backend, with one warning saying why', () => {
    const r = run({ EMBEDSTACK_FALLBACK: 'reference' });
    expect(r.status, r.stderr).toBe(0);
    // key 3 upserted [5, 6]; key 4 missing: the initializer row [1, 2]
    expect(JSON.parse(r.stdout)).toEqual({ v: [5, 6, 1, 2], backend: 'reference' });
    const warnings = r.stderr.split('\n').filter((l) => l.includes('EmbedstackWarning'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('EMBEDSTACK_FALLBACK=reference: running on the pure-TypeScript reference backend');
    expect(r.stderr).toContain('pnpm --filter @embedstack/cpu-backend build');
  });
});
