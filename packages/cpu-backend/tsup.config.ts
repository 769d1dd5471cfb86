import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  // classes keep their names in the bundle (else esbuild renames some: `Tensor.name` was '_Tensor', in messages too)
  keepNames: true,
  // import.meta.url in the CJS build (the loader finds build/ relative to it)
  shims: true,
  external: ['@embedstack/core'],
});
