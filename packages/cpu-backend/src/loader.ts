import { InvalidTypeError, invalidParameter } from '@embedstack/core';
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OPTIMIZER_FIELDS, PLAN_FIELDS, TABLE_FIELDS } from './abi.js';
import type { NativeBinding } from './native.js';

import { type CpuLevel, requestedCpuLevel, sourceBuildLevel, supportedCpuLevels } from './cpuLevel.js';
import { nativeEnvProblem } from './nativeEnv.js';
import { levelOfPath, levelPath, libc, matchPrebuild, platformTuple, prebuildRoot } from './prebuilds.js';

/**
 * Finds and loads the native addon, and explains itself when it cannot (sharp's
 * lib/sharp.mjs): every candidate path is tried, each failure is kept, and the
 * reason names the platform, what was tried and the one command that fixes it.
 * Never throws. cuda-backend loads its addon with the same code ({@link NativePackage}).
 *
 * Candidates, in order (node-gyp-build's order: a local build wins):
 * - `EMBEDSTACK_CPU_ADDON` (a .node file or a directory holding one, or
 *   build/Release below it) when set: only that;
 * - `EMBEDSTACK_CPU=baseline|avx2|avx512`: only that level's prebuilt binary (a
 *   level the CPU lacks is refused, saying so);
 * - else the source build (build/Release, build/Debug), then the prebuilt binaries
 *   for this platform (prebuilds/, see prebuilds.ts) from the best level the CPU
 *   runs down to baseline, then build/.
 */

export const ADDON_FILE = 'embedstack_cpu.node';

/**
 * A package with a native addon, as the loader sees it: cpu-backend's, and
 * cuda-backend's (which loads its addon with {@link loadAddon} and this description).
 */
export interface NativePackage {
  /** npm name, e.g. `@embedstack/cpu-backend`; the build commands name it. */
  name: string;
  /** What the messages call the addon, e.g. `The native CPU backend`. */
  title: string;
  /** The package's root directory (package.json, build/, prebuilds/). */
  root: string;
  /** File name of the source build's addon in build/Release, e.g. `embedstack_cpu.node`. */
  addonFile: string;
  /** A clause after the build command, e.g. what a CUDA compiler adds. Default: none. */
  buildNote?: string;
  /**
   * Refuses a binding that loads and has the table ABI but is not this package's
   * addon: returns the reason (it is recorded as a stale build), or null to accept.
   * Default: accept.
   */
  check?: (binding: unknown) => string | null;
}

/** One candidate addon file the loader tried, and why it failed. */
export interface AddonAttempt {
  /** Path of the `.node` file tried. */
  path: string;
  /** The load error's message. */
  error: string;
}

/** The outcome of loading the native addon ({@link loadAddon}): the binding, or why there is none. */
export interface AddonLoad {
  /** The loaded addon, or null when none could be loaded. */
  binding: NativeBinding | null;
  /** The path that loaded. */
  path: string | null;
  /** Every candidate tried that failed, in order. */
  attempts: AddonAttempt[];
  /** Why the addon is unusable and how to fix it (null when loaded). */
  reason: string | null;
  /**
   * The CPU level of the code that runs (null when nothing loaded): a prebuilt
   * binary's level, or for a source build the level of the kernel clones GCC picks.
   */
  level: CpuLevel | null;
  /** 'prebuilt' (prebuilds/), 'source' (compiled on this machine) or null. */
  build: 'prebuilt' | 'source' | null;
}

const packageRoot = fileURLToPath(new URL('..', import.meta.url));

/** cpu-backend itself. */
export const CPU_PACKAGE: NativePackage = { name: '@embedstack/cpu-backend', title: 'The native CPU backend', root: packageRoot, addonFile: ADDON_FILE };

/** A workspace checkout (TypeScript sources present) rather than an installed package. */
function inWorkspace(root: string): boolean {
  return existsSync(join(root, 'src'));
}

/** The shell commands that fix a package's addon ({@link addonCommands}). */
export interface AddonCommands {
  /** Builds the addon from source where there is no build. */
  build: string;
  /** Rebuilds it (another Node ABI, platform or toolchain; a stale build). */
  rebuild: string;
  /** Rebuilds the package's prebuilt binaries (a workspace checkout). */
  prebuild: string;
}

