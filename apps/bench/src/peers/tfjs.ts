/**
 * @tensorflow/tfjs-core peers on its 'cpu' (plain JS) and 'wasm' backends:
 * gather + reshape + sum/mean for the embedding bag (the wasm backend has no
 * UnsortedSegmentSum kernel), and a dense scatter + optimizer step for training.
 * Tensors live in the tfjs backend's memory; every helper disposes what it makes.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';

export type TfjsBackendName = 'cpu' | 'wasm';

let wasmPathSet = false;

/**
 * Switches tfjs to `name`. Returns null on success, else why it failed (the
 * caller prints it and goes on without this peer).
 */
export async function useTfjs(name: TfjsBackendName): Promise<string | null> {
  try {
    if (name === 'wasm' && !wasmPathSet) {
      const pkg = createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm/package.json');
      setWasmPaths(path.join(path.dirname(pkg), 'dist') + path.sep);
      wasmPathSet = true;
    }
    // Production mode: no debug checks, and no "install tfjs-node" banner on stderr.
    tf.enableProdMode();
    const ok = await tf.setBackend(name);
    await tf.ready();
    if (!ok || tf.getBackend() !== name) return `tf.setBackend('${name}') returned false`;
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

export function tfjsVersion(): string {
  return tf.version_core;
}

/** A [rows, dim] tensor copied from `values` on the current backend. */
export function tfjsTable(values: Float32Array, rows: number, dim: number): tf.Tensor2D {
  return tf.tensor2d(values, [rows, dim]);
}

/** Fixed-width bag: ids [nrows * perRow] -> [nrows, dim] sum or mean; data read back. */
export function tfjsBag(table: tf.Tensor2D, ids: Int32Array, nrows: number, perRow: number, mean: boolean): Float32Array {
  const dim = table.shape[1];
  const out = tf.tidy(() => {
    const rows = tf.reshape(tf.gather(table, tf.tensor1d(ids, 'int32')), [nrows, perRow, dim]);
    return mean ? tf.mean(rows, 1) : tf.sum(rows, 1);
  });
  const data = out.dataSync() as Float32Array;
  out.dispose();
  return data;
}

export type TfjsOptimizerName = 'sgd' | 'adagrad' | 'adam';

/** A dense [rows, dim] variable and an optimizer over it: one step per call of `step`. */
export class TfjsDenseTrainer {
  readonly variable: tf.Variable;
  readonly optimizer: tf.Optimizer;
  readonly rows: number;
  readonly dim: number;

  constructor(rows: number, dim: number, kind: TfjsOptimizerName) {
    this.rows = rows;
    this.dim = dim;
    this.variable = tf.variable(tf.zeros([rows, dim]), true, `bench_${kind}_${Date.now()}`);
    this.optimizer = kind === 'sgd' ? tf.train.sgd(0.01) : kind === 'adagrad' ? tf.train.adagrad(0.001, 0.1) : tf.train.adam(0.001);
  }

  /** Scatters the sparse gradient (duplicates summed) into a dense one and applies it. */
  step(keys: Int32Array, grads: Float32Array): void {
    tf.tidy(() => {
      const indices = tf.tensor2d(keys, [keys.length, 1], 'int32');
      const updates = tf.tensor2d(grads, [keys.length, this.dim]);
      const dense = tf.scatterND(indices, updates, [this.rows, this.dim]);
      this.optimizer.applyGradients({ [this.variable.name]: dense });
    });
    // Force completion: read back one element of the updated variable.
    tf.tidy(() => tf.slice(this.variable, [0, 0], [1, 1]).dataSync());
  }

  dispose(): void {
    this.optimizer.dispose();
    this.variable.dispose();
  }
}
