import { InvalidTypeError, invalidParameter, type Keys, validateMaxNorm } from '@embedstack/core';
import { Variable } from './variable.js';

/** TFRA's model modes: 'train' records lookups for training; 'inference' only reads. */
export type ModelMode = 'train' | 'inference';

const MODE_KEY = Symbol.for('embedstack.tfra.modelMode');
const modeState = ((globalThis as Record<symbol, unknown>)[MODE_KEY] ??= { mode: 'train' }) as { mode: ModelMode };

/** Lookups become read-only: no trainable records ids or values, optimizers refuse to train. */
export function enableInferenceMode(): void {
  modeState.mode = 'inference';
}

/** Back to training (the default). */
export function enableTrainMode(): void {
  modeState.mode = 'train';
}

export function getModelMode(): ModelMode {
  return modeState.mode;
}

/**
 * The trainable view of a Variable (TFRA's ShadowVariable / TrainableWrapper),
 * registered by `embeddingLookup(params, ids, { name })` and returned by
 * `params.getTrainableByName(name)`. It remembers its last lookup: the ids
 * (flattened, as stored), their shape, the values read (v0, before maxNorm
 * clipping) and whether each id existed. `applyGradients([[grad, shadow]])` then
 * updates exactly those rows; `grad` has the lookup's shape (ids.shape + [dim]).
 * Host memory; not shared between threads.
 */
export class ShadowVariable {
  readonly name: string;
  readonly params: Variable;
  maxNorm: number;
  #ids: Keys | null = null;
  #shape: number[] = [];
  #values: Float32Array | null = null;
  #exists: Uint8Array | null = null;

  /** @throws InvalidTypeError when params is not a de.Variable or name not a non-empty string; InvalidArgumentError for a bad maxNorm */
  constructor(params: Variable, name: string, maxNorm = 0) {
    if (!(params instanceof Variable)) throw invalidParameter('params', 'a de.Variable', params, InvalidTypeError);
    if (typeof name !== 'string' || name.length === 0) throw invalidParameter('name', 'a non-empty string', name, InvalidTypeError);
    if (maxNorm !== 0) validateMaxNorm(maxNorm);
    this.params = params;
    this.name = name;
    this.maxNorm = maxNorm;
  }

  get trainable(): boolean {
    return this.params.trainable;
  }

  get dim(): number {
    return this.params.dim;
  }

  /** Ids of the last lookup (flat, stored key type), or null before the first. */
  get ids(): Keys | null {
    return this.#ids;
  }

  /** Shape of the last lookup's ids. */
  get shape(): readonly number[] {
    return this.#shape;
  }

  /** Values read by the last lookup, [n * dim] (before maxNorm clipping). */
  get values(): Float32Array | null {
    return this.#values;
  }

  /** Per id of the last lookup: 1 when it was in the table. */
  get exists(): Uint8Array | null {
    return this.#exists;
  }

  /** Records a lookup (called by the embedding lookups in train mode). */
  record(ids: Keys, shape: readonly number[], values: Float32Array, exists: Uint8Array): void {
    this.#ids = ids.slice();
    this.#shape = shape.slice();
    this.#values = values.slice();
    this.#exists = exists.slice();
  }
}
