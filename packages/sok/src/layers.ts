import {
  checkBoolean,
  checkInteger,
  checkName,
  checkOptions,
  type InitializerSpec,
  initializers,
  invalidParameter,
  InvalidTypeError,
  type KeyInput,
  ShapeMismatchError,
  SparseTensor,
  Tensor,
  formatShape,
} from '@embedstack/core';
import { context } from './context.js';
import { DynamicVariable } from './dynamicVariable.js';
import type { InitializerName } from './initializer.js';
import { bagFor, idsFor } from './keys.js';
import { HashtableBudget } from './layerBudget.js';
import { checkVariable, embeddingLookup, lookupBags, type EmbeddingLookupOptions } from './lookup.js';
import { Variable } from './staticVariable.js';
import { defaultName, type SokVariable, takeDefaultName } from './variable.js';

/** Options of a v1 layer's `call`. */
export type LayerCallOptions = EmbeddingLookupOptions;

/** The table behind a v1 layer: a DynamicVariable (hashtable) or a Variable of maxVocabularySizePerGpu * N rows. */
function layerVariable(o: { useHashtable: boolean; maxVocabularySizePerGpu: number; dim: number; keyDtype: 'int64' | 'int32'; initializer: InitializerSpec | InitializerName; name: string }): SokVariable {
  const n = context().numDevices;
  if (o.useHashtable) return new DynamicVariable({ dimension: o.dim, keyType: o.keyDtype, initializer: o.initializer, name: o.name, initCapacity: o.maxVocabularySizePerGpu * n });
  return new Variable({ shape: [o.maxVocabularySizePerGpu * n, o.dim], initializer: o.initializer, name: o.name });
}

/** `new sok.All2AllDenseEmbedding(options)` (SOK v1). Defaults in brackets. */
export interface All2AllDenseEmbeddingOptions {
  /**
   * Rows per device. Required. With `useHashtable: false` ids must be in [0, maxVocabularySizePerGpu * N);
   * with the hashtable a training call that would insert more keys on a device than it has room for is
   * OUT_OF_RANGE (SOK v1's tables have this fixed size; nothing is evicted).
   */
  maxVocabularySizePerGpu: number;
  /** Floats per row. Required. */
  embeddingVecSize: number;
  /** Slots (features) per sample. Required. */
  slotNum: number;
  /** Ids per slot. Required. */
  nnzPerSlot: number;
  /** Input is a flat [n] of ids, output [n, dim] [false]. */
  dynamicInput?: boolean;
  /** Keys are hashed (a DynamicVariable); false: keys are row indices of a static table [true]. */
  useHashtable?: boolean;
  /** Key type of the hashtable ['int64']. */
  keyDtype?: 'int64' | 'int32';
  /** Initial rows [uniform(-0.05, 0.05)]. */
  embeddingInitializer?: InitializerSpec | InitializerName;
  /** Variable name (dump prefix) [unique: 'All2AllDenseEmbedding', ...]. */
  name?: string;
}

/**
 * SOK v1's `All2AllDenseEmbedding`: input `[batch, slotNum, nnzPerSlot]` ids (a Tensor,
 * or a flat array of batch * slotNum * nnzPerSlot ids; a flat [n] with `dynamicInput`),
 * output `[batch, slotNum, nnzPerSlot, dim]` (or `[n, dim]`). Keys go to device
 * `key mod N` and the rows come back (the same exchange as `embeddingLookup`).
 * Trainable through a GradientTape passed to `call`; `variable` is its table.
 *
 * @throws FailedPreconditionError before init; InvalidArgumentError naming the option
 */
