import {
  bagFromSegments,
  checkBoolean,
  checkInteger,
  checkOptions,
  initializers,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  Tensor,
  UnsupportedError,
  validateMaxNorm,
  validateValues,
} from '@embedstack/core';
import type { VariableInitializer } from './initializer.js';
import { type TfraKeyDtype, toKeys, type VariableKeys } from './keys.js';
import type { KVCreator } from './kvCreators.js';
import { checkParams, embeddingLookup, embeddingLookupUnique, pooledLookup } from './lookups.js';
import type { Partitioner } from './partition.js';
import type { RestrictPolicyClass } from './restrictPolicy.js';
import { ShadowVariable } from './shadow.js';
import type { VariableValues } from './values.js';
import { Variable } from './variable.js';
import { stateOf } from './variableState.js';

/** Reductions of the layers (TF's reduce_<combiner>). */
export type LayerCombiner = 'sum' | 'mean' | 'max' | 'min';
const LAYER_COMBINERS: readonly LayerCombiner[] = ['sum', 'mean', 'max', 'min'];

/** Options of the layers {@link Embedding}, `SquashedEmbedding` and {@link FieldWiseEmbedding} (TFRA's `de.keras.layers.Embedding`); most are passed to the parameter Variable. */
export interface EmbeddingLayerOptions {
  /** Floats per id. Required. */
  embeddingSize: number;
  /** Key dtype of the parameter Variable: 'int64' (default), 'int32' or 'string'. */
  keyDtype?: TfraKeyDtype;
  /** Reduction of SquashedEmbedding / FieldWiseEmbedding. Default 'sum'. */
  combiner?: LayerCombiner;
  /** Default Keras RandomNormal: normal(0, 0.05) per key. */
  initializer?: VariableInitializer;
  /** Shard labels of the parameter Variable. Default ['cpu:0']. */
  devices?: readonly string[] | string;
  /** Default 'DynamicEmbeddingLayer'. The parameter Variable is `<name>-parameter`. */
  name?: string;
  /** Look up each distinct id once. Default true. */
  withUnique?: boolean;
  /** Trained by optimizers. Default true. */
  trainable?: boolean;
  /** Train by adding deltas instead of setting values (TFRA `bp_v2`). Default false. */
  bpV2?: boolean;
  /** A restrict policy class for the parameter Variable. Default none. */
  restrictPolicy?: RestrictPolicyClass | null;
  /** Variable initSize. Default 0. */
  initCapacity?: number;
  /** Places keys on shards. Default `defaultPartitionFn` (non-negative `key % N`). */
  partitioner?: Partitioner;
  /** Where the tables live. Default `new CuckooHashTableCreator()`. */
  kvCreator?: KVCreator;
  /** Clip each looked-up row to this L2 norm (TF `max_norm`). Default none. */
  maxNorm?: number | null;
  /** Saved by `saveToFileSystem`. Default true. */
  checkpoint?: boolean;
  /** Seed of random initializers (uint32). Default 0. An embedstack extension. */
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

/**
 * TFRA's Keras `Embedding` layer over a dynamic Variable: `call(ids)` -> ids.shape + [embeddingSize].
 * `shadow` is the trainable view: after a call, the gradient of the call's output
 * trains it (`opt.applyGradients([[dOutput, layer.shadow]])`; `backward(dOutput)`
 * validates and returns it). Lookups and the 'sum' / 'mean' reductions of the
 * squashed layers are pooled by core (their backward too); 'max' and 'min' are
 * reduced here and cannot be trained.
 */
export class Embedding {
  /** Floats per id. */
  readonly embeddingSize: number;
  /** Reduction of the squashed layers. */
  readonly combiner: LayerCombiner;
  /** Layer name (the Variable is `<name>-parameter`). */
  readonly name: string;
  /** Each distinct id is looked up once. */
  readonly withUnique: boolean;
  /** L2 clip norm of the rows; 0 when not clipping. */
  readonly maxNorm: number;
  /** The parameter Variable (`<name>-parameter`). */
  readonly params: Variable<TfraKeyDtype>;
  /** The trainable view (`<name>-shadow`). */
  readonly shadow: ShadowVariable;
  /** Output shape (without the embedding size) of the last call, and whether its output can be trained. */
  protected last: {
    /** Output shape without the embedding size. */
    shape: number[];
    /** Whether the output can be trained. */
    linear: boolean;
  } | null = null;

