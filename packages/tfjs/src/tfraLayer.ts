import type * as tf from '@tensorflow/tfjs-core';
import {
  InvalidTypeError,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  checkBoolean,
  checkInteger,
  checkNumber,
  checkOptions,
  checkName,
  invalidParameter,
  validateCombiner,
  type Combiner,
  type KeyDtype,
  layoutDifference,
} from '@embedstack/core';
import type { AnyVariable, Optimizer } from '@embedstack/tfra';
import { keysAs, toCore, toSparse, type IdsInput } from './ids.js';
import { hasMethod, SparseEmbeddingLayer, type SparseLayerOptions } from './sparseLayer.js';

/** Options of `new TfraEmbeddingLayer(...)`. */
export interface TfraEmbeddingLayerOptions extends Omit<SparseLayerOptions, 'output'> {
  /** The @embedstack/tfra `Variable` (int32 or int64 keys, in memory or on Redis). */
  variable: AnyVariable;
  /** A tfra optimizer wrapped by `de.DynamicEmbeddingOptimizer` (it trains the looked-up rows). */
  optimizer: Optimizer;
  /**
   * Pooling of each example's ids: `'sum' | 'mean' | 'sqrtn'` (`de.embeddingLookupSparse`,
   * output [batch, dim]); null (default): one row per id (`de.embeddingLookup`, output
   * [batch, dim] for ids [batch], [batch, inputLength, dim] for ids [batch, inputLength]).
   */
  combiner?: Combiner | null;
  /** Clip each row to this L2 norm before pooling (TF clip_by_norm; trained through). Default none. */
  maxNorm?: number | null;
  /** Without a combiner: ids are [batch, inputLength] (as tfjs's Embedding layer). Default: ids are [batch]. */
  inputLength?: number | null;
  /** The trainable view's name on the variable (`variable.getTrainableByName`). Default: the layer name. */
  trainableName?: string | null;
}

/** Options of `TfraEmbeddingLayer.lookup`. */
export interface TfraEmbeddingLookupOptions {
  /** Per-id float weights in the ids' layout (pooled lookups only). Default all 1. */
  weights?: unknown;
  /**
   * False: forward only (serving): dense ids read with `variable.lookup` (never inserts,
   * records nothing), pooled ones with `de.embeddingLookupSparse` without a trainable;
   * the backward then throws FAILED_PRECONDITION. Default true.
   */
  training?: boolean | null;
}

type TfraModule = typeof import('@embedstack/tfra');
let tfraModule: Promise<TfraModule> | null = null;
/** @embedstack/tfra is an optional peer: loaded on the first lookup of a TfraEmbeddingLayer. */
function loadTfra(): Promise<TfraModule> {
  tfraModule ??= import('@embedstack/tfra');
  return tfraModule;
}

/**
 * A tfjs layer over a TFRA `Variable` (@embedstack/tfra): `lookup(ids)` runs
 * `de.embeddingLookup` (or `de.embeddingLookupSparse` with a combiner) with
 * `returnTrainable`, and the backward hands the output gradient to
 * `optimizer.applyGradients([[grad, trainable]])`: the variable's rows are trained by
 * the tfra optimizer in core (duplicates summed, one fused update per row; new ids
 * inserted as TFRA does), the dense layers by the tfjs optimizer.
 *
 * int64 keys never enter tfjs: pass them as a `BigInt64Array`, a core int64 Tensor /
 * SparseTensor / RaggedTensor, or a positions tensor made by `toTf`; the graph only
 * sees the int32 positions `lookup` returns. Ids of the other key dtype are converted
 * (int32 -> int64 widened; int64 -> int32 when every key fits, else OUT_OF_RANGE).
 */
export class TfraEmbeddingLayer extends SparseEmbeddingLayer {
  static override className = 'EmbedstackTfraEmbedding';
  /** The tfra Variable looked up. */
  readonly variable: AnyVariable;
  /** The wrapped tfra optimizer that trains the looked-up rows. */
  readonly optimizer: Optimizer;
  /** Pooling of each example's ids; null: one row per id. */
  readonly combiner: Combiner | null;
  /** L2 clip norm of the rows; null when not clipping. */
  readonly maxNorm: number | null;
  /** Ids per example without a combiner; null: ids are [batch]. */
  readonly inputLength: number | null;
  /** Name of the trainable view on the variable (the layer name by default). */
  readonly trainableName: string;

