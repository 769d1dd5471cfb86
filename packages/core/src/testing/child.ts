// Child processes for crash tests (kill -9 mid-write, a server killed while it serves): the child is
// bundled from TypeScript source into a plain .mjs, so the tests need no prior build. Test-only:
// tsup (a devDependency of the repository) is imported when bundleChild runs, not with this entry.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOptions } from '../validation.js';

/** Options of {@link bundleChild}. */
export interface BundleChildOptions {
  /** Packages bundled into the child instead of imported at run time (e.g. `[/^@embedstack\//]` for workspace sources). Default none. */
  noExternal?: (string | RegExp)[];
  /**
   * Packages the child imports at run time from outside the temp folder (native addons, or the
   * dependencies of bundled workspace packages): name -> a file or folder whose `require` resolves
   * the package (e.g. that package's `package.json`). Each is linked into `<outDir>/node_modules`.
   * Default none.
   */
  links?: Record<string, string | URL>;
  /**
   * Imports resolved to other files (esbuild's alias): package name -> absolute path, e.g. the
   * workspace packages to their TypeScript sources, so the child runs the sources under test rather
   * than their last build. Only for packages bundled in (see noExternal). Default none.
   */
  alias?: Record<string, string>;
}

/** The folder of package `name` as resolved from `from` (a file or folder path or URL). */
function packageFolder(name: string, from: string | URL): string {
  const path = from instanceof URL || from.startsWith('file:') ? fileURLToPath(from) : from;
  let dir = dirname(createRequire(path).resolve(name));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === name) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json of ${name} above ${path}`);
    dir = up;
  }
}

/**
 * Bundles the TypeScript file `entry` (a path or file URL) into `<outDir>/<name>.mjs` (ESM, node20)
 * with tsup. @returns the path of the .mjs to run with `node`
 */
export async function bundleChild(entry: string | URL, outDir: string, options: BundleChildOptions = {}): Promise<string> {
  const file = entry instanceof URL || entry.startsWith('file:') ? fileURLToPath(entry) : entry;
  const name = basename(file).replace(/\.[cm]?ts$/, '');
  const o = checkOptions<BundleChildOptions>(options, ['noExternal', 'links', 'alias']);
  const links = o.links ?? {};
  const { build } = await import('tsup');
  await build({
    entry: { [name]: file },
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
    noExternal: o.noExternal ?? [],
    external: Object.keys(links),
    outExtension: () => ({ js: '.mjs' }),
    esbuildOptions: (esbuild) => {
      esbuild.alias = { ...esbuild.alias, ...o.alias };
    },
  });
  for (const [pkg, from] of Object.entries(links)) {
    const at = join(outDir, 'node_modules', pkg);
    if (existsSync(at)) continue;
    mkdirSync(dirname(at), { recursive: true });
    symlinkSync(packageFolder(pkg, from), at, 'dir');
  }
  return join(outDir, `${name}.mjs`);
}

/** A running child and the lines it printed so far. */
export interface ChildRun {
  /** The child process. */
  child: ChildProcess;
  /** Its stdout, line by line (growing while it runs). */
  lines: string[];
}

/**
 * Runs `node <script> ...args` (stdin a pipe: the child can exit when it closes) and resolves once
 * the child printed a line equal to `until` (or matching it).
 * @throws (rejects) when the child exits before printing it, with its output and stderr
 */
export function runChildUntil(script: string, args: readonly string[], until: string | RegExp): Promise<ChildRun> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const seen = (l: string): boolean => (typeof until === 'string' ? l === until : until.test(l));
  let stderr = '';
  let buf = '';
  return new Promise((resolve, reject) => {
    let done = false;
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const parts = buf.split('\n');
      buf = parts.pop()!;
      for (const l of parts) {
        lines.push(l);
        if (!done && seen(l)) {
          done = true;
          resolve({ child, lines });
        }
      }
    });
    child.on('exit', (code, signal) => {
      if (!done) reject(new Error(`child exited (${code ?? signal}) before printing ${String(until)}: ${lines.join('|')} ${stderr}`));
    });
  });
}

/** How a child process ended. */
export interface ChildExit {
  /** Its exit code, or null when a signal ended it. */
  code: number | null;
  /** The signal that ended it, or null when it exited. */
  signal: NodeJS.Signals | null;
}

/** Resolves with the child's exit code (null after a signal) and signal once it has exited. */
export function childExit(child: ChildProcess): Promise<ChildExit> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Kills the child with SIGKILL (no cleanup of any kind runs in it) and resolves once it has exited. */
export async function kill9(child: ChildProcess): Promise<void> {
  const exited = childExit(child);
  child.kill('SIGKILL');
  await exited;
}
