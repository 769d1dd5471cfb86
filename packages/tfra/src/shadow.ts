import { type Combiner, InvalidTypeError, invalidParameter, type Keys, validateMaxNorm } from '@embedstack/core';
import type { TfraKeyDtype } from './keys.js';
import type { Variable } from './variable.js';
import { type VariableState, stateOf } from './variableState.js';

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

/** The current model mode: 'train' (the default) or 'inference' (after {@link enableInferenceMode}). */
export function getModelMode(): ModelMode {
  return modeState.mode;
}

/** The pooling of a sparse lookup: bag rows over the recorded ids (their order), weights, combiner. */
export interface RecordedBag {
  /** Bag row boundaries over the recorded ids, [rows + 1] (CSR row splits). */
  rowSplits: Int32Array;
  /** Per-id weights, [n]; null when all 1. */
  weights: Float32Array | null;
  /** How each bag row was pooled ('sum', 'mean' or 'sqrtn'). */
  combiner: Combiner;
}

/** What a lookup records on its trainable. */
export interface LookupRecord {
  /** The ids (stored keys), one per looked-up entry (bag order for sparse lookups). */
  ids: Keys;
  /** The lookup's output shape without dim: the gradient's shape is shape + [dim]. */
  shape: readonly number[];
  /** Sparse lookups: how the entries were pooled; null: one output row per id. */
  bag: RecordedBag | null;
  /** maxNorm of the lookup (0: none). */
  maxNorm: number;
}

/**
 * The trainable view of a Variable (TFRA's ShadowVariable / TrainableWrapper),
 * registered by the embedding lookups (`embeddingLookup(params, ids, { name })`,
 * the sparse lookups and the layers) and returned by `params.getTrainableByName(name)`.
 * It remembers its last lookup: the ids, the output shape, the pooling of a sparse
 * lookup, and the rows as they were read (v0). `applyGradients([[grad, shadow]])` then
 * trains exactly those rows: `grad` is the gradient of the loss with respect to the
 * lookup's OUTPUT (its shape), pushed back through maxNorm and the combiner by core.
 *
 * v0 is copied lazily: while nothing writes the variable, its rows are v0, and the
 * first write after the lookup (another trainable's step, an upsert, ...) copies
 * them first. Host memory; not shared between threads.
 */
export class ShadowVariable {
  /** Name of this trainable view on `params`. */
  readonly name: string;
  /** The Variable this view reads and trains. */
  readonly params: Variable<TfraKeyDtype>;
  /** L2 clip norm of the looked-up rows (0: none); training differentiates through it. */
  maxNorm: number;
  readonly #state: VariableState;
  #record: LookupRecord | null = null;
  #v0: { values: Float32Array; exists: Uint8Array } | null = null;

  /** @throws InvalidTypeError when params is not a de.Variable or name not a non-empty string; InvalidArgumentError for a bad maxNorm */
  constructor(params: Variable<TfraKeyDtype>, name: string, maxNorm = 0) {
    const state = stateOf(params);
    if (!state) throw invalidParameter('params', 'a de.Variable', params, InvalidTypeError);
    if (typeof name !== 'string' || name.length === 0) throw invalidParameter('name', 'a non-empty string', name, InvalidTypeError);
    if (maxNorm !== 0) validateMaxNorm(maxNorm);
    this.params = params;
    this.#state = state;
    this.name = name;
    this.maxNorm = maxNorm;
  }

  /** Whether `params` is trainable. */
  get trainable(): boolean {
    return this.params.trainable;
  }

  /** Floats per row of `params`. */
  get dim(): number {
    return this.params.dim;
  }

  /** Ids of the last lookup (flat, stored key type), or null before the first. */
  get ids(): Keys | null {
    return this.#record?.ids ?? null;
  }

  /** Shape of the last lookup's output without dim (the gradient is shape + [dim]). */
  get shape(): readonly number[] {
    return this.#record?.shape ?? [];
  }

  /** The last lookup (internal: the training step reads it). */
  get lookupRecord(): LookupRecord | null {
    return this.#record;
  }

  /** Rows of the last lookup's ids as read (v0), [n * dim], once copied (see the class doc); else null. */
  get values(): Float32Array | null {
    return this.#v0?.values ?? null;
  }

  /** Per id of the last lookup: 1 when it was in the table (once v0 was copied); else null. */
  get exists(): Uint8Array | null {
    return this.#v0?.exists ?? null;
  }

  /**
   * Records a lookup (called by the lookups in train mode). `v0`, when the caller
   * already has the rows (a remote store, where others may write between lookup and
   * step), is kept; otherwise it is copied before the variable's next write.
   */
  record(r: LookupRecord, v0: { values: Float32Array; exists: Uint8Array } | null = null): void {
    this.#record = r;
    this.#v0 = v0;
    if (v0) this.#state.pending.delete(this);
    else this.#state.pending.add(this);
  }

  /** Copies v0 now if it was not yet (the rows are still those the lookup read). */
  async capture(): Promise<{
    /** Rows of the last lookup's ids as read, [n * dim]. */
    values: Float32Array;
    /** Per id: 1 when it was in the table. */
    exists: Uint8Array;
  } | null> {
    if (this.#v0 || !this.#record) return this.#v0;
    const r = await this.#state.find(this.#record.ids);
    this.#v0 = r;
    this.#state.pending.delete(this);
    return r;
  }

  /** {@link capture} through synchronous reads. */
  captureSync(): void {
    if (this.#v0 || !this.#record) return;
    this.#v0 = this.#state.findSync(this.#record.ids);
    this.#state.pending.delete(this);
  }

  /** True when v0 was copied because the variable was written after the lookup. */
  get captured(): boolean {
    return this.#v0 !== null;
  }
}
