/**
 * The demo's training half: 26 embedding tables trained with the TPU-embedding API
 * (Adagrad, in core's native code) under a logistic head in TensorFlow.js (Adam),
 * both in one step through @embedstack/tfjs's TPUEmbeddingLayer.
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';

// tfjs's cpu backend suggests tfjs-node on first use; the demo runs on cpu on purpose.
tf.env().set('PROD', true);
import * as tfl from '@tensorflow/tfjs-layers';
import { initializers } from '@embedstack/core';
import { Adagrad, FeatureConfig, TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { TPUEmbeddingLayer } from '@embedstack/tfjs';
import type { ClickBatch } from './data.js';
import { auc, logLoss } from './metrics.js';

export interface ModelOptions {
  features: number;
  vocab: number;
  /** Embedding width. */
  dim: number;
  /** Adagrad learning rate of the embeddings. */
  embeddingRate: number;
  /** Adam learning rate of the head. */
  headRate: number;
  /** Examples per training step (fixed: the TPU embedding's global batch). */
  batchSize: number;
  seed: number;
}

/** Feature names in the order the layer concatenates them (sorted keys): C01..C26. */
export function featureNames(n: number): string[] {
  return Array.from({ length: n }, (_, f) => `C${String(f + 1).padStart(2, '0')}`);
}

export function tableConfigs(o: ModelOptions): TableConfig[] {
  return featureNames(o.features).map(
    (name) => new TableConfig({ vocabularySize: o.vocab, dim: o.dim, name, initializer: initializers.truncatedNormal(0, 0.05) }),
  );
}

export function createEmbedding(configs: readonly TableConfig[], embeddingRate: number): TPUEmbedding {
  const featureConfig = Object.fromEntries(configs.map((table) => [table.name, new FeatureConfig({ table })]));
  return new TPUEmbedding({ featureConfig, optimizer: new Adagrad({ learningRate: embeddingRate }) });
}

export interface Evaluation {
  loss: number;
  auc: number;
  /** Click probabilities of the examples, in order. */
  predictions: Float32Array;
}

export class ClickModel {
  readonly configs: TableConfig[];
  readonly embedding: TPUEmbedding;
  readonly layer: TPUEmbeddingLayer;
  /** The dense head: one logistic unit over the concatenated embeddings. */
  readonly head: tfl.layers.Layer;
  readonly model: tfl.LayersModel;
  readonly #optimizer: tf.Optimizer;
  readonly #names: string[];

  constructor(readonly options: ModelOptions) {
    this.configs = tableConfigs(options);
    this.#names = featureNames(options.features);
    this.embedding = createEmbedding(this.configs, options.embeddingRate);
    this.layer = new TPUEmbeddingLayer({ embedding: this.embedding as never });
    this.head = tfl.layers.dense({ units: 1, kernelInitializer: tfl.initializers.glorotUniform({ seed: options.seed }), name: 'head' });
    const input = tfl.input({ shape: [], dtype: 'int32' });
    this.model = tfl.model({ inputs: input, outputs: this.head.apply(this.layer.apply(input)) as tfl.SymbolicTensor });
    this.#optimizer = tf.train.adam(options.headRate);
  }

  #features(b: ClickBatch): Record<string, Int32Array> {
    return Object.fromEntries(this.#names.map((name, f) => [name, b.ids[f]!]));
  }

  /** One training step on `b`: the head by Adam, the rows by Adagrad. @returns the batch's mean log-loss */
  async step(b: ClickBatch): Promise<number> {
    const x = await this.layer.lookup(this.#features(b) as never);
    const labels = tf.tensor2d(b.labels, [b.labels.length, 1]);
    const loss = this.#optimizer.minimize(() => tf.losses.sigmoidCrossEntropy(labels, this.model.apply(x) as tf.Tensor) as tf.Scalar, true)!;
    const value = loss.dataSync()[0]!;
    tf.dispose([loss, labels]);
    await this.layer.flush();
    return value;
  }

  /**
   * Click probabilities of `b` (no training), a training batch of `batchSize` examples
   * at a time (the TPU embedding's batch is fixed; a short last block is padded with id
   * 0 and the padding's outputs dropped).
   */
  async predict(b: ClickBatch): Promise<Float32Array> {
    await this.layer.flush();
    const n = b.labels.length;
    const block = this.options.batchSize;
    const out = new Float32Array(n);
    for (let at = 0; at < n; at += block) {
      const m = Math.min(block, n - at);
      const ids = b.ids.map((col) => {
        const padded = new Int32Array(block);
        padded.set(col.subarray(at, at + m));
        return padded;
      });
      const x = await this.layer.lookup(this.#features({ ids, labels: b.labels, truth: b.truth }) as never, { training: false });
      const p = tf.tidy(() => tf.sigmoid(this.model.apply(x) as tf.Tensor));
      out.set((p.dataSync() as Float32Array).subarray(0, m), at);
      p.dispose();
    }
    return out;
  }

  async evaluate(b: ClickBatch): Promise<Evaluation> {
    const predictions = await this.predict(b);
    return { loss: logLoss(predictions, b.labels), auc: auc(predictions, b.labels), predictions };
  }

  /** The head's probabilities for given activations [n, features * dim] (the serving path). */
  predictFromActivations(acts: Float32Array, n: number): Float32Array {
    const p = tf.tidy(() => tf.sigmoid(this.head.apply(tf.tensor2d(acts, [n, this.options.features * this.options.dim])) as tf.Tensor));
    const out = p.dataSync() as Float32Array;
    p.dispose();
    return out;
  }

  dispose(): void {
    this.model.dispose();
    this.#optimizer.dispose();
    this.embedding.dispose();
  }
}
