import * as tf from '@tensorflow/tfjs-core';
import { InvalidTypeError, Tensor, checkBoolean, checkOptions, invalidParameter } from '@embedstack/core';
import type { FeatureConfig, FeatureInput, FeatureWeight, Nest, PerFeature, TPUEmbedding } from '@embedstack/tpu-embedding';
import { fromTf } from './convert.js';
import { leavesOf, mapStructure } from './nest.js';
import { SparseEmbeddingLayer, type LookupPart, type SparseLayerOptions } from './sparseLayer.js';

/** Options of `new TPUEmbeddingLayer(...)`. */
export interface TPUEmbeddingLayerOptions<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> extends SparseLayerOptions {
  /**
   * The @embedstack/tpu-embedding `TPUEmbedding` whose features this layer looks up
   * (all of them: one layer per TPUEmbedding, since one `applyGradients` trains every
   * feature of a step). It needs optimizers (its own or per table) to train.
   */
  embedding: TPUEmbedding<F>;
}

/** Options of `TPUEmbeddingLayer.lookup`. */
export interface TPUEmbeddingLookupOptions<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> {
  /** Per-feature weights in the feature config's structure (see TPUEmbedding.enqueue). Default none. */
  weights?: PerFeature<F, FeatureWeight> | null;
  /** False: forward only (the backward then throws FAILED_PRECONDITION). Default true. */
  training?: boolean | null;
}

interface FeatureLeaf {
  table: { dim: number };
  maxSequenceLength: number;
  outputShape: readonly number[] | undefined;
}

function isFeatureLeaf(v: unknown): v is FeatureLeaf {
  return typeof v === 'object' && v !== null && 'table' in v && 'maxSequenceLength' in v;
}

/** A feature's activation shape as its config fixes it (dense ids of rank 2 without either give [batch, n, dim] too, seen at lookup). */
function featureShape(f: FeatureLeaf, batch: number | null): (number | null)[] {
  if (f.maxSequenceLength > 0) return [batch, f.maxSequenceLength, f.table.dim];
  if (f.outputShape && f.outputShape.length > 1) return [batch, ...f.outputShape.slice(1), f.table.dim];
  return [batch, f.table.dim];
}

function isEmbedding(v: unknown): v is TPUEmbedding<never> {
  const e = v as Partial<Record<'enqueue' | 'dequeue' | 'applyGradients', unknown>> | null;
  return typeof e === 'object' && e !== null && typeof e.enqueue === 'function' && typeof e.dequeue === 'function' && typeof e.applyGradients === 'function';
}

/** Leaves of feature inputs and weights: tfjs tensors become core Tensors (no copy on the cpu backend). */
function toCoreInputs(structure: unknown): unknown {
  return mapStructure(
    structure,
    (v) => v instanceof tf.Tensor,
    (leaf) => (leaf instanceof tf.Tensor ? fromTf(leaf) : leaf),
  );
}

/**
 * A tfjs layer over a `TPUEmbedding` (@embedstack/tpu-embedding): its output is the
 * activations of every feature, in the feature config's flatten order (object keys
 * sorted, arrays in order), concatenated (`output: 'concat'`, `[batch, Σ dims]`) or
 * one tensor per feature (`output: 'list'`). Lookups, combiners and the sparse
 * optimizer update are the TPUEmbedding's (`enqueue` / `dequeue` / `applyGradients`,
 * core ops in the backend); the layer moves the activations into tfjs and the
 * gradients back.
 *
 * ```
 * const x = await layer.lookup({ user: ragged, video: ids });   // enqueue + dequeue
 * optimizer.minimize(() => loss(head.apply(layer.apply(x))));   // dense step + emb.applyGradients
 * await layer.flush();                                          // the sparse step has run
 * ```
 */
