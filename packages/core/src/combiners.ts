import { invalidParameter, argName } from './errors.js';
import { errorClassFor } from './validation.js';

/**
 * Embedding-bag combiners. For a row with ids i_1..i_n and weights w_1..w_n (all 1
 * when none): sum = Σ w_j e_j; mean = sum / Σ w_j; sqrtn = sum / sqrt(Σ w_j²).
 * A zero denominator gives zeros (div-no-nan); a row with no ids gives zeros.
 * `maxNorm` > 0 clips each e_j to that L2 norm before combining.
 */
export type Combiner = 'sum' | 'mean' | 'sqrtn';
/** Every {@link Combiner}, in order: `['sum', 'mean', 'sqrtn']`. */
export const COMBINERS: readonly Combiner[] = ['sum', 'mean', 'sqrtn'];

/** Whether `value` is a {@link Combiner} ('sum', 'mean' or 'sqrtn'). */
export function isCombiner(value: unknown): value is Combiner {
  return value === 'sum' || value === 'mean' || value === 'sqrtn';
}

/**
 * Returns `value` as a {@link Combiner}.
 * @throws InvalidArgumentError naming `argument` (default 'combiner') unless it is 'sum', 'mean' or 'sqrtn'
 */
export function validateCombiner(value: unknown, argument = 'combiner'): Combiner {
  argument = argName(argument, 'combiner');
  if (!isCombiner(value)) throw invalidParameter(argument, "one of 'sum', 'mean', 'sqrtn'", value, errorClassFor(value, 'string'));
  return value;
}

/**
 * The combiners of `lookupCombined` (the forward embedding bag): the linear ones and
 * `max` / `min`, the element-wise maximum / minimum over the row's entries of
 * w_j e_j (each e_j clipped first when `maxNorm` > 0), in double, rounded once; a
 * row with no ids gives zeros. `max` and `min` have no backward in core (the
 * gradient ops and the sharded partial lookup take only {@link Combiner}s); the
 * result does not depend on entry order, so shards need no partial sums for them.
 */
export type LookupCombiner = Combiner | 'max' | 'min';
/** Every {@link LookupCombiner}, in order: `['sum', 'mean', 'sqrtn', 'max', 'min']`. */
export const LOOKUP_COMBINERS: readonly LookupCombiner[] = ['sum', 'mean', 'sqrtn', 'max', 'min'];

/** Whether `value` is a {@link LookupCombiner} (a Combiner, 'max' or 'min'). */
export function isLookupCombiner(value: unknown): value is LookupCombiner {
  return isCombiner(value) || value === 'max' || value === 'min';
}

/**
 * Returns `value` as a {@link LookupCombiner}.
 * @throws InvalidArgumentError naming `argument` (default 'combiner') unless it is 'sum', 'mean', 'sqrtn', 'max' or 'min'
 */
export function validateLookupCombiner(value: unknown, argument = 'combiner'): LookupCombiner {
  argument = argName(argument, 'combiner');
  if (!isLookupCombiner(value)) throw invalidParameter(argument, "one of 'sum', 'mean', 'sqrtn', 'max', 'min'", value, errorClassFor(value, 'string'));
  return value;
}

/** `undefined`/`null` -> no clipping (0); otherwise a finite number > 0. */
export function validateMaxNorm(value: unknown, argument = 'maxNorm'): number {
  argument = argName(argument, 'maxNorm');
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw invalidParameter(argument, 'a finite number > 0, undefined or null', value, errorClassFor(value, 'number'));
  }
  return value;
}

/** The normalised bag a backend receives: ragged rows of keys with optional weights. */
export interface Bag<K> {
  /** [nrows + 1], non-decreasing, from 0 to keys.length. */
  rowSplits: Int32Array;
  /** [nnz] keys, row after row. */
  keys: K;
  /** [keys.length] or null for all-ones. */
  weights: Float32Array | null;
}
