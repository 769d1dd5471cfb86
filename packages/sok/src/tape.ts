import {
  type Bag,
  type Combiner,
  FailedPreconditionError,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type KeyInput,
  type Keys,
  normalizeKeys,
  ShapeMismatchError,
  Tensor,
  formatShape,
} from '@embedstack/core';
import { concatFloats, concatKeys } from './concat.js';
import { backwardSync } from './exchange.js';
import type { SokVariable } from './variable.js';

const LAZY: unique symbol = Symbol('lazy');

/** One recorded lookup: its variable, bag, combiner and output shape. */
interface LookupRecord {
  variable: SokVariable;
  bag: Bag<Keys>;
  combiner: Combiner;
  shape: number[];
}

/** A pooled gradient of one lookup: enough to run the fused core step, or to expand it per entry. */
interface PooledPart {
  bag: Bag<Keys>;
  grads: Float32Array;
  combiner: Combiner;
}

/**
 * TensorFlow's IndexedSlices: rows `indices` [n] of a variable with their gradients
 * `values` (Tensor [n, dim], host memory). Duplicate indices are allowed (an
 * optimizer sums them). From `tape.gradient` the values are computed on first read
 * (core `lookupCombinedBackward`); `OptimizerWrapper.applyGradients` never needs
 * them and runs the fused core step from the pooled gradients instead.
 */
export class IndexedSlices {
  /** Ids [n]: global row ids of a Variable, keys of a DynamicVariable. */
  readonly indices: Keys;
  /** [rows, dim] when given; null otherwise. */
  readonly denseShape: readonly number[] | null;
  /** Floats per row of the values. */
  readonly dim: number;
  #values: Tensor<Float32Array> | null;
  /** @internal the pooled gradients this came from (tape.gradient) */
  readonly pooled: readonly PooledPart[] | null;
  readonly #variable: SokVariable | null;

  /**
   * @param values Tensor [n, dim] or Float32Array [n * dim] (then `dim` is taken from denseShape or values / n)
   * @param indices ids [n] (global row ids of a Variable, keys of a DynamicVariable)
   * @param denseShape optional [rows, dim] (dim must be the values')
   * @throws InvalidTypeError / InvalidArgumentError / ShapeMismatchError naming values, indices or denseShape
   */
  constructor(values: Tensor<Float32Array> | Float32Array, indices: KeyInput, denseShape?: readonly number[] | null);
  /** @internal */
  constructor(values: Tensor<Float32Array> | Float32Array | typeof LAZY, indices: KeyInput, denseShape?: readonly number[] | null, lazy?: { variable: SokVariable; parts: PooledPart[] });
  constructor(values: Tensor<Float32Array> | Float32Array | typeof LAZY, indices: KeyInput, denseShape?: readonly number[] | null, lazy?: { variable: SokVariable; parts: PooledPart[] }) {
    if (values === LAZY && lazy) {
      this.indices = indices as Keys;
      this.dim = lazy.variable.dimension;
      this.denseShape = denseShape ?? null;
      this.#values = null;
      this.pooled = lazy.parts;
      this.#variable = lazy.variable;
      return;
    }
    const idx = indices instanceof Tensor ? indices.data : indices;
    if (!(idx instanceof BigInt64Array) && !(idx instanceof Int32Array) && !Array.isArray(idx)) throw invalidParameter('indices', 'int32 or int64 ids', indices, InvalidTypeError);
    const keys: Keys = idx instanceof BigInt64Array || idx instanceof Int32Array ? idx : normalizeKeys(idx, 'int64', 'indices');
    const data = values instanceof Tensor ? values.data : values;
    if (!(data instanceof Float32Array)) throw invalidParameter('values', 'a float32 Tensor [n, dim] or a Float32Array', values, InvalidTypeError);
    const dense = checkDenseShape(denseShape);
    const n = keys.length;
    const dim = values instanceof Tensor && values.shape.length === 2 ? values.shape[1]! : n > 0 ? data.length / n : (dense?.[1] ?? 0);
    if (!Number.isInteger(dim) || data.length !== n * dim || (values instanceof Tensor && values.shape.length !== 2)) {
      throw new ShapeMismatchError(`Expected values to be [${n}, dim] for ${n} indices but received ${values instanceof Tensor ? formatShape(values.shape) : `${data.length} floats`}`, { argument: 'values' });
    }
    if (dense !== null && dense[1] !== dim) throw new ShapeMismatchError(`Expected denseShape [rows, ${dim}] (the values' dim) but received ${formatShape(dense)}`, { argument: 'denseShape' });
    this.indices = keys;
    this.dim = dim;
    this.denseShape = dense;
    this.#values = values instanceof Tensor ? values : new Tensor(data, [n, dim]);
    this.pooled = null;
    this.#variable = null;
  }

  /** @internal the variable a tape gradient was recorded for (null for slices built by hand) */
  get source(): SokVariable | null {
    return this.#variable;
  }

