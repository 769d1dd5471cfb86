import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));

// Tests run against sources: package names map to their src entry points.
const alias = {
  '@embedstack/core/testing': src('./packages/core/src/testing/index.ts'),
  '@embedstack/core': src('./packages/core/src/index.ts'),
  '@embedstack/cpu-backend': src('./packages/cpu-backend/src/index.ts'),
  '@embedstack/store-redis/testing': src('./packages/store-redis/src/testing/index.ts'),
  '@embedstack/store-redis': src('./packages/store-redis/src/index.ts'),
  '@embedstack/tfra': src('./packages/tfra/src/index.ts'),
  '@embedstack/tpu-embedding': src('./packages/tpu-embedding/src/index.ts'),
};

export default defineConfig({
  resolve: { alias },
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'examples/*/*.test.ts'],
  },
});
