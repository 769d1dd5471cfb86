/** Binary classification metrics of the demo. */

/** Mean log-loss of probabilities `p` against 0/1 `labels` (p clamped to [1e-7, 1 - 1e-7]). */
export function logLoss(p: ArrayLike<number>, labels: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < p.length; i++) {
    const q = Math.min(1 - 1e-7, Math.max(1e-7, p[i]!));
    sum -= labels[i]! > 0.5 ? Math.log(q) : Math.log(1 - q);
  }
  return sum / p.length;
}

/**
 * Area under the ROC curve: the probability that a random positive scores above a
 * random negative (ties count one half), by ranking the scores (Mann-Whitney U).
 * NaN when the labels are all one class.
 */
export function auc(scores: ArrayLike<number>, labels: ArrayLike<number>): number {
  const n = scores.length;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[a]! - scores[b]!);
  let positives = 0;
  let rankSum = 0;
  for (let i = 0; i < n; ) {
    let j = i;
    while (j + 1 < n && scores[order[j + 1]!] === scores[order[i]!]) j++;
    const rank = (i + j) / 2 + 1; // average 1-based rank of the tie group
    for (let k = i; k <= j; k++) if (labels[order[k]!]! > 0.5) { positives++; rankSum += rank; }
    i = j + 1;
  }
  const negatives = n - positives;
  if (positives === 0 || negatives === 0) return NaN;
  return (rankSum - (positives * (positives + 1)) / 2) / (positives * negatives);
}

/** Value at quantile q in [0, 1] of `xs` (nearest rank on a sorted copy). */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}
