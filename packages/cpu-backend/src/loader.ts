import { InvalidTypeError, invalidParameter } from '@embedstack/core';
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OPTIMIZER_FIELDS, PLAN_FIELDS, TABLE_FIELDS } from './abi.js';
import type { NativeBinding } from './native.js';

/**
 * Finds and loads the native addon, and explains itself when it cannot (sharp's
 * lib/sharp.mjs): every candidate path is tried, each failure is kept, and the
 * reason names the fix for its cause (no toolchain, not built, another Node ABI
 * or platform, a stale build). Never throws.
 *
 * Candidates: `EMBEDSTACK_CPU_ADDON` (a .node file or a directory holding one, or
 * build/Release below it) when set; else build/Release, build/Debug and build
 * under the package root.
 */

export const ADDON_FILE = 'embedstack_cpu.node';

export interface AddonAttempt {
  path: string;
  error: string;
}

export interface AddonLoad {
  binding: NativeBinding | null;
  /** The path that loaded. */
  path: string | null;
  attempts: AddonAttempt[];
  /** Why the addon is unusable and how to fix it (null when loaded). */
  reason: string | null;
}

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const BUILD_COMMAND = 'pnpm --filter @embedstack/cpu-backend build';
const REBUILD_COMMAND = 'pnpm --filter @embedstack/cpu-backend rebuild';

/** Where the addon is looked for, in order. */
export function candidatePaths(env: NodeJS.ProcessEnv = process.env): string[] {
  if (typeof env !== 'object' || env === null) throw invalidParameter('env', 'an environment object (process.env)', env, InvalidTypeError);
  const override = env.EMBEDSTACK_CPU_ADDON;
  if (override !== undefined && typeof override !== 'string') throw invalidParameter('env.EMBEDSTACK_CPU_ADDON', 'a string', override, InvalidTypeError);
  if (override !== undefined && override !== '') {
    if (override.endsWith('.node')) return [override];
    return [join(override, ADDON_FILE), join(override, 'build', 'Release', ADDON_FILE)];
  }
  return ['Release', 'Debug', ''].map((d) => join(packageRoot, 'build', d, ADDON_FILE));
}

function has(command: string): boolean {
  const r = spawnSync(command, ['--version'], { stdio: 'ignore', timeout: 5000 });
  return r.error === undefined && r.status === 0;
}

type Cause = 'missing' | 'abi' | 'platform' | 'stale' | 'other';

function causeOf(message: string): Cause {
  if (/cannot find module|ENOENT|no such file/i.test(message)) return 'missing';
  if (/NODE_MODULE_VERSION|different Node\.js version|undefined symbol|napi_|node-api/i.test(message)) return 'abi';
  if (/ELF|wrong ELF class|not a valid Win32|incompatible architecture|mach-o|exec format/i.test(message)) return 'platform';
  if (/stale build/i.test(message)) return 'stale';
  return 'other';
}

/** The fix for the most telling failure, as one sentence with the command to run. */
export function explain(attempts: AddonAttempt[], toolchain: () => { cmake: boolean; compiler: boolean } = detectToolchain): string {
  if (!Array.isArray(attempts) || attempts.some((a) => typeof a !== 'object' || a === null || typeof a.path !== 'string' || typeof a.error !== 'string')) {
    throw invalidParameter('attempts', 'an array of { path, error } strings', attempts, InvalidTypeError);
  }
  if (typeof toolchain !== 'function') throw invalidParameter('toolchain', 'a function', toolchain, InvalidTypeError);
  const causes = attempts.map((a) => causeOf(a.error));
  const tried = attempts.map((a) => `\n  - ${a.path}: ${a.error.split('\n')[0]}`).join('');
  const head = `The native CPU backend (@embedstack/cpu-backend) could not be loaded. Tried:${tried}\n`;
  if (causes.includes('abi')) {
    return `${head}It was built for another Node.js version (Node-API ABI mismatch): rebuild it with \`${REBUILD_COMMAND}\`.`;
  }
  if (causes.includes('platform')) {
    return `${head}It was built for another platform or CPU architecture: rebuild it on this machine with \`${REBUILD_COMMAND}\`.`;
  }
  if (causes.includes('stale')) {
    return `${head}The build is older than the JavaScript side (stale build): rebuild it with \`${REBUILD_COMMAND}\`.`;
  }
  if (causes.length > 0 && causes.every((c) => c === 'missing')) {
    const t = toolchain();
    if (!t.cmake || !t.compiler) {
      const missing = [!t.cmake ? 'cmake' : null, !t.compiler ? 'a C++17 compiler (g++ or clang++)' : null].filter(Boolean).join(' and ');
      return (
        `${head}It is not built, and ${missing} ${!t.cmake && !t.compiler ? 'are' : 'is'} not installed: ` +
        `install them (Debian/Ubuntu: \`apt-get install -y cmake g++\`; macOS: \`xcode-select --install && brew install cmake\`), ` +
        `then run \`${BUILD_COMMAND}\`.`
      );
    }
    return `${head}It is not built: run \`${BUILD_COMMAND}\` (or \`npx cmake-js compile --out build\` in packages/cpu-backend).`;
  }
  return `${head}Rebuild it with \`${REBUILD_COMMAND}\`; if that fails, the errors above say why.`;
}

function detectToolchain(): { cmake: boolean; compiler: boolean } {
  return { cmake: has('cmake'), compiler: has('c++') || has('g++') || has('clang++') };
}

/** Tries each candidate; returns the first binding that loads and matches this build's ABI. */
export function loadAddon(candidates: string[] = candidatePaths()): AddonLoad {
  if (!Array.isArray(candidates) || candidates.some((c) => typeof c !== 'string')) {
    throw invalidParameter('candidates', 'an array of addon paths', candidates, InvalidTypeError);
  }
  const require = createRequire(import.meta.url);
  const attempts: AddonAttempt[] = [];
  for (const path of candidates) {
    if (!existsSync(path) || !statSync(path).isFile()) {
      attempts.push({ path, error: 'no such file (ENOENT)' });
      continue;
    }
    try {
      const binding = require(path) as NativeBinding;
      const fields = binding.abiFields;
      if (!fields || fields.table !== TABLE_FIELDS || fields.optimizer !== OPTIMIZER_FIELDS || fields.plan !== PLAN_FIELDS) {
        attempts.push({ path, error: `stale build: its ABI (${JSON.stringify(fields)}) differs from this package's` });
        continue;
      }
      return { binding, path, attempts, reason: null };
    } catch (e) {
      attempts.push({ path, error: e instanceof Error ? e.message : String(e) });
    }
  }
  return { binding: null, path: null, attempts, reason: explain(attempts) };
}

let cached: AddonLoad | undefined;

/** The process-wide load (first call loads; EMBEDSTACK_CPU_ADDON is read then). */
export function addon(): AddonLoad {
  cached ??= loadAddon();
  return cached;
}