  constructor(options: EmbeddingLayerOptions, extraOptions: readonly string[] = []) {
    const extra = Array.isArray(extraOptions) ? extraOptions.filter((k): k is string => typeof k === 'string') : [];
    const o = checkOptions<EmbeddingLayerOptions>(options, [...LAYER_OPTIONS, ...extra]);
    if (typeof o.embeddingSize !== 'number') throw invalidParameter('embeddingSize', 'an integer >= 1', o.embeddingSize, InvalidTypeError);
    checkInteger(o.embeddingSize, 'embeddingSize', { min: 1 });
    if (o.initCapacity !== undefined && o.initCapacity !== null && typeof o.initCapacity !== 'number') {
      throw invalidParameter('initCapacity', 'an integer >= 0', o.initCapacity, InvalidTypeError);
    }
    this.embeddingSize = o.embeddingSize;
    const combiner = o.combiner ?? 'sum';
    if (!LAYER_COMBINERS.includes(combiner)) throw invalidParameter('combiner', "one of 'sum', 'mean', 'max', 'min'", combiner);
    this.combiner = combiner;
    this.name = o.name ?? 'DynamicEmbeddingLayer';
    if (typeof this.name !== 'string' || this.name.length === 0) throw invalidParameter('name', 'a non-empty string', this.name, InvalidTypeError);
    this.withUnique = checkBoolean(o.withUnique, 'withUnique', true);
    this.maxNorm = validateMaxNorm(o.maxNorm);
    this.params = new Variable<TfraKeyDtype>({
      name: `${this.name}-parameter`,
      keyDtype: o.keyDtype ?? 'int64',
      dim: this.embeddingSize,
      devices: o.devices ?? undefined,
      partitioner: o.partitioner ?? undefined,
      initializer: o.initializer ?? initializers.normal(0, 0.05),
      trainable: o.trainable ?? true,
      checkpoint: o.checkpoint ?? true,
      initSize: checkInteger(o.initCapacity, 'initCapacity', { min: 0, fallback: 0 }),
      kvCreator: o.kvCreator ?? undefined,
      restrictPolicy: o.restrictPolicy ?? null,
      bpV2: o.bpV2 ?? false,
      seed: o.seed ?? 0,
    });
    this.shadow = new ShadowVariable(this.params, `${this.name}-shadow`, this.maxNorm);
    stateOf(this.params)!.trainables.set(this.shadow.name, this.shadow);
  }

  /** Whether the parameter Variable is trainable. */
  get trainable(): boolean {
    return this.params.trainable;
  }

  /** [shadow] (Keras trainable_weights). */
  get trainableWeights(): ShadowVariable[] {
    return this.trainable ? [this.shadow] : [];
  }

  /** Options of this layer's lookups: the shadow's name and the max norm. */
  protected lookupOptions(): {
    /** The shadow's name. */
    name: string;
    /** The L2 clip norm, or null when not clipping. */
    maxNorm: number | null;
  } {
    return { name: this.shadow.name, maxNorm: this.maxNorm > 0 ? this.maxNorm : null };
  }

  /** ids (any shape) -> Tensor ids.shape + [embeddingSize]. */
  async call(ids: VariableKeys): Promise<Tensor<Float32Array>> {
    const k = toKeys(ids, this.params.keyDtype, 'ids', true);
    const out = await (this.withUnique ? embeddingLookupUnique : embeddingLookup)(this.params, k.keys, this.lookupOptions());
    this.last = { shape: k.shape, linear: true };
    return new Tensor(out.data, [...k.shape, this.embeddingSize]);
  }

  /**
   * Pools the rows of `keys` into `outRows` groups (`group[i]` of id i) with the
   * layer's combiner, in core (`lookupCombined`): 'sum' / 'mean' recorded on the
   * shadow for training, 'max' / 'min' forward only (core has no backward for them).
   */
  protected async reduce(keys: Keys, group: Int32Array, outRows: number, shape: number[]): Promise<Float32Array> {
    const bag = bagFromSegments(group, keys, null, outRows);
    const { v, st } = checkParams(this.params);
    this.last = { shape, linear: this.combiner === 'sum' || this.combiner === 'mean' };
    if (this.combiner === 'sum' || this.combiner === 'mean') {
      const [t] = await pooledLookup(v, st, bag, shape, this.combiner, this.maxNorm, this.shadow.name, null, []);
      return t.data;
    }
    return st.pool(bag, this.combiner, this.maxNorm, null);
  }

