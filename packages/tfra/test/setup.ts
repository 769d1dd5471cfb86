// Test helper: picks the backend the tfra tests run on.
// Default: core's reference backend. `TFRA_TEST_BACKEND=cpu` runs them on the CPU backend,
// `TFRA_TEST_BACKEND=cuda-host` on the CUDA backend's host mode.
import { registerBackend, referenceBackend, setDefaultBackend } from '@embedstack/core';

/** The package registering each native backend (imported through a variable: its types exist only once built). */
const PACKAGES: Record<string, string> = { cpu: '@embedstack/cpu-backend', 'cuda-host': '@embedstack/cuda-backend' };

export async function useTestBackend(): Promise<string> {
  const wanted = process.env.TFRA_TEST_BACKEND ?? 'reference';
  const pkg = PACKAGES[wanted];
  if (pkg) {
    await import(/* @vite-ignore */ pkg);
    setDefaultBackend(wanted);
    return wanted;
  }
  registerBackend(referenceBackend);
  setDefaultBackend('reference');
  return 'reference';
}

let counter = 0;
/** A variable name unique within the test process. */
export function uniqueName(prefix = 'v'): string {
  return `${prefix}_${process.pid}_${++counter}`;
}

/** Rows of a flat [n*dim] array as nested number arrays (float32 values). */
export function rowsOf(data: Float32Array, dim: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < data.length; i += dim) out.push(Array.from(data.subarray(i, i + dim)));
  return out;
}

/** Keys -> sorted bigints. */
export function sortedKeys(keys: ArrayLike<bigint | number>): bigint[] {
  return Array.from(keys as ArrayLike<bigint | number>, (k) => BigInt(k)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Asserts an async call rejects with an EmbeddingError of `code` whose message contains every fragment. */
export async function expectError(p: Promise<unknown> | (() => unknown), code: string, ...fragments: string[]): Promise<Error> {
  let err: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    err = e;
  }
  if (!(err instanceof Error)) throw new Error(`expected an error with code ${code}, got none`);
  const e = err as Error & { code?: string };
  if (e.code !== code) throw new Error(`expected code ${code} but got ${e.code}: ${e.message}`);
  for (const f of fragments) if (!e.message.includes(f)) throw new Error(`expected message to contain "${f}": ${e.message}`);
  return e;
}
