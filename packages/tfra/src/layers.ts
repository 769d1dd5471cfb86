import {
  initializers,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  Tensor,
  UnsupportedError,
  validateMaxNorm,
  validateValues,
} from '@embedstack/core';
import { INTERNAL } from './internal.js';
import type { VariableInitializer } from './initializer.js';
import { type TfraKeyDtype, toKeys, uniqueKeys, type VariableKeys } from './keys.js';
import type { KVCreator } from './kvCreators.js';
import { embeddingLookup, embeddingLookupUnique } from './lookups.js';
import type { Partitioner } from './partition.js';
import type { RestrictPolicyClass } from './restrictPolicy.js';
import { ShadowVariable } from './shadow.js';
import { checkBoolean, checkOptionsObject, type VariableValues } from './values.js';
import { Variable } from './variable.js';

/** Reductions of the layers (TF's reduce_<combiner>). */
export type LayerCombiner = 'sum' | 'mean' | 'max' | 'min';
const LAYER_COMBINERS: readonly LayerCombiner[] = ['sum', 'mean', 'max', 'min'];

export interface EmbeddingLayerOptions {
  /** Floats per id. Required. */
  embeddingSize: number;
  keyDtype?: TfraKeyDtype;
  /** Reduction of SquashedEmbedding / FieldWiseEmbedding. Default 'sum'. */
  combiner?: LayerCombiner;
  /** Default Keras RandomNormal: normal(0, 0.05) per key. */
  initializer?: VariableInitializer;
  devices?: readonly string[] | string;
  /** Default 'DynamicEmbeddingLayer'. The parameter Variable is `<name>-parameter`. */
  name?: string;
  /** Look up each distinct id once. Default true. */
  withUnique?: boolean;
  trainable?: boolean;
  bpV2?: boolean;
  restrictPolicy?: RestrictPolicyClass | null;
  /** Variable initSize. Default 0. */
  initCapacity?: number;
  partitioner?: Partitioner;
  kvCreator?: KVCreator;
  maxNorm?: number | null;
  checkpoint?: boolean;
  seed?: number;
}

const LAYER_OPTIONS = [
  'embeddingSize',
  'keyDtype',
  'combiner',
  'initializer',
  'devices',
  'name',
  'withUnique',
  'trainable',
  'bpV2',
  'restrictPolicy',
  'initCapacity',
  'partitioner',
  'kvCreator',
  'maxNorm',
  'checkpoint',
  'seed',
];

/** How the last call's output depends on each looked-up id: out[route[i]] gets weight[i] * row(id i). */
interface Routing {
  outRows: number;
  route: Int32Array;
  weight: Float32Array;
  /** For withUnique: position of each id in the trainable's unique ids. */
  unique: Int32Array | null;
  trainableRows: number;
  linear: boolean;
}

/**
 * TFRA's Keras `Embedding` layer over a dynamic Variable: `call(ids)` -> ids.shape + [embeddingSize].
 * `shadow` is the trainable view; after a call, `backward(dOutput)` turns the
 * gradient of the output into the gradient for `opt.applyGradients([[g, layer.shadow]])`.
 */
export class Embedding {
  readonly embeddingSize: number;
  readonly combiner: LayerCombiner;
  readonly name: string;
  readonly withUnique: boolean;
  readonly maxNorm: number;
  /** The parameter Variable (`<name>-parameter`). */
  readonly params: Variable;
  /** The trainable view (`<name>-shadow`). */
  readonly shadow: ShadowVariable;
  protected routing: Routing | null = null;

  constructor(options: EmbeddingLayerOptions, extraOptions: readonly string[] = []) {
    const o = checkOptionsObject(options, 'options', [...LAYER_OPTIONS, ...extraOptions]) as unknown as EmbeddingLayerOptions;
    if (typeof o.embeddingSize !== 'number' || !Number.isSafeInteger(o.embeddingSize) || o.embeddingSize < 1) {
      throw invalidParameter('embeddingSize', 'an integer >= 1', o.embeddingSize, InvalidTypeError);
    }
    this.embeddingSize = o.embeddingSize;
    const combiner = o.combiner ?? 'sum';
    if (!LAYER_COMBINERS.includes(combiner)) throw invalidParameter('combiner', "one of 'sum', 'mean', 'max', 'min'", combiner);
    this.combiner = combiner;
    this.name = o.name ?? 'DynamicEmbeddingLayer';
    if (typeof this.name !== 'string' || this.name.length === 0) throw invalidParameter('name', 'a non-empty string', this.name, InvalidTypeError);
    this.withUnique = checkBoolean(o.withUnique, 'withUnique', true);
    this.maxNorm = validateMaxNorm(o.maxNorm);
    this.params = new Variable({
      name: `${this.name}-parameter`,
      keyDtype: o.keyDtype ?? 'int64',
      dim: this.embeddingSize,
      devices: o.devices ?? undefined,
      partitioner: o.partitioner ?? undefined,
      initializer: o.initializer === undefined ? initializers.normal(0, 0.05) : o.initializer,
      trainable: o.trainable ?? true,
      checkpoint: o.checkpoint ?? true,
      initSize: o.initCapacity ?? 0,
      kvCreator: o.kvCreator ?? undefined,
      restrictPolicy: o.restrictPolicy ?? null,
      bpV2: o.bpV2 ?? false,
      seed: o.seed ?? 0,
    });
    this.shadow = new ShadowVariable(this.params, `${this.name}-shadow`, this.maxNorm);
    this.params[INTERNAL].trainables.set(this.shadow.name, this.shadow);
  }

