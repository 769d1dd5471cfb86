import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// @embedstack/store-redis is an optional peer of tfra: the built package must not load it
// (nor ioredis) until a RedisTableCreator makes a table. (Installed without it, creating a
// RedisTableCreator throws BACKEND_UNAVAILABLE naming the package: scripts/pack-check.mjs
// checks that on a real npm install.)
const pkg = fileURLToPath(new URL('..', import.meta.url));

function runCjs(script: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['-e', script], { cwd: pkg, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const loaded = "const loaded = () => Object.keys(require.cache).filter((k) => /store-redis|ioredis/.test(k)).length > 0;";

describe('tfra: @embedstack/store-redis is loaded only for Redis tables', () => {
  it('importing tfra and using in-memory variables loads neither store-redis nor ioredis', () => {
    const r = runCjs(
      `${loaded} const de = require('./dist/index.cjs'); ` +
        "(async () => { const v = new de.Variable({ name: 'm', dim: 2, initializer: [1, 2], kvCreator: new de.CuckooHashTableCreator() }); " +
        'const x = await v.lookup([5n]); console.log(JSON.stringify({ v: Array.from(x.data), loaded: loaded() })); })();',
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ v: [1, 2], loaded: false });
  });

  it('a RedisTableCreator loads it when its first table is made, and the table works once it has', () => {
    // No Redis server: the table's first operation fails to connect (a coded store error), after loading the module.
    const r = runCjs(
      `${loaded} const de = require('./dist/index.cjs'); const before = loaded(); ` +
        "const c = new de.RedisTableCreator(new de.RedisTableConfig({ redis_host_ip: ['127.0.0.1'], redis_host_port: [1], redis_connect_timeout: 200 })); " +
        "(async () => { const v = new de.Variable({ name: 'r', dim: 2, kvCreator: c }); let code = null; " +
        'try { await v.size(); } catch (e) { code = e.code; } ' +
        'console.log(JSON.stringify({ before, after: loaded(), code, store: typeof c.store.close })); await c.close(); v.dispose(); })();',
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { before: boolean; after: boolean; code: string | null; store: string };
    expect(out.before).toBe(false);
    expect(out.after).toBe(true);
    expect(out.code).toMatch(/^[A-Z_]+$/);
    expect(out.store).toBe('function');
  });
});
