import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts', 'testing/index': 'src/testing/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  // classes keep their names in the bundle (else esbuild renames some: `Tensor.name` was '_Tensor', in messages too)
  keepNames: true,
  external: ['ioredis', '@embedstack/core'],
});