  /**
   * @throws InvalidTypeError (options not an object, variable not a tfra Variable,
   *   optimizer without applyGradients); InvalidArgumentError (unknown option, bad
   *   combiner, maxNorm <= 0, inputLength < 1)
   */
  constructor(options: TfraEmbeddingLayerOptions) {
    const o = checkOptions<TfraEmbeddingLayerOptions>(options, ['variable', 'optimizer', 'combiner', 'maxNorm', 'inputLength', 'trainableName', 'name', 'inputShape'], 'options', {
      required: true,
    });
    const v: unknown = o.variable;
    const keyDtype: unknown = typeof v === 'object' && v !== null ? Reflect.get(v, 'keyDtype') : undefined;
    if (typeof v !== 'object' || v === null || typeof Reflect.get(v, 'dim') !== 'number' || typeof keyDtype !== 'string') {
      throw invalidParameter('options.variable', 'a de.Variable from @embedstack/tfra', o.variable, InvalidTypeError);
    }
    if (keyDtype !== 'int32' && keyDtype !== 'int64') throw invalidParameter('options.variable', "a Variable with keyDtype 'int32' or 'int64'", `keyDtype '${keyDtype}'`, InvalidTypeError);
    if (!hasMethod(o.optimizer, 'applyGradients')) {
      throw invalidParameter('options.optimizer', 'a tfra optimizer wrapped by de.DynamicEmbeddingOptimizer', o.optimizer, InvalidTypeError);
    }
    const combiner = o.combiner === undefined || o.combiner === null ? null : validateCombiner(o.combiner);
    const maxNorm = o.maxNorm === undefined || o.maxNorm === null ? null : checkNumber(o.maxNorm, 'options.maxNorm');
    if (maxNorm !== null && maxNorm <= 0) throw invalidParameter('options.maxNorm', 'a number > 0', maxNorm);
    const inputLength = o.inputLength === undefined || o.inputLength === null ? null : checkInteger(o.inputLength, 'options.inputLength', { min: 1 });
    if (inputLength !== null && combiner !== null) throw invalidParameter('options.inputLength', 'unset when a combiner pools the ids', inputLength);
    const trainableName = o.trainableName === undefined || o.trainableName === null ? null : checkName(o.trainableName, 'options.trainableName');
    super({ name: o.name, inputShape: o.inputShape });
    this.variable = o.variable!;
    this.optimizer = o.optimizer!;
    this.combiner = combiner;
    this.maxNorm = maxNorm;
    this.inputLength = inputLength;
    this.trainableName = trainableName ?? this.name;
  }

  protected partShapes(batch: number | null): (number | null)[][] {
    return [this.inputLength === null ? [batch, this.variable.dim] : [batch, this.inputLength, this.variable.dim]];
  }

  /**
   * Looks `ids` up in the variable (see the class doc for the kinds of ids; with a
   * combiner, rank-2 dense ids pool every entry of a row and ragged/sparse ids their
   * row's entries). Waits for the previous sparse step first.
   * @returns int32 [batch] positions to pass to `apply` (owned by the layer)
   * @throws InvalidTypeError (ids or weights of an unknown kind, float ids);
   *   ShapeMismatchError (ids not [batch] / [batch, inputLength], weights unlike the
   *   ids); OutOfRangeError (an int64 key outside int32 for an int32 variable); tfra's
   *   errors; the previous step's error
   */
  async lookup(ids: IdsInput, options?: TfraEmbeddingLookupOptions | null): Promise<tf.Tensor1D> {
    const o = checkOptions<TfraEmbeddingLookupOptions>(options, ['weights', 'training']);
    const training = checkBoolean(o.training, 'options.training', true);
    const want: KeyDtype = this.variable.keyDtype === 'int32' ? 'int32' : 'int64';
    const core = toCore(ids, 'ids');
    const weights = o.weights === undefined || o.weights === null ? null : toCore(o.weights, 'options.weights', 'weights');
    type Trainable = Parameters<Optimizer['applyGradients']>[0][number][1];
    let run: (de: TfraModule) => Promise<[Tensor<Float32Array>, Trainable | null]>;
    if (this.combiner === null) {
      if (weights) throw invalidParameter('options.weights', 'unset (weights need a combiner)', o.weights);
      if (!(core instanceof Tensor)) throw invalidParameter('ids', 'dense ids [batch] (sparse or ragged ids need a combiner)', ids, InvalidTypeError);
      const shape = core.shape;
      const ok = this.inputLength === null ? shape.length === 1 : shape.length === 2 && shape[1] === this.inputLength;
      if (!ok) {
        throw new ShapeMismatchError(
          `Expected ids to have shape ${this.inputLength === null ? '[batch]' : `[batch, ${this.inputLength}]`} but received [${shape.join(', ')}]`,
          { argument: 'ids' },
        );
      }
      const keys = new Tensor(keysAs(core.data, want, 'ids'), shape);
      run = training
        ? (de) => de.embeddingLookup(this.variable, keys as never, { name: this.trainableName, maxNorm: this.maxNorm, returnTrainable: true })
        : this.maxNorm === null
          ? async () => [await this.variable.lookup(keys as never), null]
          : async (de) => [await de.embeddingLookup(this.variable, keys as never, { name: `${this.trainableName}/serving`, maxNorm: this.maxNorm }), null];
    } else {
      const sp = toSparse(core, 'ids');
      const spIds = new SparseTensor(sp.indices, keysAs(sp.values, want, 'ids'), sp.denseShape);
      let spWeights: SparseTensor | null = null;
      if (weights) {
        const w = toSparse(weights, 'options.weights');
        if (!(w.values instanceof Float32Array)) throw invalidParameter('options.weights', 'float32 weights', `${w.dtype} weights`, InvalidTypeError);
        const difference = layoutDifference(spIds, w);
        if (difference !== null) throw new ShapeMismatchError(`Expected options.weights to have the layout (rows and positions) of ids but received ${difference}`, { argument: 'options.weights' });
        spWeights = w;
      }
      const combiner = this.combiner;
      const lookupOptions = { combiner, maxNorm: this.maxNorm };
      run = training
        ? (de) => de.embeddingLookupSparse(this.variable, spIds, spWeights, { ...lookupOptions, name: this.trainableName, returnTrainable: true })
        : async (de) => [await de.embeddingLookupSparse(this.variable, spIds, spWeights, { ...lookupOptions, name: `${this.trainableName}/serving` }), null];
    }
    return this.install(async () => {
      const de = await loadTfra();
      const [acts, trainable] = await run(de);
      return {
        parts: [{ data: acts.data, shape: [...acts.shape] }],
        training,
        apply: ([grad]) => this.optimizer.applyGradients([[grad!, trainable!]]),
      };
    });
  }
}
