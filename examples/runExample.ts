// Shared by the examples' tests: CI runs each example as a user would, `node main.mjs`
// against the BUILT packages, on the cpu backend when its addon is built.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const packagesDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'packages');

/** Why the dist builds of `pkgs` cannot be used, or null when they are all there. */
export function missingBuilds(pkgs: string[]): string | null {
  const missing = pkgs.map((p) => join(packagesDir, p, 'dist', 'index.js')).filter((p) => !existsSync(p));
  return missing.length > 0 ? `the dist build is missing (${missing.join(', ')}); run pnpm build first` : null;
}

function cpuBackendMissing(): string | null {
  const dist = join(packagesDir, 'cpu-backend', 'dist', 'index.cjs');
  const release = join(packagesDir, 'cpu-backend', 'build', 'Release');
  if (!existsSync(dist)) return `${dist} is missing`;
  if (!existsSync(release) || !readdirSync(release).some((f) => f.endsWith('.node'))) return `no native addon in ${release}`;
  return null;
}

/** Runs `node main.mjs` in `dir`; on the reference backend (said so) when the cpu addon is not built. */
export function runExample(name: string, dir: string): SpawnSyncReturns<string> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.EMBEDSTACK_BACKEND;
  const noCpu = cpuBackendMissing();
  if (noCpu) {
    console.log(`[${name}] cpu backend not built (${noCpu}): running on the reference backend`);
    env.EMBEDSTACK_BACKEND = 'reference';
  }
  const r = spawnSync(process.execPath, ['main.mjs'], { cwd: dir, env, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) console.log(r.stdout, r.stderr);
  return r;
}
