/** Small pure helpers: ratios and number formatting. */

/**
 * How many times `ours` the `peer` figure is, for figures where higher is better
 * (rates). For costs (bytes, seconds: lower is better) pass `lowerIsBetter`, so a
 * ratio > 1 always means "ours is better". NaN when either side is missing, not
 * finite, or not positive.
 */
export function ratio(ours: number, peer: number, lowerIsBetter = false): number {
  if (!Number.isFinite(ours) || !Number.isFinite(peer) || ours <= 0 || peer <= 0) return NaN;
  return lowerIsBetter ? peer / ours : ours / peer;
}

export function formatRatio(r: number): string {
  if (!Number.isFinite(r)) return '—';
  if (r >= 100) return `${r.toFixed(0)}x`;
  if (r >= 10) return `${r.toFixed(1)}x`;
  return `${r.toFixed(2)}x`;
}

/** 3 significant digits with an SI prefix: 1234567 -> "1.23 M". */
export function formatSI(x: number): string {
  if (!Number.isFinite(x)) return '—';
  const a = Math.abs(x);
  const units: [number, string][] = [
    [1e12, 'T'],
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
  ];
  for (const [v, u] of units) if (a >= v) return `${sig3(x / v)} ${u}`;
  return sig3(x);
}

function sig3(x: number): string {
  const a = Math.abs(x);
  if (a === 0) return '0';
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(3);
}

/** Binary units for sizes: 1073741824 -> "1.00 GiB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v.toFixed(0)} B` : `${sig3(v)} ${units[i]}`;
}

/** Counts with power-of-two shorthand where exact: 4194304 -> "4M", 65536 -> "64K", 1000 -> "1000". */
export function formatCount(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)}M`;
  if (n >= 1 << 10 && n % (1 << 10) === 0) return `${n / (1 << 10)}K`;
  return String(n);
}
