import { existsSync, readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));

// Tests run against sources: package names map to their src entry points.
const alias = {
  '@embedstack/core/testing': src('./packages/core/src/testing/index.ts'),
  '@embedstack/core': src('./packages/core/src/index.ts'),
  '@embedstack/cpu-backend': src('./packages/cpu-backend/src/index.ts'),
  '@embedstack/cuda-backend': src('./packages/cuda-backend/src/index.ts'),
  '@embedstack/store-redis/testing': src('./packages/store-redis/src/testing/index.ts'),
  '@embedstack/store-redis': src('./packages/store-redis/src/index.ts'),
  '@embedstack/store-rocksdb': src('./packages/store-rocksdb/src/index.ts'),
  '@embedstack/hps': src('./packages/hps/src/index.ts'),
  '@embedstack/sok': src('./packages/sok/src/index.ts'),
  '@embedstack/tfjs': src('./packages/tfjs/src/index.ts'),
  '@embedstack/tfra': src('./packages/tfra/src/index.ts'),
  '@embedstack/tpu-embedding': src('./packages/tpu-embedding/src/index.ts'),
};

/**
 * One vitest project per package (named after its folder: `core`, `tfra`, ...; examples
 * `example-<folder>`), so that `pnpm --filter <package> test` (`vitest run --project <name>`)
 * runs exactly that package's tests. New packages get their project automatically.
 */
function projects(dir: string, prefix: string, include: (d: string) => string[]) {
  const root = src(`./${dir}`);
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(src(`./${dir}/${d.name}/package.json`)))
    .map((d) => ({ extends: true as const, test: { name: `${prefix}${d.name}`, include: include(`${dir}/${d.name}`) } }));
}

export default defineConfig({
  resolve: { alias },
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // A worker runs many test files (not one fresh process each): a file's imports (tfjs, the
    // addons' loaders, fastify, ioredis) load once per worker, not once per file. Measured on the
    // whole run: 488 -> 362 CPU seconds, 293 -> 228 s on 2 cores. A file that needs modules of its
    // own (a vi.mock of a module other files load, the backend registry from its empty start)
    // says so with vi.resetModules() (packages/core/test/ownRegistry.ts).
    isolate: false,
    // One private temporary folder per run, removed at its end (scripts/vitest-tmpdir.ts).
    globalSetup: ['./scripts/vitest-tmpdir.ts'],
    // vitest runs N - 1 files at a time on N cores: one at a time on a 2-core CI machine,
    // where many files spend their time waiting on child processes (redis-server, node
    // children, native builds). Two at a time halves the run there (407 s -> 215 s).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      ...projects('packages', '', (d) => [`${d}/src/**/*.test.ts`, `${d}/test/**/*.test.ts`]),
      ...projects('apps', '', (d) => [`${d}/src/**/*.test.ts`, `${d}/test/**/*.test.ts`]),
      ...projects('examples', 'example-', (d) => [`${d}/*.test.ts`]),
    ],
  },
});
