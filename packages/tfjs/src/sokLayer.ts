import type * as tf from '@tensorflow/tfjs-core';
import {
  InvalidTypeError,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  checkBoolean,
  checkOptions,
  invalidParameter,
  type KeyDtype,
  layoutDifference,
} from '@embedstack/core';
import type { OptimizerWrapper, SokVariable } from '@embedstack/sok';
import { keysAs, toCore, toSparse, type IdsInput } from './ids.js';
import { hasMethod, SparseEmbeddingLayer, type SparseLayerOptions } from './sparseLayer.js';

/** SOK's combiners (`sok.lookupSparse`). */
export type SokCombiner = 'sum' | 'mean';

/** Options of `new SokEmbeddingLayer(...)`. */
export interface SokEmbeddingLayerOptions extends SparseLayerOptions {
  /** One SOK variable (`sok.DynamicVariable` / `sok.Variable`) or several looked up in one fused `sok.lookupSparse`. */
  variables: SokVariable | readonly SokVariable[];
  /** A `sok.OptimizerWrapper` (it trains the looked-up rows). */
  optimizer: OptimizerWrapper;
  /**
   * Per variable (or one for all): `'sum' | 'mean'`, pooling each example's ids
   * (`sok.lookupSparse`, [batch, dim] per variable). null (default): one variable, one
   * row per id (`sok.embeddingLookup`, ids [batch] -> [batch, dim]).
   */
  combiners?: SokCombiner | readonly SokCombiner[] | null;
}

/** Options of `SokEmbeddingLayer.lookup`. */
export interface SokEmbeddingLookupOptions {
  /** Per variable: float weights in its ids' layout, or null (all 1). Pooled lookups only. Default none. */
  weights?: readonly unknown[] | null;
  /** False: forward only (no tape: missing dynamic keys read their initial value, nothing is inserted); the backward then throws FAILED_PRECONDITION. Default true. */
  training?: boolean | null;
}

type SokModule = typeof import('@embedstack/sok');
let sokModule: Promise<SokModule> | null = null;
/** @embedstack/sok is an optional peer: loaded on the first lookup of a SokEmbeddingLayer. */
function loadSok(): Promise<SokModule> {
  sokModule ??= import('@embedstack/sok');
  return sokModule;
}

function isSokVariable(v: unknown): v is SokVariable {
  if (typeof v !== 'object' || v === null) return false;
  const keyDtype: unknown = Reflect.get(v, 'keyDtype');
  return typeof Reflect.get(v, 'dimension') === 'number' && (keyDtype === 'int32' || keyDtype === 'int64');
}

/**
 * A tfjs layer over SOK variables (@embedstack/sok): `lookup(ids)` runs
 * `sok.embeddingLookup` (or the fused `sok.lookupSparse` with combiners) on a fresh
 * `sok.GradientTape`, and the backward hands the output gradients to
 * `optimizer.applyGradients(tape.gradient(grads))`: the rows are trained by the SOK
 * optimizer on their owning devices (core ops), the dense layers by the tfjs optimizer.
 * Output: one activation per variable, concatenated (`'concat'`) or as a list.
 * Needs `await sok.init(...)` first (SOK's own rule).
 */
export class SokEmbeddingLayer extends SparseEmbeddingLayer {
  static override className = 'EmbedstackSokEmbedding';
  /** The SOK variables looked up, in order. */
  readonly variables: readonly SokVariable[];
  /** The `sok.OptimizerWrapper` that trains the looked-up rows. */
  readonly optimizer: OptimizerWrapper;
  /** Pooling per variable; null: one variable, one row per id. */
  readonly combiners: readonly SokCombiner[] | null;

  /**
   * @throws InvalidTypeError (options not an object, a variable that is not a SOK
   *   variable, optimizer without applyGradients); InvalidArgumentError (unknown
   *   option, bad combiner, several variables without combiners, `output`)
   */
  constructor(options: SokEmbeddingLayerOptions) {
    const o = checkOptions<SokEmbeddingLayerOptions>(options, ['variables', 'optimizer', 'combiners', 'output', 'name', 'inputShape'], 'options', { required: true });
    const list = Array.isArray(o.variables) ? (o.variables as unknown[]) : [o.variables];
    if (list.length === 0) throw invalidParameter('options.variables', 'a SOK variable or a non-empty array of them', o.variables, InvalidTypeError);
    list.forEach((v, i) => {
      if (!isSokVariable(v)) throw invalidParameter(Array.isArray(o.variables) ? `options.variables[${i}]` : 'options.variables', 'a sok.DynamicVariable or sok.Variable', v, InvalidTypeError);
    });
    if (!hasMethod(o.optimizer, 'applyGradients')) {
      throw invalidParameter('options.optimizer', 'a sok.OptimizerWrapper', o.optimizer, InvalidTypeError);
    }
    let combiners: SokCombiner[] | null = null;
    const c = o.combiners;
    if (c !== undefined && c !== null) {
      combiners = list.map((_, i) => {
        const x = typeof c === 'string' ? c : Array.isArray(c) && c.length === list.length ? (c[i] as unknown) : undefined;
        if (x !== 'sum' && x !== 'mean') {
          throw invalidParameter(typeof c === 'string' || !Array.isArray(c) ? 'options.combiners' : `options.combiners[${i}]`, `'sum' or 'mean' (one per variable, ${list.length} in all)`, x ?? c);
        }
        return x;
      });
    } else if (list.length > 1) throw invalidParameter('options.combiners', `combiners for ${list.length} variables (unpooled lookups take one variable)`, c);
    super({ name: o.name, output: o.output, inputShape: o.inputShape });
    this.variables = list as SokVariable[];
    this.optimizer = o.optimizer!;
    this.combiners = combiners;
  }