  get trainable(): boolean {
    return this.params.trainable;
  }

  /** [shadow] (Keras trainable_weights). */
  get trainableWeights(): ShadowVariable[] {
    return this.trainable ? [this.shadow] : [];
  }

  /** Rows of `ids` through the shadow: flat [n * size] in ids order, and the unique index when withUnique. */
  protected async lookupFlat(keys: Keys): Promise<{ rows: Float32Array; unique: Int32Array | null; trainableRows: number }> {
    const opts = { name: this.shadow.name, maxNorm: this.maxNorm > 0 ? this.maxNorm : null };
    if (this.withUnique) {
      const t = await embeddingLookupUnique(this.params, keys, opts);
      return { rows: t.data, unique: uniqueKeys(keys).index, trainableRows: this.shadow.ids?.length ?? 0 };
    }
    const t = await embeddingLookup(this.params, keys, opts);
    return { rows: t.data, unique: null, trainableRows: keys.length };
  }

  /** ids (any shape) -> Tensor ids.shape + [embeddingSize]. */
  async call(ids: VariableKeys): Promise<Tensor<Float32Array>> {
    const k = toKeys(ids, this.params.keyDtype, 'ids', true);
    const { rows, unique, trainableRows } = await this.lookupFlat(k.keys);
    const n = k.keys.length;
    this.routing = {
      outRows: n,
      route: Int32Array.from({ length: n }, (_, i) => i),
      weight: new Float32Array(n).fill(1),
      unique,
      trainableRows,
      linear: true,
    };
    return new Tensor(rows, [...k.shape, this.embeddingSize]);
  }

  /** Reduces looked-up rows into `outRows` groups (`group[i]` of each id) with the combiner; records the routing. */
  protected reduce(rows: Float32Array, group: Int32Array, outRows: number, unique: Int32Array | null, trainableRows: number): Float32Array {
    const d = this.embeddingSize;
    const out = new Float32Array(outRows * d);
    const count = new Int32Array(outRows);
    for (const g of group) count[g]!++;
    const mm = this.combiner === 'max' || this.combiner === 'min';
    const seen = new Uint8Array(outRows);
    for (let i = 0; i < group.length; i++) {
      const g = group[i]!;
      for (let c = 0; c < d; c++) {
        const x = rows[i * d + c]!;
        const at = g * d + c;
        if (!mm) out[at]! += this.combiner === 'mean' ? x / count[g]! : x;
        else if (!seen[g]) out[at] = x;
        else out[at] = this.combiner === 'max' ? Math.max(out[at]!, x) : Math.min(out[at]!, x);
      }
      seen[g] = 1;
    }
    this.routing = {
      outRows,
      route: group,
      weight: Float32Array.from(group, (g) => (this.combiner === 'mean' ? 1 / count[g]! : 1)),
      unique,
      trainableRows,
      linear: !mm,
    };
    return out;
  }

  /**
   * Gradient for `layer.shadow` from the gradient of the last call's output
   * (same shape as that output). Combiners 'max' and 'min' are not supported.
   * @throws FailedPrecondition-like UnsupportedError before any call or for max/min
   */
  backward(outputGrad: VariableValues): Float32Array {
    const r = this.routing;
    if (!r) throw new UnsupportedError(`Layer ${this.name}: call(ids) before backward()`);
    if (!r.linear) throw new UnsupportedError(`Layer ${this.name}: backward() supports the 'sum' and 'mean' combiners, not '${this.combiner}'`);
    const d = this.embeddingSize;
    const g = validateValues(outputGrad, [r.outRows], d, 'outputGrad');
    const out = new Float32Array(r.trainableRows * d);
    for (let i = 0; i < r.route.length; i++) {
      const dst = (r.unique ? r.unique[i]! : i) * d;
      const src = r.route[i]! * d;
      for (let c = 0; c < d; c++) out[dst + c]! += r.weight[i]! * g[src + c]!;
    }
    return out;
  }
}

