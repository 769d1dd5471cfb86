// Test helpers (not exported): the tfjs cpu backend, a seeded generator, a plain tfjs reference model.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { EmbeddingError } from '@embedstack/core';
import { expect } from 'vitest';

/** Selects tfjs's cpu backend (tfjs-node cannot install here; the cpu backend shares host arrays). */
export async function useCpu(): Promise<void> {
  await tf.setBackend('cpu');
  await tf.ready();
}

/** mulberry32: a small deterministic generator in [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Ragged rows of ids in [0, vocab) with 1..maxLen entries each (duplicates likely). */
export function raggedRows(r: () => number, batch: number, vocab: number, maxLen: number): number[][] {
  return Array.from({ length: batch }, () => Array.from({ length: 1 + Math.floor(r() * maxLen) }, () => Math.floor(r() * vocab)));
}

/**
 * The plain tfjs reference of a pooled lookup: `P @ gather(table, ids)`, P[r, j] the
 * combiner's weight of entry j in row r (sum 1, mean 1/n, sqrtn 1/sqrt(n)). tfjs's own
 * gather gradient sums duplicate ids.
 */
export function pooledReference(table: tf.Tensor2D, rows: number[][], combiner: 'sum' | 'mean' | 'sqrtn'): tf.Tensor2D {
  const flat = rows.flat();
  const p = new Float32Array(rows.length * flat.length);
  let j = 0;
  rows.forEach((row, r) => {
    const w = combiner === 'sum' ? 1 : combiner === 'mean' ? 1 / row.length : 1 / Math.sqrt(row.length);
    for (let k = 0; k < row.length; k++) p[r * flat.length + j++] = w;
  });
  return tf.matMul(tf.tensor2d(p, [rows.length, flat.length]), tf.gather(table, tf.tensor1d(flat, 'int32')));
}

/** Mean logistic loss of logits [batch, 1] against 0/1 labels. */
export function logLoss(logits: tf.Tensor, labels: tf.Tensor): tf.Scalar {
  return tf.losses.sigmoidCrossEntropy(labels, logits) as tf.Scalar;
}

/** Max |a - b| / max(1, |b|) over two arrays of the same length. */
export function maxRelDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!)));
  return m;
}

/** Runs `fn`, expecting a coded EmbeddingError naming `argument` in `.argument` and in the message. */
export function expectCoded(fn: () => unknown, code: string, argument: string): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(EmbeddingError);
  expect((err as EmbeddingError).code).toBe(code);
  expect((err as EmbeddingError).argument).toBe(argument);
  expect((err as Error).message).toContain(argument);
}