  /** Tensor [n, dim] of per-index gradients (computed on first read for tape gradients). */
  get values(): Tensor<Float32Array> {
    if (this.#values) return this.#values;
    const v = this.#variable!;
    v.checkUsable();
    const parts = this.pooled!.map((p) => backwardSync(v, p.bag, p.grads, p.combiner));
    const data = parts.length === 1 ? parts[0]! : concatFloats(parts);
    this.#values = new Tensor(data, [this.indices.length, this.dim]);
    return this.#values;
  }
}

/** IndexedSlices' denseShape: null, or a copy of a [rows, dim] pair of integers >= 0. */
function checkDenseShape(s: unknown): readonly number[] | null {
  if (s === undefined || s === null) return null;
  if (!Array.isArray(s) || s.length !== 2) throw invalidParameter('denseShape', 'null or a [rows, dim] pair', s, InvalidTypeError);
  for (let i = 0; i < 2; i++) {
    const d: unknown = s[i];
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) throw invalidParameter(`denseShape[${i}]`, 'an integer >= 0', d, typeof d === 'number' ? InvalidArgumentError : InvalidTypeError);
  }
  return Object.freeze([s[0] as number, s[1] as number]);
}

/** IndexedSlices of `variable` from the tape: values computed lazily from the pooled gradients. */
function pooledSlices(variable: SokVariable, parts: PooledPart[]): IndexedSlices {
  const keys = concatKeys(parts.map((p) => p.bag.keys));
  const rows = variable.staticRows;
  const dense = rows === null ? null : [rows, variable.dimension];
  return new IndexedSlices(LAZY, keys, dense, { variable, parts });
}

/**
 * Records the lookups made with it (`{ tape }` option of the lookups and layers), so
 * that `tape.gradient(outputGrads)` maps the gradients of the lookup outputs back to
 * the variables. One use: a second `gradient` call is a FAILED_PRECONDITION.
 */
export class GradientTape {
  #records: LookupRecord[] = [];
  #used = false;

  /** @internal */
  record(r: LookupRecord): void {
    if (this.#used) throw new FailedPreconditionError('This GradientTape was already used by tape.gradient; record new lookups with a new GradientTape', { argument: 'tape' });
    this.#records.push(r);
  }

  /** @internal throws when the tape was used (checked before a lookup runs, naming the lookup's `argument`) */
  checkOpen(argument?: string): void {
    if (!this.#used) return;
    const what = argument === undefined ? 'This GradientTape was' : `Expected ${argument} to be an unused GradientTape but it was`;
    throw new FailedPreconditionError(`${what} already used by tape.gradient; record new lookups with a new GradientTape`, { argument: argument ?? 'tape' });
  }

  /** The number of lookup outputs recorded (one per table of each lookupSparse call). */
  get size(): number {
    return this.#records.length;
  }

  /**
   * The gradients of the variables from the gradients of the recorded lookup outputs
   * (`outputGrads[i]`: Tensor shaped like the i-th recorded output, or a Float32Array
   * of its size), through the combiners and the exchange: one `[IndexedSlices,
   * variable]` pair per variable, in order of first lookup (TensorFlow's
   * `zip(tape.gradient(...), vars)`). Synchronous; may be awaited. A tape that recorded
   * nothing gives `[]` for `[]` (and `OptimizerWrapper.applyGradients([])` then refuses, as Keras does).
   *
   * @throws FailedPreconditionError (tape already used), ShapeMismatchError naming outputGrads[i] (also a count
   *   other than the recorded outputs'), InvalidTypeError
   */
  gradient(outputGrads: readonly (Tensor<Float32Array> | Float32Array)[]): [IndexedSlices, SokVariable][] {
    this.checkOpen();
    const recs = this.#records;
    if (!Array.isArray(outputGrads)) throw invalidParameter('outputGrads', `an array of ${recs.length} gradient Tensors (one per recorded lookup output)`, outputGrads, InvalidTypeError);
    if (outputGrads.length !== recs.length) {
      throw new ShapeMismatchError(`Expected outputGrads to hold ${recs.length} gradients (one per recorded lookup output) but received ${outputGrads.length}`, { argument: 'outputGrads' });
    }
    const grads = recs.map((r, i) => {
      const g = outputGrads[i];
      const arg = `outputGrads[${i}]`;
      const data = g instanceof Tensor ? g.data : g;
      if (!(data instanceof Float32Array)) throw invalidParameter(arg, `a float32 Tensor ${formatShape(r.shape)}`, g, InvalidTypeError);
      const size = r.shape.reduce((a, b) => a * b, 1);
      const shapeOk = g instanceof Tensor ? g.shape.length === r.shape.length && g.shape.every((d, j) => d === r.shape[j]) : data.length === size;
      if (!shapeOk) {
        throw new ShapeMismatchError(`Expected ${arg} to have the shape of lookup output ${i}, ${formatShape(r.shape)}, but received ${g instanceof Tensor ? formatShape(g.shape) : `${data.length} floats`}`, { argument: arg });
      }
      return data;
    });
    for (const r of recs) r.variable.checkUsable();
    this.#used = true;
    const byVar = new Map<SokVariable, PooledPart[]>();
    recs.forEach((r, i) => {
      const parts = byVar.get(r.variable) ?? [];
      parts.push({ bag: r.bag, grads: grads[i]!, combiner: r.combiner });
      byVar.set(r.variable, parts);
    });
    this.#records = [];
    return [...byVar].map(([v, parts]) => [pooledSlices(v, parts), v]);
  }
}
