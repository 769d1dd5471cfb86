import { InvalidTypeError, invalidParameter } from '@embedstack/core';
import { loadAddon as tryAddon, type AddonAttempt } from '@embedstack/cpu-backend';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { PLACEMENT_FIELDS, type CudaBinding } from './native.js';

/**
 * Finds and loads the CUDA backend's addon and explains itself when it cannot.
 * Candidates: `EMBEDSTACK_CUDA_ADDON` (a .node file, or a directory holding one or
 * build/Release below it) when set; else build/Release, build/Debug and build under
 * the package root. The addon's table ABI is the CPU backend's: a build whose
 * vector lengths differ from this package's is stale and skipped. Never throws.
 */

/** File name of the CUDA backend's native addon. */
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
}

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const BUILD = 'pnpm --filter @embedstack/cuda-backend build';
const REBUILD = 'pnpm --filter @embedstack/cuda-backend rebuild';

/** Where the addon is looked for, in order. */
export function cudaCandidatePaths(env: NodeJS.ProcessEnv = process.env): string[] {
  if (typeof env !== 'object' || env === null) throw invalidParameter('env', 'an environment object (process.env)', env, InvalidTypeError);
  const override = env.EMBEDSTACK_CUDA_ADDON;
  if (override !== undefined && typeof override !== 'string') throw invalidParameter('env.EMBEDSTACK_CUDA_ADDON', 'a string', override, InvalidTypeError);
  if (override) {
    if (override.endsWith('.node')) return [override];
    return [join(override, CUDA_ADDON_FILE), join(override, 'build', 'Release', CUDA_ADDON_FILE)];
  }
  return ['Release', 'Debug', ''].map((d) => join(packageRoot, 'build', d, CUDA_ADDON_FILE));
}

/** One sentence per cause with the command that fixes it. */
export function explainCudaAttempts(attempts: AddonAttempt[]): string {
  if (!Array.isArray(attempts) || attempts.some((a) => typeof a !== 'object' || a === null || typeof a.path !== 'string' || typeof a.error !== 'string')) {
    throw invalidParameter('attempts', 'an array of { path, error } strings', attempts, InvalidTypeError);
  }
  const tried = attempts.map((a) => `\n  - ${a.path}: ${a.error.split('\n')[0]}`).join('');
  const head = `The CUDA backend's addon (@embedstack/cuda-backend) could not be loaded. Tried:${tried}\n`;
  const errors = attempts.map((a) => a.error).join('\n');
  if (/NODE_MODULE_VERSION|undefined symbol|napi_|node-api/i.test(errors)) return `${head}It was built for another Node.js version or is incomplete: rebuild it with \`${REBUILD}\`.`;
  if (/ELF|wrong ELF class|exec format/i.test(errors)) return `${head}It was built for another platform: rebuild it on this machine with \`${REBUILD}\`.`;
  if (/stale build/i.test(errors)) return `${head}It is older than the JavaScript side (stale build): rebuild it with \`${REBUILD}\`.`;
  if (attempts.every((a) => /ENOENT/.test(a.error))) {
    return `${head}It is not built: run \`${BUILD}\` (needs cmake and a C++17 compiler; with nvcc it also builds the device code).`;
  }
  return `${head}Rebuild it with \`${REBUILD}\`; if that fails, the errors above say why.`;
}

/** The CPU ABI (checked by the CPU loader) plus this addon's own functions and placement vector. */
function isCudaBinding(b: unknown): b is CudaBinding {
  const x = b as Partial<CudaBinding> | null;
  return !!x && typeof x.deviceStatus === 'function' && typeof x.memoryBreakdown === 'function' && x.abiFields?.placement === PLACEMENT_FIELDS;
}

/** Tries each candidate; returns the first binding that loads and matches this package's ABI. */
export function loadCudaAddon(candidates: string[] = cudaCandidatePaths()): CudaAddonLoad {
  if (!Array.isArray(candidates) || candidates.some((c) => typeof c !== 'string')) {
    throw invalidParameter('candidates', 'an array of addon paths', candidates, InvalidTypeError);
  }
  // The CPU backend's loader tries the paths and checks the shared table ABI.
  const load = tryAddon(candidates);
  const attempts = [...load.attempts];
  const binding: unknown = load.binding;
  if (isCudaBinding(binding)) return { binding, path: load.path, attempts, reason: null };
  if (binding) attempts.push({ path: load.path ?? '?', error: 'stale build: not a CUDA backend addon of this version' });
  return { binding: null, path: null, attempts, reason: explainCudaAttempts(attempts) };
}

let cached: CudaAddonLoad | undefined;

/** The process-wide load (first call loads; EMBEDSTACK_CUDA_ADDON is read then). */
export function cudaAddon(): CudaAddonLoad {
  cached ??= loadCudaAddon();
  return cached;
}
