import { InvalidTypeError, invalidParameter } from '@embedstack/core';
import { type AddonAttempt, type NativePackage, addonCommands, explain, loadAddon, prebuiltCandidates } from '@embedstack/cpu-backend';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { PLACEMENT_FIELDS, type CudaBinding } from './native.js';

/**
 * Finds and loads the CUDA backend's addon and explains itself when it cannot, with
 * cpu-backend's loader (the same candidate handling, table-ABI check, prebuilt-binary
 * matching, staleness guard and explanations; this file only names the package).
 * Candidates: `EMBEDSTACK_CUDA_ADDON` (a .node file, or a directory holding one or
 * build/Release below it) when set; else the source build (build/Release,
 * build/Debug), then this platform's prebuilt binary of the host mode
 * (prebuilds/<platform>-<arch>/, node-gyp-build's matching), then build/. A source
 * build comes first because only it can hold device code. Never throws.
 */

/** File name of the CUDA backend's native addon (a source build's build/Release/<this>). */
export const CUDA_ADDON_FILE = 'embedstack_cuda.node';

/** The outcome of loading the CUDA addon: the binding, or why there is none. */
export interface CudaAddonLoad {
  /** The loaded addon, or null when none could be loaded. */
  binding: CudaBinding | null;
  /** The path that loaded (null when none did). */
  path: string | null;
  /** Every candidate tried that failed, in order. */
  attempts: AddonAttempt[];
  /** Why the addon is unusable and how to fix it (null when loaded). */
  reason: string | null;
  /** 'prebuilt' (prebuilds/: the host mode only), 'source' (compiled on this machine) or null. */
  build: 'prebuilt' | 'source' | null;
}

const packageRoot = fileURLToPath(new URL('..', import.meta.url));

/** The CPU ABI (checked by the shared loader) plus this addon's own functions and placement vector. */
function isCudaBinding(b: unknown): b is CudaBinding {
  const x = b as Partial<CudaBinding> | null;
  return !!x && typeof x.deviceStatus === 'function' && typeof x.memoryBreakdown === 'function' && x.abiFields?.placement === PLACEMENT_FIELDS;
}

/** This package, as cpu-backend's loader sees it. */
export const CUDA_PACKAGE: NativePackage = {
  name: '@embedstack/cuda-backend',
  title: "The CUDA backend's addon",
  root: packageRoot,
  addonFile: CUDA_ADDON_FILE,
  buildNote: 'with nvcc on the PATH it also builds the device code',
  check: (b) => (isCudaBinding(b) ? null : 'stale build: not a CUDA backend addon of this version'),
};

/** Where the addon is looked for, in order. */
export function cudaCandidatePaths(env: NodeJS.ProcessEnv = process.env): string[] {
  if (typeof env !== 'object' || env === null) throw invalidParameter('env', 'an environment object (process.env)', env, InvalidTypeError);
  const override = env.EMBEDSTACK_CUDA_ADDON;
  if (override !== undefined && typeof override !== 'string') throw invalidParameter('env.EMBEDSTACK_CUDA_ADDON', 'a string', override, InvalidTypeError);
  if (override) {
    if (override.endsWith('.node')) return [override];
    return [join(override, CUDA_ADDON_FILE), join(override, 'build', 'Release', CUDA_ADDON_FILE)];
  }
  const build = (d: string) => join(packageRoot, 'build', d, CUDA_ADDON_FILE);
  return [build('Release'), build('Debug'), ...prebuiltCandidates(packageRoot), build('')];
}

/** One sentence per cause with the command that fixes it (cpu-backend's `explain` for this package). */
export function explainCudaAttempts(attempts: AddonAttempt[]): string {
  return explain(attempts, undefined, CUDA_PACKAGE);
}

/** Tries each candidate; returns the first binding that loads and matches this package's ABI. */
export function loadCudaAddon(candidates: string[] = cudaCandidatePaths()): CudaAddonLoad {
  if (!Array.isArray(candidates) || candidates.some((c) => typeof c !== 'string')) {
    throw invalidParameter('candidates', 'an array of addon paths', candidates, InvalidTypeError);
  }
  const load = loadAddon(candidates, process.env, CUDA_PACKAGE);
  const binding = load.binding as unknown;
  if (isCudaBinding(binding)) return { binding, path: load.path, attempts: load.attempts, reason: null, build: load.build };
  return { binding: null, path: null, attempts: load.attempts, reason: load.reason, build: null };
}

/**
 * Why a prebuilt binary cannot run the device mode, and the fix: prebuilt binaries
 * are the host mode only (see the README's "Install"); a device build is compiled
 * on the user's machine, with nvcc.
 */
export function prebuiltDeviceReason(path: string): string {
  const { rebuild } = addonCommands(CUDA_PACKAGE);
  return (
    `the loaded addon is the prebuilt binary of the host mode (${path}), which has no device code: ` +
    `install the CUDA toolkit (nvcc) and build from source with \`EMBEDSTACK_CUDA=on ${rebuild}\`; the host mode runs as backend 'cuda-host'`
  );
}

let cached: CudaAddonLoad | undefined;

/** The process-wide load (first call loads; EMBEDSTACK_CUDA_ADDON is read then). */
export function cudaAddon(): CudaAddonLoad {
  cached ??= loadCudaAddon();
  return cached;
}
