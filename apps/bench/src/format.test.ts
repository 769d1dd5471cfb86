import { describe, expect, it } from 'vitest';
import { formatBytes, formatCount, formatRatio, formatSI, ratio } from './format.js';

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