export class All2AllDenseEmbedding {
  /** Rows per device. */
  readonly maxVocabularySizePerGpu: number;
  /** Floats per row. */
  readonly embeddingVecSize: number;
  /** Slots (features) per sample. */
  readonly slotNum: number;
  /** Ids per slot. */
  readonly nnzPerSlot: number;
  /** Input is a flat [n] of ids, output [n, dim]. */
  readonly dynamicInput: boolean;
  /** Keys are hashed (a DynamicVariable) rather than row indices of a static Variable. */
  readonly useHashtable: boolean;
  /** Key type of the hashtable. */
  readonly keyDtype: 'int64' | 'int32';
  /** The table: a DynamicVariable (useHashtable) or a static Variable of maxVocabularySizePerGpu * N rows. */
  readonly variable: SokVariable;
  /** useHashtable: the rows per device a training call may fill (see HashtableBudget). */
  readonly #budget: HashtableBudget | null;

  constructor(options: All2AllDenseEmbeddingOptions) {
    context();
    const o = checkOptions<All2AllDenseEmbeddingOptions>(
      options,
      ['maxVocabularySizePerGpu', 'embeddingVecSize', 'slotNum', 'nnzPerSlot', 'dynamicInput', 'useHashtable', 'keyDtype', 'embeddingInitializer', 'name'],
      'options',
      { required: true, expected: 'All2AllDenseEmbedding options' },
    );
    this.maxVocabularySizePerGpu = checkInteger(o.maxVocabularySizePerGpu, 'maxVocabularySizePerGpu', { min: 1, max: 2 ** 31 - 1 });
    this.embeddingVecSize = checkInteger(o.embeddingVecSize, 'embeddingVecSize', { min: 1, max: 1 << 20 });
    this.slotNum = checkInteger(o.slotNum, 'slotNum', { min: 1 });
    this.nnzPerSlot = checkInteger(o.nnzPerSlot, 'nnzPerSlot', { min: 1 });
    this.dynamicInput = checkBoolean(o.dynamicInput, 'dynamicInput', false);
    this.useHashtable = checkBoolean(o.useHashtable, 'useHashtable', true);
    const keyDtype = o.keyDtype ?? 'int64';
    if (keyDtype !== 'int64' && keyDtype !== 'int32') throw invalidParameter('keyDtype', "'int64' or 'int32'", keyDtype, InvalidTypeError);
    this.keyDtype = keyDtype;
    if (!this.useHashtable && this.maxVocabularySizePerGpu * context().numDevices > 2 ** 31 - 1) throw invalidParameter('maxVocabularySizePerGpu', `at most ${Math.floor((2 ** 31 - 1) / context().numDevices)} rows per device`, this.maxVocabularySizePerGpu);
    this.variable = layerVariable({
      useHashtable: this.useHashtable,
      maxVocabularySizePerGpu: this.maxVocabularySizePerGpu,
      dim: this.embeddingVecSize,
      keyDtype,
      initializer: o.embeddingInitializer ?? initializers.uniform(-0.05, 0.05),
      name: checkName(o.name, 'name', defaultName('All2AllDenseEmbedding')),
    });
    if (o.name === undefined || o.name === null) takeDefaultName('All2AllDenseEmbedding');
    this.#budget = this.useHashtable ? new HashtableBudget(this.maxVocabularySizePerGpu, `All2AllDenseEmbedding "${this.variable.name}"`) : null;
  }

  /** The variables a v2 optimizer trains. */
  get trainableVariables(): SokVariable[] {
    return [this.variable];
  }

