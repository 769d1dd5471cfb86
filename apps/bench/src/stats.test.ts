import { describe, expect, it } from 'vitest';
import { enough } from './harness.js';
import { formatBytes, formatCount, formatRatio, formatSI, median, quantile, ratio } from './stats.js';

describe('median and quantile', () => {
  it('median of odd, even and empty lists', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
  it('quantile by nearest rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(quantile(xs, 0.5)).toBe(50);
    expect(quantile(xs, 0.99)).toBe(99);
    expect(quantile(xs, 1)).toBe(100);
    expect(quantile(xs, 0)).toBe(1);
  });
});

describe('ratio', () => {
  it('divides rates, and inverts costs so > 1 means better', () => {
    expect(ratio(30e6, 2e6)).toBe(15);
    expect(ratio(1, 4)).toBe(0.25);
    expect(ratio(280, 256, true)).toBeCloseTo(256 / 280, 12);
    expect(ratio(100, 400, true)).toBe(4);
  });
  it('is NaN when a side is missing, zero, negative or infinite', () => {
    expect(ratio(NaN, 1)).toBeNaN();
    expect(ratio(1, 0)).toBeNaN();
    expect(ratio(-1, 2)).toBeNaN();
    expect(ratio(Infinity, 2)).toBeNaN();
  });
});

describe('formatting', () => {
  it('formats ratios, SI figures, bytes and counts', () => {
    expect(formatRatio(15.04)).toBe('15.0x');
    expect(formatRatio(0.7)).toBe('0.70x');
    expect(formatRatio(123.4)).toBe('123x');
    expect(formatRatio(NaN)).toBe('—');
    expect(formatSI(45_200_000)).toBe('45.2 M');
    expect(formatSI(98_012)).toBe('98.0 k');
    expect(formatSI(1.234e9)).toBe('1.23 G');
    expect(formatSI(0.5)).toBe('0.500');
    expect(formatBytes(1 << 30)).toBe('1.00 GiB');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatCount(4 << 20)).toBe('4M');
    expect(formatCount(65536)).toBe('64K');
    expect(formatCount(1000)).toBe('1000');
  });
});

describe('enough (when sampling stops)', () => {
  const o = { warmup: 1, minSamples: 5, maxSamples: 40, minMs: 400, maxMs: 4000, sampleMs: 20 };
  it('needs both minSamples and minMs, stops at maxSamples or maxMs', () => {
    expect(enough(4, 10_000 - 6001, o)).toBe(false); // 3999 ms, 4 samples
    expect(enough(5, 399, o)).toBe(false);
    expect(enough(5, 400, o)).toBe(true);
    expect(enough(40, 1, o)).toBe(true);
    expect(enough(1, 4000, o)).toBe(true);
    expect(enough(0, 9999, o)).toBe(false);
  });
});