/**
 * The commands that fix a package's addon: in a workspace checkout with pnpm, in an
 * installed package with its install script (`node <root>/scripts/install.cjs --build`).
 */
export function addonCommands(pkg: NativePackage): AddonCommands {
  checkPackage(pkg);
  const ws = inWorkspace(pkg.root);
  const build = ws ? `pnpm --filter ${pkg.name} build` : `node ${quote(join(pkg.root, 'scripts', 'install.cjs'))} --build`;
  return { build, rebuild: ws ? `pnpm --filter ${pkg.name} rebuild` : build, prebuild: `pnpm --filter ${pkg.name} build:prebuilds --all` };
}

function quote(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : JSON.stringify(path);
}

/**
 * The prebuilt candidates of a package for this process: its platform's binaries
 * from the best of `levels` down (baseline: the platform directory's file), or,
 * when the package has none for this platform, that directory (a candidate that
 * fails saying so).
 */
export function prebuiltCandidates(root: string, levels: readonly CpuLevel[] = ['baseline']): string[] {
  if (typeof root !== 'string') throw invalidParameter('root', 'a package directory', root, InvalidTypeError);
  if (!Array.isArray(levels)) throw invalidParameter('levels', 'an array of CPU levels', levels, InvalidTypeError);
  const { match } = matchPrebuild(root);
  return match ? [...levels].reverse().map((l) => levelPath(match, l)) : [join(root, 'prebuilds', platformTuple())];
}

/**
 * Where the addon is looked for, in order, plus a problem that rules every candidate out (a bad
 * EMBEDSTACK_CPU, or a bad value of a variable the addon reads itself: nativeEnv.ts).
 */