  /**
   * Looks up `ids` (see the class); `{ tape, training }` as `sok.embeddingLookup` (training by default: new keys are inserted).
   * @throws ShapeMismatchError (input size), OutOfRangeError (row index / int32 key; a full hashtable: see maxVocabularySizePerGpu)
   */
  async call(ids: KeyInput | Tensor<BigInt64Array> | Tensor<Int32Array>, options: LayerCallOptions = {}): Promise<Tensor<Float32Array>> {
    const v = checkVariable(this.variable, 'layer.variable');
    const per = this.slotNum * this.nnzPerSlot;
    const count = ids instanceof Tensor ? ids.data.length : Array.isArray(ids) || ArrayBuffer.isView(ids) ? (ids as ArrayLike<unknown>).length : -1;
    if (count < 0) throw invalidParameter('ids', 'a Tensor, typed array or array of int32 / int64 ids', ids, InvalidTypeError);
    // A nested array is named as such (INVALID_TYPE at ids[i]), not counted by its outer length.
    if (Array.isArray(ids) && ids.some((x) => Array.isArray(x))) idsFor(v, ids, 'ids');
    let shape: number[];
    if (this.dynamicInput) {
      if (ids instanceof Tensor && ids.shape.length !== 1) throw new ShapeMismatchError(`Expected ids to be flat [n] (dynamicInput) but received ${formatShape(ids.shape)}`, { argument: 'ids' });
      shape = [count];
    } else if (ids instanceof Tensor) {
      const s = ids.shape;
      if (s.length !== 3 || s[1] !== this.slotNum || s[2] !== this.nnzPerSlot) {
        throw new ShapeMismatchError(`Expected ids to be [batch, ${this.slotNum}, ${this.nnzPerSlot}] (slotNum, nnzPerSlot) but received ${formatShape(s)}`, { argument: 'ids' });
      }
      shape = s.slice();
    } else {
      if (count % per !== 0) throw new ShapeMismatchError(`Expected ids to hold batch * slotNum * nnzPerSlot = batch * ${per} ids but received ${count}`, { argument: 'ids' });
      shape = [count / per, this.slotNum, this.nnzPerSlot];
    }
    const o = checkOptions<LayerCallOptions>(options, ['tape', 'training'], 'options');
    const keys = idsFor(v, ids, 'ids');
    const lookup = () => embeddingLookup(v, new Tensor(keys, shape) as Tensor<BigInt64Array>, o);
    return this.#budget && checkBoolean(o.training, 'options.training', true) ? this.#budget.run(v, keys, lookup) : lookup();
  }
}

/** `new sok.DistributedEmbedding(options)` (SOK v1). Defaults in brackets. */
export interface DistributedEmbeddingOptions {
  /** 'sum' or 'mean'. Required. */
  combiner: 'sum' | 'mean';
  /** Rows per device (with `useHashtable: false`, ids in [0, maxVocabularySizePerGpu * N); with the hashtable, as All2AllDenseEmbedding's). Required. */
  maxVocabularySizePerGpu: number;
  /** Floats per row. Required. */
  embeddingVecSize: number;
  /** Slots per sample. Required. */
  slotNum: number;
  /** Most ids per slot (the input's second dimension). Required. */
  maxNnz: number;
  /** SOK's per-sample key budget (a capacity hint; not enforced) [1]. */
  maxFeatureNum?: number;
  /** [true] */
  useHashtable?: boolean;
  /** [uniform(-0.05, 0.05)] */
  embeddingInitializer?: InitializerSpec | InitializerName;
  /** [unique: 'DistributedEmbedding', ...] */
  name?: string;
}

/**
 * SOK v1's `DistributedEmbedding`: SparseTensor input `[batch * slotNum, maxNnz]` (row
 * `b * slotNum + s` holds sample b's ids of slot s), output `[batch, slotNum, dim]`, each
 * slot pooled with `combiner` (the `lookupSparse` exchange). Trainable through a tape.
 */
export class DistributedEmbedding {
  /** Reduction of each slot's ids: 'sum' or 'mean'. */
  readonly combiner: 'sum' | 'mean';
  /** Rows per device. */
  readonly maxVocabularySizePerGpu: number;
  /** Floats per row. */
  readonly embeddingVecSize: number;
  /** Slots per sample. */
  readonly slotNum: number;
  /** Most ids per slot. */
  readonly maxNnz: number;
  /** SOK's per-sample key budget (a capacity hint; not enforced). */
  readonly maxFeatureNum: number;
  /** Keys are hashed (a DynamicVariable) rather than row indices of a static Variable. */
  readonly useHashtable: boolean;
  /** The table: a DynamicVariable (useHashtable) or a static Variable of maxVocabularySizePerGpu * N rows. */
  readonly variable: SokVariable;
  /** useHashtable: the rows per device a training call may fill (see HashtableBudget). */
  readonly #budget: HashtableBudget | null;

