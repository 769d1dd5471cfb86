/** How {@link rowShare} makes a whole row count of `fraction * rows`. */
export type RowRounding = 'ceil' | 'floor' | 'round';

/** Relative distance from a whole (or half) row count within which a product counts as exactly that. */
const TOLERANCE = 1e-12;

/**
 * `fraction * rows` made a whole row count (`Math.ceil`, `Math.floor` or `Math.round`) the way a
 * config means it: a product within a relative 1e-12 of a whole or half row count counts as exactly
 * that, so the float error of a decimal fraction never adds or drops a row (`0.07 * 100` is
 * 7.000000000000001, ceil 7 not 8; `0.29 * 100` is 28.999999999999996, floor 29 not 28;
 * `0.285 * 100` is 28.499999999999996, round 29 not 28). Used for every share of a table or a
 * partition that a ps config gives as a fraction (`gpucacheper`, `initial_cache_rate`,
 * `cache_refresh_percentage_per_iteration`, `overflow_resolution_target`).
 */
export function rowShare(fraction: number, rows: number, rounding: RowRounding): number {
  const product = fraction * rows;
  const half = Math.round(product * 2) / 2;
  // at most a millionth of a row: for huge products a relative tolerance alone would snap real fractions
  const exact = Math.abs(product - half) <= Math.min(1e-6, TOLERANCE * Math.max(1, Math.abs(product))) ? half : product;
  return Math[rounding](exact);
}