/** TFRA's alias. */
export const BasicEmbedding = Embedding;

/**
 * Embedding reduced over the id axes with the combiner: ids [batch, ...] ->
 * [batch, embeddingSize]; ids of rank 1 -> [embeddingSize].
 */
export class SquashedEmbedding extends Embedding {
  override async call(ids: VariableKeys): Promise<Tensor<Float32Array>> {
    const k = toKeys(ids, this.params.keyDtype, 'ids', true);
    const { rows, unique, trainableRows } = await this.lookupFlat(k.keys);
    const n = k.keys.length;
    const batched = k.shape.length >= 2;
    const batch = batched ? k.shape[0]! : 1;
    const per = batch === 0 ? 0 : n / batch;
    const group = Int32Array.from({ length: n }, (_, i) => (batched ? Math.floor(i / per) : 0));
    const out = this.reduce(rows, group, batch, unique, trainableRows);
    return new Tensor(out, batched ? [batch, this.embeddingSize] : [this.embeddingSize]);
  }
}

/** Maps ids to field slots: receives the flat ids and returns one slot per id (a function of one id also works). */
export type SlotMapFn = ((ids: Keys) => ArrayLike<number | bigint>) | ((id: bigint | number) => number | bigint);

export interface FieldWiseEmbeddingOptions extends EmbeddingLayerOptions {
  /** Number of fields. */
  nslots: number;
  slotMapFn: SlotMapFn;
}

/**
 * Ids reduced per field: ids [batch, m] (rank <= 2; rank 1 = one id per sample)
 * -> [batch, nslots, embeddingSize], field of each id = slotMapFn(id); fields
 * without ids are zeros.
 */
export class FieldWiseEmbedding extends Embedding {
  readonly nslots: number;
  readonly slotMapFn: SlotMapFn;

  constructor(options: FieldWiseEmbeddingOptions) {
    if (typeof options?.slotMapFn !== 'function') throw invalidParameter('slotMapFn', 'a function', options?.slotMapFn, InvalidTypeError);
    if (typeof options.nslots !== 'number' || !Number.isSafeInteger(options.nslots) || options.nslots < 1) {
      throw invalidParameter('nslots', 'an integer >= 1', options.nslots, InvalidTypeError);
    }
    const { nslots, slotMapFn, ...rest } = options;
    super({ ...rest, name: rest.name ?? 'SlotDynamicEmbeddingLayer' });
    this.nslots = nslots;
    this.slotMapFn = slotMapFn;
  }

  #slots(keys: Keys): Int32Array {
    const fn = this.slotMapFn as (x: unknown) => unknown;
    let whole: unknown;
    try {
      whole = fn(keys);
    } catch {
      whole = undefined;
    }
    const arr = whole as ArrayLike<unknown> | undefined;
    const list =
      arr && typeof arr === 'object' && typeof arr.length === 'number' && arr.length === keys.length
        ? Array.from(arr)
        : Array.from(keys as ArrayLike<bigint | number>, (k) => fn(k));
    return Int32Array.from(list, (s, i) => {
      const v = typeof s === 'bigint' ? Number(s) : s;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= this.nslots) {
        throw invalidParameter(`slotMapFn(ids)[${i}]`, `a slot in [0, ${this.nslots})`, s);
      }
      return v;
    });
  }

  override async call(ids: VariableKeys): Promise<Tensor<Float32Array>> {
    const k = toKeys(ids, this.params.keyDtype, 'ids', true);
    if (k.shape.length > 2) throw new UnsupportedError(`Expected ids of rank <= 2 for FieldWiseEmbedding but received rank ${k.shape.length}`, { argument: 'ids' });
    const slots = this.#slots(k.keys);
    const n = k.keys.length;
    const batch = k.shape.length === 2 ? k.shape[0]! : n;
    const per = batch === 0 ? 0 : n / batch;
    const group = Int32Array.from({ length: n }, (_, i) => Math.floor(i / per) * this.nslots + slots[i]!);
    const { rows, unique, trainableRows } = await this.lookupFlat(k.keys);
    const out = this.reduce(rows, group, batch * this.nslots, unique, trainableRows);
    return new Tensor(out, [batch, this.nslots, this.embeddingSize]);
  }
}

/** `de.layers`. */
export const layers = { Embedding, BasicEmbedding, SquashedEmbedding, FieldWiseEmbedding } as const;