  protected partShapes(batch: number | null): (number | null)[][] {
    return this.variables.map((v) => [batch, v.dimension]);
  }

  /**
   * Looks the ids up: one `IdsInput` per variable (for one variable, the ids alone or in a
   * one-element array).
   * Unpooled: ids [batch]. Pooled: ragged, sparse or [batch, n] ids per variable and
   * optional float weights. Waits for the previous sparse step first.
   * @returns int32 [batch] positions to pass to `apply` (owned by the layer)
   * @throws InvalidTypeError / ShapeMismatchError / OutOfRangeError naming `ids` or
   *   `ids[i]` / `options.weights[i]`; SOK's errors (FAILED_PRECONDITION before
   *   sok.init); the previous step's error
   */
  async lookup(ids: IdsInput | readonly IdsInput[], options?: SokEmbeddingLookupOptions | null): Promise<tf.Tensor1D> {
    const o = checkOptions<SokEmbeddingLookupOptions>(options, ['weights', 'training']);
    const training = checkBoolean(o.training, 'options.training', true);
    const n = this.variables.length;
    // one variable: `[x]` is the list form when x is no id and no row of ids (arrays nest ids 2 deep at most)
    const first: unknown = Array.isArray(ids) && ids.length === 1 ? ids[0] : undefined;
    const many = n > 1 || (first !== undefined && typeof first !== 'number' && typeof first !== 'bigint' && (!Array.isArray(first) || Array.isArray(first[0])));
    const list = many ? (ids as readonly IdsInput[]) : [ids as IdsInput];
    if (!Array.isArray(list) || list.length !== n) throw invalidParameter('ids', `an array of ${n} ids (one per variable)`, ids, InvalidTypeError);
    const arg = (i: number) => (many ? `ids[${i}]` : 'ids');
    const w = o.weights;
    if (w !== undefined && w !== null && (!Array.isArray(w) || w.length !== n)) throw invalidParameter('options.weights', `an array of ${n} weights (or nulls)`, w, InvalidTypeError);
    const want = (i: number): KeyDtype => this.variables[i]!.keyDtype;
    let run: (sok: SokModule, tape: InstanceType<SokModule['GradientTape']> | null) => Promise<Tensor<Float32Array>[]>;
    if (this.combiners === null) {
      if (w) throw invalidParameter('options.weights', 'unset (weights need combiners)', w);
      const core = toCore(list[0], arg(0));
      if (!(core instanceof Tensor) || core.rank !== 1) {
        throw invalidParameter(arg(0), 'dense ids [batch] (sparse, ragged or [batch, n] ids need combiners)', core instanceof Tensor ? `shape [${core.shape.join(', ')}]` : list[0], ShapeMismatchError);
      }
      const keys = keysAs(core.data, want(0), arg(0));
      run = async (sok, tape) => [await sok.embeddingLookup(this.variables[0]!, keys, { tape, training })];
    } else {
      const bags = list.map((x, i) => {
        const sp = toSparse(toCore(x, arg(i)), arg(i));
        return new SparseTensor(sp.indices, keysAs(sp.values, want(i), arg(i)), sp.denseShape);
      });
      const weights = bags.map((b, i) => {
        const x = w?.[i];
        if (x === undefined || x === null) return null;
        const s = toSparse(toCore(x, `options.weights[${i}]`, 'weights'), `options.weights[${i}]`);
        if (!(s.values instanceof Float32Array)) throw invalidParameter(`options.weights[${i}]`, 'float32 weights', `${s.dtype} weights`, InvalidTypeError);
        const difference = layoutDifference(b, s);
        if (difference !== null) throw new ShapeMismatchError(`Expected options.weights[${i}] to have the layout (rows and positions) of ${arg(i)} but received ${difference}`, { argument: `options.weights[${i}]` });
        return s;
      });
      const batch = bags[0]!.denseShape[0]!;
      bags.forEach((b, i) => {
        if (b.denseShape[0] !== batch) throw new ShapeMismatchError(`Expected ${arg(i)} to have the batch size ${batch} of ${arg(0)} but received ${b.denseShape[0]}`, { argument: arg(i) });
      });
      const combiners = this.combiners;
      run = (sok, tape) => sok.lookupSparse(this.variables, bags, { spWeights: weights, combiners, tape, training });
    }
    return this.install(async () => {
      const sok = await loadSok();
      const tape = training ? new sok.GradientTape() : null;
      const outs = await run(sok, tape);
      return {
        parts: outs.map((t) => ({ data: t.data, shape: [...t.shape] })),
        training,
        apply: (grads) => this.optimizer.applyGradients(tape!.gradient(grads)),
      };
    });
  }
}
