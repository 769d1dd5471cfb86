// CI runs the example as a user would: `node main.mjs` against the BUILT packages.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const packages = join(here, '..', '..', 'packages');
const builds = ['tfra', 'core', 'store-redis'].map((p) => join(packages, p, 'dist', 'index.js'));
const missing = builds.filter((p) => !existsSync(p));

function cpuBackendBuilt(): string | null {
  const dist = join(packages, 'cpu-backend', 'dist', 'index.cjs');
  const release = join(packages, 'cpu-backend', 'build', 'Release');
  if (!existsSync(dist)) return `${dist} is missing`;
  if (!existsSync(release) || !readdirSync(release).some((f) => f.endsWith('.node'))) return `no native addon in ${release}`;
  return null;
}

describe('examples/tfra', () => {
  if (missing.length > 0) {
    const reason = `the dist build is missing (${missing.join(', ')}); run pnpm build first`;
    console.log(`[examples/tfra] skipped: ${reason}`);
    it.skip(`skipped: ${reason}`, () => undefined);
    return;
  }

  it('trains (falling loss), restricts, saves and reloads; exits 0', () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.EMBEDSTACK_BACKEND;
    const noCpu = cpuBackendBuilt();
    if (noCpu) {
      console.log(`[examples/tfra] cpu backend not built (${noCpu}): running on the reference backend`);
      env.EMBEDSTACK_BACKEND = 'reference';
    }
    const r = spawnSync(process.execPath, ['main.mjs'], { cwd: here, env, encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0) console.log(r.stdout, r.stderr);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/step +10 +loss \d\.\d{4}/);
    expect(r.stdout).toMatch(/tfra example OK/);
  });
});