  /**
   * The gradient that trains `layer.shadow` from the gradient of the last call's
   * output (same shape): that output gradient itself, since core pushes it back
   * through the pooling in the training step. Combiners 'max' and 'min' are not supported.
   * @throws UnsupportedError before any call or for max/min; ShapeMismatchError for a wrong shape
   */
  backward(outputGrad: VariableValues): Float32Array {
    const r = this.last;
    if (!r) throw new UnsupportedError(`Layer ${this.name}: call(ids) before backward()`);
    if (!r.linear) throw new UnsupportedError(`Layer ${this.name}: backward() supports the 'sum' and 'mean' combiners, not '${this.combiner}'`);
    return validateValues(outputGrad, r.shape, this.embeddingSize, 'outputGrad');
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
    const n = k.keys.length;
    const batched = k.shape.length >= 2;
    const batch = batched ? k.shape[0]! : 1;
    const per = batch === 0 ? 0 : n / batch;
    const group = Int32Array.from({ length: n }, (_, i) => (batched ? Math.floor(i / per) : 0));
    const shape = batched ? [batch] : [];
    const out = await this.reduce(k.keys, group, batch, shape);
    return new Tensor(out, [...shape, this.embeddingSize]);
  }
}

/**
 * Maps ids to field slots: receives the flat ids (a BigInt64Array for int64 layers,
 * an Int32Array for int32) and returns one slot per id; a function of one id also
 * works (it gets a bigint for int64 layers: `(k) => Number(k % 3n)`). An error it
 * throws is reported as an InvalidArgumentError naming `slotMapFn(ids)[i]`.
 */
export type SlotMapFn = ((ids: Keys) => ArrayLike<number | bigint>) | ((id: bigint | number) => number | bigint);

/** Options of {@link FieldWiseEmbedding} (TFRA's `FieldWiseEmbedding(nslots, slot_map_fn)`). Default name 'SlotDynamicEmbeddingLayer'. */
export interface FieldWiseEmbeddingOptions extends EmbeddingLayerOptions {
  /** Number of fields. */
  nslots: number;
  /** Field of each id (see {@link SlotMapFn}). Required. */
  slotMapFn: SlotMapFn;
}

/**
 * Ids reduced per field: ids [batch, m] (rank <= 2; rank 1 = one id per sample)
 * -> [batch, nslots, embeddingSize], field of each id = slotMapFn(id); fields
 * without ids are zeros.
 */
export class FieldWiseEmbedding extends Embedding {
  /** Number of fields. */
  readonly nslots: number;
  /** Field of each id. */
  readonly slotMapFn: SlotMapFn;

  constructor(options: FieldWiseEmbeddingOptions) {
    if (typeof options?.slotMapFn !== 'function') throw invalidParameter('slotMapFn', 'a function', options?.slotMapFn, InvalidTypeError);
    if (typeof options.nslots !== 'number') throw invalidParameter('nslots', 'an integer >= 1', options.nslots, InvalidTypeError);
    checkInteger(options.nslots, 'nslots', { min: 1 });
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
    const one = (k: bigint | number, i: number): unknown => {
      try {
        return fn(k);
      } catch (e) {
        const hint = typeof k === 'bigint' ? ' (ids of int64 layers are bigint: write k % 3n, or Number(k) % 3)' : '';
        throw new InvalidArgumentError(`slotMapFn(ids)[${i}] threw for id ${k}: ${(e as Error)?.message ?? String(e)}${hint}`, {
          argument: `slotMapFn(ids)[${i}]`,
          cause: e,
        });
      }
    };
    const list =
      arr && typeof arr === 'object' && typeof arr.length === 'number' && arr.length === keys.length
        ? Array.from(arr)
        : Array.from(keys as ArrayLike<bigint | number>, one);
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
    const out = await this.reduce(k.keys, group, batch * this.nslots, [batch, this.nslots]);
    return new Tensor(out, [batch, this.nslots, this.embeddingSize]);
  }
}

/** `de.layers`. */
export const layers = {
  /** {@link Embedding} */
  Embedding,
  /** {@link BasicEmbedding} */
  BasicEmbedding,
  /** {@link SquashedEmbedding} */
  SquashedEmbedding,
  /** {@link FieldWiseEmbedding} */
  FieldWiseEmbedding,
} as const;