function plan(env: NodeJS.ProcessEnv): { candidates: string[]; problem: string | null } {
  if (typeof env !== 'object' || env === null) throw invalidParameter('env', 'an environment object (process.env)', env, InvalidTypeError);
  const envProblem = nativeEnvProblem(env);
  if (envProblem !== null) return { candidates: [], problem: envProblem };
  const override = env.EMBEDSTACK_CPU_ADDON;
  if (override !== undefined && typeof override !== 'string') throw invalidParameter('env.EMBEDSTACK_CPU_ADDON', 'a string', override, InvalidTypeError);
  if (override !== undefined && override !== '') {
    if (override.endsWith('.node')) return { candidates: [override], problem: null };
    return { candidates: [join(override, ADDON_FILE), join(override, 'build', 'Release', ADDON_FILE)], problem: null };
  }
  const supported = supportedCpuLevels();
  const request = requestedCpuLevel(env, supported);
  if (request.problem !== null) return { candidates: [], problem: request.problem };
  const build = (d: string) => join(packageRoot, 'build', d, ADDON_FILE);
  if (request.level !== null) {
    const { match, available } = matchPrebuild(packageRoot);
    if (!match) {
      const has = available.length > 0 ? `it has ${available.join(', ')}` : 'it has none';
      return {
        candidates: [],
        problem:
          `EMBEDSTACK_CPU=${request.level} selects a prebuilt binary, and this package has none for ${platformTuple()} (${has}; ` +
          `a source build picks its kernels' level itself). ${inWorkspace(packageRoot) ? `Build them with \`${addonCommands(CPU_PACKAGE).prebuild}\`, or unset` : 'Unset'} EMBEDSTACK_CPU`,
      };
    }
    return { candidates: [levelPath(match, request.level)], problem: null };
  }
  return { candidates: [build('Release'), build('Debug'), ...prebuiltCandidates(packageRoot, supported), build('')], problem: null };
}

/** Where the addon is looked for, in order (empty when EMBEDSTACK_CPU rules everything out). */
export function candidatePaths(env: NodeJS.ProcessEnv = process.env): string[] {
  return plan(env).candidates;
}

function has(command: string): boolean {
  const r = spawnSync(command, ['--version'], { stdio: 'ignore', timeout: 5000 });
  return r.error === undefined && r.status === 0;
}

type Cause = 'missing' | 'abi' | 'platform' | 'libc' | 'stale' | 'stale-prebuild' | 'other';

function causeOf(message: string): Cause {
  // The loader's own errors first: they name files (a sidecar's name holds the libc tag, e.g. `.glibc.node.json`).
  if (message.startsWith('stale prebuilt binary')) return 'stale-prebuild';
  if (message.startsWith('stale build')) return 'stale';
  if (/cannot find module|ENOENT|no such file/i.test(message)) return 'missing';
  if (/NODE_MODULE_VERSION|different Node\.js version|undefined symbol|napi_|node-api/i.test(message)) return 'abi';
  if (/GLIBC|GLIBCXX|musl|libstdc\+\+|libgcc_s/i.test(message)) return 'libc';
  if (/ELF|wrong ELF class|not a valid Win32|incompatible architecture|mach-o|exec format/i.test(message)) return 'platform';
  return 'other';
}

/** e.g. "linux-x64 (glibc), Node 20.20.2 (Node-API 9)". */
export function describePlatform(): string {
  const c = libc();
  return `${platformTuple()}${c ? ` (${c})` : ''}, Node ${process.versions.node} (Node-API ${process.versions.napi ?? '?'})`;
}

/**
 * The fix for the most telling failure, as one sentence with the command to run.
 *
 * @param toolchain whether cmake and a C++ compiler are installed (default: asks the PATH)
 * @param pkg whose addon it is (default: cpu-backend's)
 */
export function explain(attempts: AddonAttempt[], toolchain: () => { cmake: boolean; compiler: boolean } = detectToolchain, pkg: NativePackage = CPU_PACKAGE): string {
  if (!Array.isArray(attempts) || attempts.some((a) => typeof a !== 'object' || a === null || typeof a.path !== 'string' || typeof a.error !== 'string')) {
    throw invalidParameter('attempts', 'an array of { path, error } strings', attempts, InvalidTypeError);
  }
  if (typeof toolchain !== 'function') throw invalidParameter('toolchain', 'a function', toolchain, InvalidTypeError);
  checkPackage(pkg);
  const { build: BUILD_COMMAND, rebuild: REBUILD_COMMAND, prebuild: PREBUILD_COMMAND } = addonCommands(pkg);
  const causes = attempts.map((a) => causeOf(a.error));
  const tried = attempts.map((a) => `\n  - ${a.path}: ${a.error.split('\n')[0]}`).join('');
  const head = `${pkg.title} (${pkg.name}) could not be loaded on ${describePlatform()}. Tried:${tried}\n`;
  const note = pkg.buildNote ? ` (${pkg.buildNote})` : '';
  /** The build command, preceded by the toolchain install when cmake or a compiler is missing. */
  const build = (command: string, what: string): string => {
    const t = toolchain();
    if (t.cmake && t.compiler) return `${what}: run \`${command}\`${note}.`;
    const missing = [!t.cmake ? 'cmake' : null, !t.compiler ? 'a C++17 compiler (g++ or clang++)' : null].filter(Boolean).join(' and ');
    return (
      `${what}, and ${missing} ${!t.cmake && !t.compiler ? 'are' : 'is'} not installed: ` +
      `install them (Debian/Ubuntu: \`apt-get install -y cmake g++\`; macOS: \`xcode-select --install && brew install cmake\`), ` +
      `then run \`${command}\`${note}.`
    );
  };
  if (causes.includes('abi')) return `${head}${build(REBUILD_COMMAND, 'It was built for another Node.js version (Node-API ABI mismatch); rebuild it')}`;
  if (causes.includes('platform')) return `${head}${build(REBUILD_COMMAND, 'It was built for another platform or CPU architecture; rebuild it on this machine')}`;
  if (causes.includes('stale-prebuild')) return `${head}${build(PREBUILD_COMMAND, 'The prebuilt binaries are older than the native sources here; rebuild them')}`;
  if (causes.includes('stale')) return `${head}${build(REBUILD_COMMAND, 'The build is older than the JavaScript side (stale build); rebuild it')}`;
  if (causes.includes('libc')) {
    return `${head}${build(BUILD_COMMAND, 'The prebuilt binary needs a newer C library than this system has (glibc >= 2.34); build it from source')}`;
  }
  if (causes.length > 0 && causes.every((c) => c === 'missing')) {
    return `${head}${build(BUILD_COMMAND, 'It is not built (no source build, and no prebuilt binary for this platform)')}`;
  }
  return `${head}${build(REBUILD_COMMAND, 'Rebuild it; if that fails, the errors above say why')}`;
}

function checkPackage(pkg: NativePackage): void {
  const p = pkg as Partial<NativePackage> | null;
  if (typeof p !== 'object' || p === null || typeof p.name !== 'string' || typeof p.title !== 'string' || typeof p.root !== 'string' || typeof p.addonFile !== 'string') {
    throw invalidParameter('pkg', 'a NativePackage ({ name, title, root, addonFile })', pkg, InvalidTypeError);
  }
  if (p.check !== undefined && typeof p.check !== 'function') throw invalidParameter('pkg.check', 'a function', p.check, InvalidTypeError);
}

function detectToolchain(): { cmake: boolean; compiler: boolean } {
  return { cmake: has('cmake'), compiler: has('c++') || has('g++') || has('clang++') };
}

/** A prebuilds/<platform>-<arch> candidate that is a directory: this platform has no prebuilt binary. */
function noPrebuildError(path: string): string | null {
  const parts = path.split(/[\\/]/);
  if (parts[parts.length - 2] !== 'prebuilds') return null;
  const { available } = matchPrebuild(prebuildRoot(path) ?? packageRoot);
  return `no such file (ENOENT): no prebuilt binary for ${platformTuple()} in this package (it has ${available.length > 0 ? available.join(', ') : 'none'})`;
}

const sourceHashes = new Map<string, string>();

/**
 * The staleness guard of a workspace checkout: why the prebuilt binary at `path`
 * was not built from the native sources beside it (its `.node.json` sidecar,
 * written by scripts/prebuild.mjs, records their hash), or null when it was, when
 * the package is installed (its tarball was checked by `prepack`), or when the folder
 * holding prebuilds/ is no package with native sources (an app's own copy of a
 * binary). Never throws: sources that cannot be read are the reason.
 */
function prebuildStaleness(path: string): string | null {
  const root = prebuildRoot(path);
  const script = join(packageRoot, 'scripts', 'native-sources.cjs');
  if (root === null || !inWorkspace(root) || !existsSync(script)) return null;
  try {
    const sources = createRequire(import.meta.url)(script) as {
      hasNativeSources(root: string): boolean;
      sourceHash(root: string): string;
      staleness(binary: string, hash: string): string | null;
    };
    let hash = sourceHashes.get(root);
    if (hash === undefined) {
      if (!sources.hasNativeSources(root)) return null;
      hash = sources.sourceHash(root);
      sourceHashes.set(root, hash);
    }
    return sources.staleness(path, hash);
  } catch (e) {
    return `its native sources could not be hashed (${e instanceof Error ? e.message : String(e)})`;
  }
}

/**
 * Tries each candidate; returns the first binding that loads and matches this build's ABI.
 * Without `candidates`: the candidates of `env` (see the top of this file), or, when
 * EMBEDSTACK_CPU asks for what cannot run, an unusable load saying why. With or without
 * them, a variable the addon reads itself set to a value it would not accept
 * (nativeEnv.ts: EMBEDSTACK_CPU_THREADS, EMBEDSTACK_CPU_SPIN_US, EMBEDSTACK_TUNE_MALLOC)
 * is an unusable load saying why, not a default taken silently. In a workspace
 * checkout a prebuilt binary not built from the sources there is skipped (a stale
 * prebuilt binary, with the command that rebuilds it).
 *
 * @param pkg whose addon it is (default: cpu-backend's; `candidates` is then required
 *   for another package)
 */
export function loadAddon(candidates?: string[], env: NodeJS.ProcessEnv = process.env, pkg: NativePackage = CPU_PACKAGE): AddonLoad {
  checkPackage(pkg);
  const envProblem = nativeEnvProblem(env);
  if (envProblem !== null) return { binding: null, path: null, attempts: [], reason: `${pkg.title} (${pkg.name}) is not loaded: ${envProblem}.`, level: null, build: null };
  let list = candidates;
  if (list === undefined) {
    if (pkg !== CPU_PACKAGE) throw invalidParameter('candidates', `the addon paths of ${pkg.name}`, candidates, InvalidTypeError);
    const p = plan(env);
    if (p.problem !== null) return { binding: null, path: null, attempts: [], reason: `${pkg.title} (${pkg.name}) is not loaded: ${p.problem}.`, level: null, build: null };
    list = p.candidates;
  }
  if (!Array.isArray(list) || list.some((c) => typeof c !== 'string')) {
    throw invalidParameter('candidates', 'an array of addon paths', candidates, InvalidTypeError);
  }
  const require = createRequire(import.meta.url);
  const attempts: AddonAttempt[] = [];
  for (const path of list) {
    if (!existsSync(path) || !statSync(path).isFile()) {
      attempts.push({ path, error: noPrebuildError(path) ?? 'no such file (ENOENT)' });
      continue;
    }
    const prebuilt = levelOfPath(path);
    const stale = prebuilt ? prebuildStaleness(path) : null;
    if (stale !== null) {
      attempts.push({ path, error: `stale prebuilt binary: ${stale}` });
      continue;
    }
    try {
      const binding = require(path) as NativeBinding;
      const fields = binding.abiFields;
      if (!fields || fields.table !== TABLE_FIELDS || fields.optimizer !== OPTIMIZER_FIELDS || fields.plan !== PLAN_FIELDS) {
        attempts.push({ path, error: `stale build: its ABI (${JSON.stringify(fields)}) differs from this package's` });
        continue;
      }
      const refused = pkg.check?.(binding) ?? null;
      if (refused !== null) {
        attempts.push({ path, error: refused });
        continue;
      }
      loadedByPackage.set(pkg, (loadedByPackage.get(pkg) ?? new Set()).add(binding));
      return { binding, path, attempts, reason: null, level: prebuilt ?? sourceBuildLevel(), build: prebuilt ? 'prebuilt' : 'source' };
    } catch (e) {
      attempts.push({ path, error: e instanceof Error ? e.message : String(e) });
    }
  }
  let reason = explain(attempts, undefined, pkg);
  const override = candidates === undefined ? env.EMBEDSTACK_CPU_ADDON : undefined;
  if (override) reason += ` EMBEDSTACK_CPU_ADDON=${JSON.stringify(override)} chose the paths tried: point it to a built ${ADDON_FILE} (or a folder holding one), or unset it to load this package's own build or prebuilt binary.`;
  return { binding: null, path: null, attempts, reason, level: null, build: null };
}

/** The bindings {@link loadAddon} returned, by package (a Set: an addon file loads once, require caches it). */
const loadedByPackage = new Map<NativePackage, Set<unknown>>();

/** Empties a binding's result cache; 0 for none, or a binding without `clearResultCache` (built before it). */
function clearResultCacheOf(binding: unknown): number {
  const clear = (binding as { clearResultCache?: unknown } | null | undefined)?.clearResultCache;
  return typeof clear === 'function' ? (clear as () => number).call(binding) : 0;
}

/** A backend's addon load, and what empties the result caches it may have filled ({@link backendLoad}). */
export interface BackendLoad<L> {
  /** The load the backend calls: its custom one, or the process-wide one. */
  load: () => L;
  /** Empties the result caches and returns their bytes; loads nothing. */
  clearResultCache: () => number;
}

/**
 * The load of a backend (CpuBackend, CudaBackend) and its `clearResultCache()`, which
 * loads nothing: with a custom `load`, it empties the cache of that load's binding once
 * the backend called it (0 before); else that of every addon of `pkg` that loadAddon
 * loaded in this process (usually one; 0 when none did). A binding without the function
 * (an addon built before it) counts 0.
 */
export function backendLoad<
  L extends {
    /** The loaded addon's functions (its `clearResultCache`, when it has one, is called). */
    binding: unknown;
  },
>(custom: (() => L) | undefined, processWide: () => L, pkg: NativePackage): BackendLoad<L> {
  if (custom !== undefined && typeof custom !== 'function') throw invalidParameter('load', 'a function', custom, InvalidTypeError);
  if (typeof processWide !== 'function') throw invalidParameter('processWide', 'a function', processWide, InvalidTypeError);
  checkPackage(pkg);
  if (custom === undefined) {
    return { load: processWide, clearResultCache: () => [...(loadedByPackage.get(pkg) ?? [])].reduce<number>((sum, b) => sum + clearResultCacheOf(b), 0) };
  }
  let called = false;
  return {
    load: () => {
      called = true;
      return custom();
    },
    clearResultCache: () => (called ? clearResultCacheOf(custom().binding) : 0),
  };
}

let cached: AddonLoad | undefined;

/** The process-wide load (first call loads; EMBEDSTACK_CPU_ADDON and EMBEDSTACK_CPU are read then). */
export function addon(): AddonLoad {
  cached ??= loadAddon();
  return cached;
}
