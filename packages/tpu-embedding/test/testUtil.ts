// Test helpers (not exported from the package): the spec's worked example and the backends to run on.
import { EmbeddingError, type EmbeddingBackend, RaggedTensor, referenceBackend, SparseTensor, Tensor } from '@embedstack/core';
import { expect } from 'vitest';
import { FeatureConfig, TableConfig, type TableInitializer } from '../src/config.js';
import type { EmbeddingOptimizer } from '../src/optimizers.js';
import { ReplicaStrategy } from '../src/strategy.js';
import { TPUEmbedding } from '../src/tpuEmbedding.js';

export interface BackendCase {
  name: string;
  backend: EmbeddingBackend | null;
  /** Why the backend is skipped (printed once). */
  reason?: string;
}

let cached: Promise<BackendCase[]> | null = null;

/** The package and export of each native backend (imported through a variable: their types exist only once built). */
const NATIVE: Record<string, [string, string]> = {
  cpu: ['@embedstack/cpu-backend', 'cpuBackend'],
  'cuda-host': ['@embedstack/cuda-backend', 'cudaHostBackend'],
};

/** A native backend's case, or a skipped one with the reason printed. */
async function nativeCase(name: string): Promise<BackendCase> {
  const [specifier, exported] = NATIVE[name]!;
  let reason: string;
  try {
    const m = (await import(/* @vite-ignore */ specifier)) as Record<string, unknown>;
    const b = m[exported] as EmbeddingBackend | undefined;
    if (b && b.isUsable()) return { name, backend: b };
    reason = b ? (b.unavailableReason?.() ?? `${exported} is not usable`) : `${specifier} exports no ${exported} yet`;
  } catch (e) {
    reason = `${specifier} failed to load: ${(e as Error).message}`;
  }
  console.log(`[tpu-embedding tests] ${name} backend skipped: ${reason}`);
  return { name, backend: null, reason };
}

/**
 * The reference backend plus the cpu backend when its native build loads; with
 * TPU_TEST_BACKEND=<name> (cpu, cuda-host) only that native backend.
 */
export function testBackends(): Promise<BackendCase[]> {
  cached ??= (async () => {
    const only = process.env.TPU_TEST_BACKEND;
    if (only && NATIVE[only]) return [await nativeCase(only)];
    return [{ name: 'reference', backend: referenceBackend }, await nativeCase('cpu')];
  })();
  return cached;
}

/** Row-major 0..n-1, as the spec's worked example initialises its tables. */
export const iota = (shape: [number, number]): Float32Array => Float32Array.from({ length: shape[0] * shape[1] }, (_, i) => i);

export const WATCHED = [[0], [0, 1], [0, 1], [1]];
export const FAVORITED = [[0, 1], [1], [0], [0, 1]];
export const FRIENDS = [[3], [0, 1, 2], [3], [0, 1, 2]];

export interface FixtureOptions {
  backend: EmbeddingBackend;
  optimizer?: EmbeddingOptimizer;
  videoCombiner?: 'sum' | 'mean' | 'sqrtn';
  userCombiner?: 'sum' | 'mean' | 'sqrtn';
  numReplicas?: number;
  numHosts?: number;
  pipeline?: boolean;
  initializer?: TableInitializer;
  friendsSequence?: number;
}

/** The worked example: video 8x4 (sum), user 16x2 (mean), features watched, favorited -> video, friends -> user. */
export function fixture(o: FixtureOptions) {
  const video = new TableConfig({ vocabularySize: 8, dim: 4, combiner: o.videoCombiner ?? 'sum', name: 'video', initializer: o.initializer ?? iota });
  const user = new TableConfig({ vocabularySize: 16, dim: 2, combiner: o.userCombiner ?? 'mean', name: 'user', initializer: o.initializer ?? iota });
  const featureConfig = {
    watched: new FeatureConfig({ table: video }),
    favorited: new FeatureConfig({ table: video }),
    friends: new FeatureConfig({ table: user, maxSequenceLength: o.friendsSequence ?? 0 }),
  };
  const emb = new TPUEmbedding({
    featureConfig,
    optimizer: o.optimizer,
    strategy: new ReplicaStrategy({ numReplicas: o.numReplicas ?? 1, numHosts: o.numHosts ?? 1 }),
    pipelineExecutionWithTensorCore: o.pipeline ?? false,
    backend: o.backend,
  });
  return { video, user, featureConfig, emb };
}

export function ragged(rows: number[][]): RaggedTensor<BigInt64Array> {
  return RaggedTensor.fromNestedArray(rows);
}

export function sparse(rows: number[][]): SparseTensor<BigInt64Array> {
  return SparseTensor.fromNestedArray(rows);
}

/** Float weights of the same layout as `rows`. */
export function raggedWeights(rows: number[][]): RaggedTensor<Float32Array> {
  return RaggedTensor.fromNestedArray(rows, { dtype: 'float32' });
}

export function sparseWeights(rows: number[][]): SparseTensor<Float32Array> {
  return SparseTensor.fromNestedArray(rows, { dtype: 'float32' });
}

/** Tensor -> nested JS numbers (for toEqual / closeTo checks). */
export function rows(t: Tensor): number[][] {
  const dim = t.shape[t.shape.length - 1]!;
  const out: number[][] = [];
  for (let i = 0; i < t.data.length; i += dim) out.push(Array.from(t.data.subarray(i, i + dim) as Float32Array));
  return out;
}

/** Asserts every element of `actual` is within `tol` (absolute + relative) of `expected`. */
export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 1e-5): void {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} != expected ${expected.length}`);
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (!(Math.abs(a - e) <= tol * (1 + Math.abs(e)))) {
      throw new Error(`element ${i}: ${a} is not within ${tol} of ${e}\nactual   ${Array.from(actual).join(', ')}\nexpected ${Array.from(expected).join(', ')}`);
    }
  }
}

/** Flattens nested number arrays. */
export function flat(rowsIn: number[][]): number[] {
  return rowsIn.flat();
}

/** Runs `fn` (sync or async) and checks that it fails with an EmbeddingError of `code` whose message names `argument`. */
export async function expectError(fn: () => unknown, code: string, argument: string | RegExp): Promise<EmbeddingError> {
  let caught: unknown;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  expect(caught, 'expected an error').toBeInstanceOf(EmbeddingError);
  const e = caught as EmbeddingError;
  expect(e.code).toBe(code);
  if (typeof argument === 'string') expect(e.message).toContain(argument);
  else expect(e.message).toMatch(argument);
  return e;
}
