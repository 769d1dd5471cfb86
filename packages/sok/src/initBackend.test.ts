import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The built sok package in a fresh process (nothing imported before it): sok.init names its
// backend as a user would. 'cpu' loads @embedstack/cpu-backend, sok's own dependency; before,
// init refused it (NOT_FOUND: "install and import @embedstack/cpu-backend") unless the user had
// imported that package first. The test command builds before it tests.
const pkg = fileURLToPath(new URL('..', import.meta.url));

function run(backend: string): { status: number | null; stdout: string; stderr: string } {
  const script =
    "const sok = require('./dist/index.cjs'); (async () => { let out; try { " +
    `await sok.init({ numDevices: 2, backend: ${JSON.stringify(backend)} }); ` +
    "const v = new sok.Variable({ shape: [4, 2], initializer: '0' }); " +
    'await sok.assign(v, [1, 3], new Float32Array([1, 2, 3, 4])); ' +
    'const x = await sok.embeddingLookup(v, [3, 1, 0]); ' +
    'out = { v: Array.from(x.data), backend: v.shards[0].table.backendName }; } ' +
    'catch (e) { out = { code: e.code, message: e.message }; } console.log(JSON.stringify(out)); })();';
  const r = spawnSync(process.execPath, ['-e', script], {
    cwd: pkg,
    encoding: 'utf8',
    timeout: 60_000,
    // NODE_PATH cleared (vitest's reaches pnpm's store); no backend chosen by the environment
    env: { ...process.env, NODE_PATH: '', EMBEDSTACK_BACKEND: '', EMBEDSTACK_FALLBACK: '' },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sok.init({ backend }) by name in a fresh process', () => {
  it("'cpu' loads the native CPU backend (sok's dependency) and the lookup runs on it", () => {
    const r = run('cpu');
    expect(r.status, r.stderr).toBe(0);
    // rows 1 and 3 assigned [1, 2] and [3, 4]; row 0 the initializer's 0
    expect(JSON.parse(r.stdout)).toEqual({ v: [3, 4, 1, 2, 0, 0], backend: 'cpu' });
  });

  it("'reference' runs on the reference backend; an unknown name is NOT_FOUND naming it", () => {
    expect(JSON.parse(run('reference').stdout)).toEqual({ v: [3, 4, 1, 2, 0, 0], backend: 'reference' });
    const bad = JSON.parse(run('gpu9').stdout) as { code: string; message: string };
    expect(bad.code).toBe('NOT_FOUND');
    expect(bad.message).toContain('"gpu9"');
  });
});
