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
 * The arrays a lookup copied its caller's ids (and weights) into, owned by the
 * trainable: `keys` / `weights` hold the record's values in their first entries (null:
 * not copied). Once a later lookup replaced the record and no reader holds it (no
 * training step or capture in progress; never handed out through `ids` or
 * `lookupRecord`), they take the next lookup's copies: no fresh array per lookup.
 */
export interface RecordCopies {
  keys: Keys | null;
  weights: Float32Array | null;
  /** Handed out to the user, or already reused: never reused (again). */
  kept: boolean;
}

/** The rows of a record's ids as its lookup read them, and which ids were in the table. */
export interface RecordRows {
  /** Rows, [n * dim]. */
  values: Float32Array;
  /** Per id: 1 when it was in the table. */
  exists: Uint8Array;
}

/** A record and what belongs to it: its rows once copied (v0), its buffers, its readers. */
interface RecordState {
  record: LookupRecord;
  v0: RecordRows | null;
  copies: RecordCopies | null;
  /** Internal readers in progress (a training step, a capture). */
  leases: number;
  /** A training step trained it: its rows are no longer copied before writes. */
  trained: boolean;
}

/** A lookup's copies of the caller's arrays and the views of them it records. */
export interface CopiedArrays {
  /** The copied ids (the first `keys.length` of the copy), or null when not copied. */
  keys: Keys | null;
  /** The copied weights, or null when not copied. */
  weights: Float32Array | null;
  /** The trainable's buffers behind them. */
  copies: RecordCopies;
}

/**
 * An internal reader's hold on a trainable's record (the training step): its buffers are
 * not reused, and its rows are copied before a write, until `release()`, also when a later
 * lookup replaced it meanwhile.
 */
export interface RecordLease {
  /** The record read. */
  record: LookupRecord;
  /** The record's rows as its lookup read them once copied (the variable was written since), else null. */
  readonly v0: RecordRows | null;
  /** The record's rows as its lookup read them (copied now when not yet). */
  capture(): Promise<RecordRows>;
  /** A training step trained the record: writes no longer copy its rows first. */
  trained(): void;
  /** Ends the hold (idempotent). */
  release(): void;
}

let copyArrays: (t: ShadowVariable, keys: Keys | null, weights: Float32Array | null) => CopiedArrays;
let recordCopied: (t: ShadowVariable, r: LookupRecord, v0: RecordRows | null, copies: RecordCopies | null) => void;
let leaseRecord: (t: ShadowVariable) => RecordLease | null;
let peekRecord: (t: ShadowVariable) => LookupRecord | null;

/** The engine's getters of typed arrays (no getter or property of the caller's array runs). */
const typedGetter = (name: PropertyKey): ((this: unknown) => unknown) => Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype) as object, name)!.get!;
const tagOf = typedGetter(Symbol.toStringTag);
const lengthOf = typedGetter('length');
/** The constructors of the arrays a record copies, by their engine tag (not by the array's own `constructor`, which a caller may set). */
const COPY_KINDS: Readonly<Record<string, new (n: number) => Keys | Float32Array>> = Object.freeze({ BigInt64Array, Int32Array, Float32Array });

/** A reusable buffer of `src`'s kind with room for `src` (`spare` when it fits), holding `src` in its first entries. */
function copyInto<A extends Keys | Float32Array>(src: A, spare: A | null): A {
  const kind = tagOf.call(src) as string;
  const n = lengthOf.call(src) as number;
  const fits = spare !== null && tagOf.call(spare) === kind && spare.length >= n;
  const buf = fits ? spare : (new COPY_KINDS[kind]!(n) as A);
  (buf as Float32Array).set(src as Float32Array);
  return buf;
}

/** The first `n` entries of `buf` (buf itself when that is all of it). */
function head<A extends Keys | Float32Array>(buf: A, n: number): A {
  return (buf.length === n ? buf : buf.subarray(0, n)) as A;
}

