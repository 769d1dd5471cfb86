/**
 * The bench's own tiny native addon (apps/bench/native): plain C++ loops that are
 * peers independent of any embedstack backend. Arenas live in native memory
 * (freed by GC or `freeArena`); outputs are caller-owned Float32Arrays.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Opaque handle of a native float arena [rows, dim]. */
export type Arena = { readonly __arena: unique symbol };

/** Opaque handle of a hash-indexed layout's two arrays (index lines and 12-byte key/score records). */
export type HashLayout = { readonly __hashLayout: unique symbol };

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
  /**
   * The index (indexBytes / 64 lines, at least 1) and `rows` 12-byte records (key = row, score 0)
   * of a hash-indexed table's layout, every page written, for {@link NativePeers.hashBagReduce}.
   */
  createHashLayout(indexBytes: number, rows: number, threads?: number): HashLayout;
  freeHashLayout(layout: HashLayout): void;
  /**
   * The hash-indexed bag's ceiling: gatherReduce's output (the same bits), reading for each id
   * first a random line of the layout's index, then (from a word of that line) the id's record
   * (key compared, score stored), then its row. `tuning`: [variant (0 passes A, B, C; 1 A then
   * B with the pooling; 2 one pipelined loop), ids per chunk, index lines ahead, records and rows
   * ahead (into L2), rows ahead into L1, score stores (1) or not (0), records asked for writing (1)
   * or reading (0)]; default the fastest measured: variant 1 while index and records fit 8 MiB, else 0,
   * chunks of 1024, 64 / 32 / 8 ahead, score stores, records asked for reading.
   */
  hashBagReduce(layout: HashLayout, arena: Arena, splits: Int32Array, ids: Uint32Array, out: Float32Array, mean: boolean, threads: number, tuning?: Float64Array): void;
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
