// Bundles a child-process script of the checkpoint tests from source with tsup (a root
// devDependency) into `<outDir>/<name>.mjs`, so the tests need no prior build.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'tsup';

/** Bundles test/checkpoint/<name>.ts; returns the path of the .mjs to run with `node`. */
export async function bundleChild(name: string, outDir: string): Promise<string> {
  await build({
    entry: { [name]: fileURLToPath(new URL(`./${name}.ts`, import.meta.url)) },
    outDir,
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    dts: false,
    sourcemap: false,
    splitting: false,
    clean: false,
    silent: true,
    config: false,
    outExtension: () => ({ js: '.mjs' }),
  });
  return join(outDir, `${name}.mjs`);
}