/** The larger of two spare buffers of the same kind (either may be null). */
function larger<A extends Keys | Float32Array>(a: A | null, b: A | null): A | null {
  if (a === null) return b;
  if (b === null || tagOf.call(b) !== tagOf.call(a)) return a;
  return b.length > a.length ? b : a;
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
 * them first. The caller's ids (and weights) are copied into two buffers the
 * trainable keeps and reuses from lookup to lookup.
 * Host memory; not shared between threads.
 */
export class ShadowVariable {
  /** Name of this trainable view on `params`. */
  readonly name: string;
  /** The Variable this view reads and trains. */
  readonly params: Variable<TfraKeyDtype>;
  /** L2 clip norm of the looked-up rows (0: none); training differentiates through it. */
  maxNorm: number;
  readonly #state: VariableState;
  /** The last lookup's record, its rows once copied and its buffers (null before the first). */
  #cur: RecordState | null = null;
  /** Earlier records a training step still holds whose rows were not copied yet: copied before writes too. */
  readonly #held = new Set<RecordState>();
  /** Buffers free for the next lookup's copies. */
  #spareKeys: Keys | null = null;
  #spareWeights: Float32Array | null = null;

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

  /** Ids of the last lookup (flat, stored key type), or null before the first. Later lookups do not change the array returned. */
  get ids(): Keys | null {
    this.#keep();
    return this.#cur?.record.ids ?? null;
  }

  /** Shape of the last lookup's output without dim (the gradient is shape + [dim]). */
  get shape(): readonly number[] {
    return this.#cur?.record.shape ?? [];
  }

  /** The last lookup (internal: the training step reads it). Later lookups do not change its arrays. */
  get lookupRecord(): LookupRecord | null {
    this.#keep();
    return this.#cur?.record ?? null;
  }

  /** Rows of the last lookup's ids as read (v0), [n * dim], once copied (see the class doc); else null. */
  get values(): Float32Array | null {
    return this.#cur?.v0?.values ?? null;
  }

  /** Per id of the last lookup: 1 when it was in the table (once v0 was copied); else null. */
  get exists(): Uint8Array | null {
    return this.#cur?.v0?.exists ?? null;
  }

  /**
   * Records a lookup (called by the lookups in train mode). `v0`, when the caller
   * already has the rows (a remote store, where others may write between lookup and
   * step), is kept; otherwise it is copied before the variable's next write.
   */
  record(r: LookupRecord, v0: RecordRows | null = null): void {
    this.#setRecord(r, v0, null);
  }

  #setRecord(r: LookupRecord, v0: RecordRows | null, copies: RecordCopies | null): void {
    const old = this.#cur;
    this.#cur = { record: r, v0, copies, leases: 0, trained: false };
    // a step holding the old record still needs its rows as read: copied before writes too
    if (old && old.leases > 0 && !old.v0 && !old.trained) this.#held.add(old);
    this.#syncPending();
    if (old) this.#reuse(old);
  }

  /** In the variable's pending set while a record's rows may still need copying before a write. */
  #syncPending(): void {
    const c = this.#cur;
    if ((c && !c.v0 && !c.trained) || this.#held.size > 0) this.#state.pending.add(this);
    else this.#state.pending.delete(this);
  }

  /** The current record's arrays are handed out: its buffers are never reused. */
  #keep(): void {
    if (this.#cur?.copies) this.#cur.copies.kept = true;
  }

  /** Makes the buffers of `st` spares once it is no longer the record and no reader holds it. */
  #reuse(st: RecordState): void {
    const c = st.copies;
    if (!c || c.kept || st.leases > 0 || st === this.#cur) return;
    c.kept = true;
    this.#spareKeys = larger(this.#spareKeys, c.keys);
    this.#spareWeights = larger(this.#spareWeights, c.weights);
  }

  /** Holds the current record for an internal reader (see {@link RecordLease}); null before the first lookup. */
  #lease(): RecordLease | null {
    const st = this.#cur;
    if (!st) return null;
    st.leases++;
    let held = true;
    return {
      record: st.record,
      get v0() {
        return st.v0;
      },
      capture: () => this.#captureState(st),
      trained: () => {
        st.trained = true;
        this.#held.delete(st);
        this.#syncPending();
      },
      release: () => {
        if (!held) return;
        held = false;
        st.leases--;
        if (st.leases === 0 && this.#held.delete(st)) this.#syncPending();
        this.#reuse(st);
      },
    };
  }

  /** The rows of record `st` as read, copied now if they were not yet (nothing wrote its ids since the lookup). */
  async #captureState(st: RecordState): Promise<RecordRows> {
    if (st.v0) return st.v0;
    st.leases++; // its buffers stay while the read is in flight
    try {
      const r = await this.#state.find(st.record.ids);
      st.v0 ??= r;
    } finally {
      st.leases--;
    }
    this.#held.delete(st);
    this.#syncPending();
    this.#reuse(st);
    return st.v0!;
  }

  /** Copies v0 now if it was not yet (the rows are still those the lookup read); also of earlier records a training step holds. */
  async capture(): Promise<RecordRows | null> {
    for (const st of [...this.#held]) await this.#captureState(st);
    const st = this.#cur;
    return st ? this.#captureState(st) : null;
  }

  /** {@link capture} through synchronous reads. */
  captureSync(): void {
    for (const st of [this.#cur, ...this.#held]) if (st && !st.v0) st.v0 = this.#state.findSync(st.record.ids);
    this.#held.clear();
    this.#syncPending();
  }

  /** True when v0 was copied because the variable was written after the lookup. */
  get captured(): boolean {
    return (this.#cur?.v0 ?? null) !== null;
  }

  static {
    copyArrays = (t, keys, weights) => {
      const copies: RecordCopies = { keys: null, weights: null, kept: false };
      if (keys) {
        copies.keys = copyInto(keys, t.#spareKeys);
        if (copies.keys === t.#spareKeys) t.#spareKeys = null;
      }
      if (weights) {
        copies.weights = copyInto(weights, t.#spareWeights);
        if (copies.weights === t.#spareWeights) t.#spareWeights = null;
      }
      return {
        keys: keys && copies.keys ? head(copies.keys, keys.length) : null,
        weights: weights && copies.weights ? head(copies.weights, weights.length) : null,
        copies,
      };
    };
    recordCopied = (t, r, v0, copies) => t.#setRecord(r, v0, copies);
    leaseRecord = (t) => t.#lease();
    peekRecord = (t) => t.#cur?.record ?? null;
  }
}

/**
 * Copies a lookup's `keys` / `weights` (null: not copied) into buffers of trainable
 * `t` for its record (`recordLookup`): a spare of an earlier record when one is
 * free, else fresh arrays.
 */
export function copyForRecord(t: ShadowVariable, keys: Keys | null, weights: Float32Array | null): CopiedArrays {
  return copyArrays(t, keys, weights);
}

/** {@link ShadowVariable.record} of a lookup whose arrays are (partly) in `copies` (from {@link copyForRecord}). */
export function recordLookup(t: ShadowVariable, r: LookupRecord, v0: RecordRows | null, copies: RecordCopies | null): void {
  recordCopied(t, r, v0, copies);
}

/**
 * Holds `t`'s current record while an internal reader (the training step) reads it: its
 * buffers are not reused and its rows are copied before writes meanwhile, also after a
 * later lookup replaced it. Null before the first lookup.
 */
export function holdRecord(t: ShadowVariable): RecordLease | null {
  return leaseRecord(t);
}

/** `t`'s record for a quick internal look (no await before the last use; nothing handed out). */
export function currentRecord(t: ShadowVariable): LookupRecord | null {
  return peekRecord(t);
}