  constructor(options: DistributedEmbeddingOptions) {
    context();
    const o = checkOptions<DistributedEmbeddingOptions>(
      options,
      ['combiner', 'maxVocabularySizePerGpu', 'embeddingVecSize', 'slotNum', 'maxNnz', 'maxFeatureNum', 'useHashtable', 'embeddingInitializer', 'name'],
      'options',
      { required: true, expected: 'DistributedEmbedding options' },
    );
    if (o.combiner !== 'sum' && o.combiner !== 'mean') throw invalidParameter('combiner', "'sum' or 'mean'", o.combiner);
    this.combiner = o.combiner;
    this.maxVocabularySizePerGpu = checkInteger(o.maxVocabularySizePerGpu, 'maxVocabularySizePerGpu', { min: 1, max: 2 ** 31 - 1 });
    this.embeddingVecSize = checkInteger(o.embeddingVecSize, 'embeddingVecSize', { min: 1, max: 1 << 20 });
    this.slotNum = checkInteger(o.slotNum, 'slotNum', { min: 1 });
    this.maxNnz = checkInteger(o.maxNnz, 'maxNnz', { min: 1 });
    this.maxFeatureNum = checkInteger(o.maxFeatureNum, 'maxFeatureNum', { min: 1, fallback: 1 });
    this.useHashtable = checkBoolean(o.useHashtable, 'useHashtable', true);
    if (!this.useHashtable && this.maxVocabularySizePerGpu * context().numDevices > 2 ** 31 - 1) throw invalidParameter('maxVocabularySizePerGpu', `at most ${Math.floor((2 ** 31 - 1) / context().numDevices)} rows per device`, this.maxVocabularySizePerGpu);
    this.variable = layerVariable({
      useHashtable: this.useHashtable,
      maxVocabularySizePerGpu: this.maxVocabularySizePerGpu,
      dim: this.embeddingVecSize,
      keyDtype: 'int64',
      initializer: o.embeddingInitializer ?? initializers.uniform(-0.05, 0.05),
      name: checkName(o.name, 'name', defaultName('DistributedEmbedding')),
    });
    if (o.name === undefined || o.name === null) takeDefaultName('DistributedEmbedding');
    this.#budget = this.useHashtable ? new HashtableBudget(this.maxVocabularySizePerGpu, `DistributedEmbedding "${this.variable.name}"`) : null;
  }

  /** The variables a v2 optimizer trains. */
  get trainableVariables(): SokVariable[] {
    return [this.variable];
  }

  /** Pooled lookup of `sp` (see the class); options as All2AllDenseEmbedding's. @throws ShapeMismatchError (denseShape), OutOfRangeError (as All2AllDenseEmbedding's) */
  async call(sp: SparseTensor, options: LayerCallOptions = {}): Promise<Tensor<Float32Array>> {
    const v = checkVariable(this.variable, 'layer.variable');
    const o = checkOptions<LayerCallOptions>(options, ['tape', 'training'], 'options');
    if (!(sp instanceof SparseTensor)) throw invalidParameter('sp', `a SparseTensor [batch * ${this.slotNum}, ${this.maxNnz}]`, sp, InvalidTypeError);
    const [rows, nnz] = sp.denseShape as [number, number];
    if (sp.denseShape.length !== 2 || rows % this.slotNum !== 0 || nnz > this.maxNnz) {
      throw new ShapeMismatchError(`Expected sp.denseShape to be [batch * ${this.slotNum}, <= ${this.maxNnz}] (slotNum, maxNnz) but received ${formatShape(sp.denseShape)}`, { argument: 'sp.denseShape' });
    }
    const bag = bagFor(v, sp, null, 'sp');
    const lookup = async () => (await lookupBags([v], [bag], [this.combiner], [[rows / this.slotNum, this.slotNum, v.dimension]], o))[0]!;
    return this.#budget && checkBoolean(o.training, 'options.training', true) ? this.#budget.run(v, bag.keys, lookup) : lookup();
  }
}
