import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import { join } from 'node:path';
import type { CpuLevel } from './cpuLevel.js';

/**
 * The prebuilt binaries shipped in the package, in prebuildify's layout
 * (scripts/prebuild.mjs writes them):
 *
 *   prebuilds/<platform>-<arch>/@embedstack+cpu-backend.napi[.glibc|.musl].node   baseline
 *   prebuilds/<platform>-<arch>/<level>/<the same file name>                     avx2, avx512 (x86-64)
 *
 * The platform directory and the file are chosen by node-gyp-build's own matching
 * (its parseTuple / matchTuple / parseTags / matchTags / compareTags: platform, arch,
 * libc, Node-API), so the choice is the one node-gyp-build would make; the CPU level
 * is the sub-directory.
 */

interface Tuple {
  name: string;
  platform: string;
  architectures: string[];
}
interface Tags {
  file: string;
}
interface NodeGypBuild {
  parseTuple(name: string): Tuple | undefined;
  matchTuple(platform: string, arch: string): (t: Tuple | undefined) => boolean;
  compareTuples(a: Tuple, b: Tuple): number;
  parseTags(file: string): Tags | undefined;
  matchTags(runtime: string, abi: string): (t: Tags | undefined) => boolean;
  compareTags(runtime: string): (a: Tags, b: Tags) => number;
}

const ngb = createRequire(import.meta.url)('node-gyp-build') as NodeGypBuild;

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** This process's platform tuple, e.g. `linux-x64`. */
export function platformTuple(): string {
  return `${platform()}-${arch()}`;
}

/** The C library node-gyp-build matches prebuilds against (musl on Alpine, or LIBC). */
export function libc(): 'glibc' | 'musl' | null {
  if (platform() !== 'linux') return null;
  if (process.env.LIBC === 'musl' || process.env.LIBC === 'glibc') return process.env.LIBC;
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return report?.header?.glibcVersionRuntime ? 'glibc' : 'musl';
}

export interface PrebuildMatch {
  /** The platform directory, e.g. <root>/prebuilds/linux-x64. */
  dir: string;
  /** The file name node-gyp-build picks there. */
  file: string;
}

/** The prebuild directory and file for this process, or null with the tuples the package has. */
export function matchPrebuild(root: string): { match: PrebuildMatch | null; available: string[] } {
  const base = join(root, 'prebuilds');
  const tuples = list(base)
    .map((n) => ngb.parseTuple(n))
    .filter((t): t is Tuple => t !== undefined);
  const available = tuples.map((t) => t.name).sort();
  const tuple = tuples.filter(ngb.matchTuple(platform(), arch())).sort(ngb.compareTuples)[0];
  if (!tuple) return { match: null, available };
  const dir = join(base, tuple.name);
  const winner = list(dir)
    .map((f) => ngb.parseTags(f))
    .filter((t): t is Tags => ngb.matchTags('node', process.versions.modules)(t))
    .sort(ngb.compareTags('node'))[0];
  return { match: winner ? { dir, file: winner.file } : null, available };
}

/** The path of a level's binary in a match (baseline: the platform directory itself). */
export function levelPath(match: PrebuildMatch, level: CpuLevel): string {
  return level === 'baseline' ? join(match.dir, match.file) : join(match.dir, level, match.file);
}

/** The level of a prebuilt binary's path (its sub-directory), or null for a path outside prebuilds/. */
export function levelOfPath(path: string): CpuLevel | null {
  const parts = path.split(/[\\/]/);
  const after = parts.length - 1 - parts.lastIndexOf('prebuilds');
  if (after === 2) return 'baseline';
  const sub = parts[parts.length - 2];
  return after === 3 && (sub === 'avx2' || sub === 'avx512') ? sub : null;
}

/** The package directory of a path under its prebuilds/ (the parent of the last `prebuilds` segment), or null. */
export function prebuildRoot(path: string): string | null {
  const parts = path.split(/[\\/]/);
  const i = parts.lastIndexOf('prebuilds');
  return i > 0 ? parts.slice(0, i).join('/') : null;
}
