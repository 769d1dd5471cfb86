/**
 * The bench's own tiny native addon (apps/bench/native): plain C++ loops that are
 * peers independent of any embedstack backend. Arenas live in native memory
 * (freed by GC or `freeArena`); outputs are caller-owned Float32Arrays.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Opaque handle of a native float arena [rows, dim]. */
export type Arena = { readonly __arena: unique symbol };

export interface NativePeers {
  /** Allocates and writes (makes resident) rows*dim floats, using `threads` threads. */
  createArena(rows: number, dim: number, threads?: number): Arena;
  freeArena(arena: Arena): void;
  /** Copies the whole arena into a twin buffer; returns bytes copied. */
  copyArena(arena: Arena, threads: number): number;
  /** out[i*dim..] = arena row rows[i]. */
  gather(arena: Arena, rows: Uint32Array, out: Float32Array, threads: number): void;
  /** out[r] = sum (mean) of the arena rows ids[splits[r]..splits[r+1]). */
  gatherReduce(arena: Arena, splits: Int32Array, ids: Uint32Array, out: Float32Array, mean: boolean, threads: number): void;
  hardwareThreads(): number;
  /** Tests: the lines gatherReduce prefetches for a row `startByte` past a 64-byte line start, as byte offsets of their starts. */
  rowLines(startByte: number, rowBytes: number): number[];
  /** Returns the C heap's free pages to the OS (glibc `malloc_trim(0)`); false where the C library has none. */
  trimHeap(): boolean;
}

let cached: NativePeers | undefined;

/** @throws Error saying how to build the addon when it is missing */
export function loadNative(): NativePeers {
  if (cached) return cached;
  // src/native.ts and dist/cli.js are both one level below apps/bench.
  const file = fileURLToPath(new URL('../build/Release/bench_native.node', import.meta.url));
  try {
    cached = createRequire(import.meta.url)(file) as NativePeers;
  } catch (e) {
    throw new Error(
      `The bench's native peer addon is not built (${file}): run \`npx pnpm@10.34.9 --filter @embedstack/bench build\` (${(e as Error).message})`,
    );
  }
  return cached;
}
