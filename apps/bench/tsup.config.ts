import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { cli: 'src/cli.ts', demo: 'src/demo/cli.ts' },
  format: ['esm'],
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  banner: { js: '#!/usr/bin/env node' },
});