export class TPUEmbeddingLayer<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> extends SparseEmbeddingLayer {
  static override className = 'EmbedstackTPUEmbedding';
  /** The TPUEmbedding this layer enqueues to and dequeues from. */
  readonly embedding: TPUEmbedding<F>;
  readonly #features: FeatureLeaf[];

  /**
   * @throws InvalidTypeError when `options` is not an object or `options.embedding`
   *   is not a TPUEmbedding; InvalidArgumentError for an unknown option or a bad `output`
   *   (`'concat'` over several features one of which is a sequence feature or has an
   *   `outputShape` of rank > 1)
   */
  constructor(options: TPUEmbeddingLayerOptions<F>) {
    const o = checkOptions<TPUEmbeddingLayerOptions<F>>(options, ['embedding', 'name', 'output', 'inputShape'], 'options', { required: true });
    if (!isEmbedding(o.embedding)) throw invalidParameter('options.embedding', 'a TPUEmbedding from @embedstack/tpu-embedding', o.embedding, InvalidTypeError);
    const features = leavesOf(o.embedding.featureConfig, isFeatureLeaf);
    if ((o.output ?? 'concat') === 'concat' && features.length > 1) {
      // a sequence feature or an outputShape of rank > 1 always gives [batch, ..., dim]: refused here, before a lookup consumes a batch
      const i = features.findIndex((f) => featureShape(f, null).length !== 2);
      if (i >= 0) {
        throw invalidParameter('options.output', `'list' (feature ${i} in flatten order gives activations [batch, ..., dim], which 'concat' cannot join)`, o.output ?? 'concat (the default)');
      }
    }
    super({ name: o.name, output: o.output, inputShape: o.inputShape });
    this.embedding = o.embedding as TPUEmbedding<F>;
    this.#features = features;
  }

  protected partShapes(batch: number | null): (number | null)[][] {
    return this.#features.map((f) => featureShape(f, batch));
  }

  /**
   * Looks one global batch up: `embedding.enqueue(features, { weights, training })`
   * then `embedding.dequeue()`. `features` (and `weights`) follow the feature config's
   * structure; each leaf is anything `enqueue` takes (core Tensor / SparseTensor /
   * RaggedTensor, Int32Array, BigInt64Array, nested arrays) or a tfjs int32 tensor of
   * dense ids (float32 for weights). Waits for the previous sparse step first.
   * @returns int32 [batch] positions 0..batch-1 to pass to `apply` (owned by the
   *   layer: freed by the next lookup, `release()` or `dispose()`)
   * @throws the TPUEmbedding's errors (INVALID_ARGUMENT, INVALID_TYPE, SHAPE_MISMATCH,
   *   OUT_OF_RANGE naming `features.<path>`); the previous step's error; SHAPE_MISMATCH
   *   for an activation of rank > 2 with `output: 'concat'`; DISPOSED after dispose
   */
  async lookup(features: PerFeature<F, FeatureInput | tf.Tensor>, options?: TPUEmbeddingLookupOptions<F> | null): Promise<tf.Tensor1D> {
    const o = checkOptions<TPUEmbeddingLookupOptions<F>>(options, ['weights', 'training']);
    const training = checkBoolean(o.training, 'options.training', true);
    const emb = this.embedding;
    return this.install(async () => {
      const inputs = toCoreInputs(features);
      const weights = o.weights === undefined || o.weights === null ? undefined : toCoreInputs(o.weights);
      await emb.enqueue(inputs as never, { weights: weights as never, training });
      const acts: unknown = await emb.dequeue();
      const tensors = leavesOf(acts, (v): v is Tensor<Float32Array> => v instanceof Tensor);
      const parts: LookupPart[] = tensors.map((t) => ({ data: t.data, shape: [...t.shape] }));
      return {
        parts,
        training,
        apply: (grads) => {
          let i = 0;
          const packed = mapStructure(acts, (v) => v instanceof Tensor, () => grads[i++]);
          return emb.applyGradients(packed as never);
        },
      };
    });
  }
}
