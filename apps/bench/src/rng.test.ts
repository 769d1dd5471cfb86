import { describe, expect, it } from 'vitest';
import { drawIndices, fillKeys, makeKeys, pickKeys, scatterRank, ZipfSampler } from './rng.js';

/** Exact Zipf pmf over 1..n, computed directly. */
function zipfPmf(n: number, s: number): number[] {
  const w = Array.from({ length: n }, (_, i) => (i + 1) ** -s);
  const h = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / h);
}

describe('ZipfSampler', () => {
  it('draws ranks in [1, n] with the Zipf(s) frequencies', () => {
    const n = 1000;
    const s = 1.05;
    const draws = 200_000;
    const z = new ZipfSampler(n, s, 3);
    const counts = new Array<number>(n + 1).fill(0);
    let bad = 0;
    for (let i = 0; i < draws; i++) {
      const k = z.next();
      if (k >= 1 && k <= n && Number.isInteger(k)) counts[k]!++;
      else bad++;
    }
    expect(bad).toBe(0);
    const p = zipfPmf(n, s);
    // The head ranks, each within 5 standard deviations of its expectation.
    for (let k = 1; k <= 10; k++) {
      const mean = draws * p[k - 1]!;
      const sd = Math.sqrt(draws * p[k - 1]! * (1 - p[k - 1]!));
      expect(Math.abs(counts[k]! - mean)).toBeLessThan(5 * sd);
    }
    // Chi-square over 20 bins of equal expected mass: far below the 0.001 critical value (43.8 at 19 dof).
    const bins: [number, number][] = [];
    let start = 1;
    let acc = 0;
    for (let k = 1; k <= n; k++) {
      acc += p[k - 1]!;
      if (acc >= (bins.length + 1) / 20 || k === n) {
        bins.push([start, k]);
        start = k + 1;
      }
    }
    let chi = 0;
    for (const [a, b] of bins) {
      let obs = 0;
      let exp = 0;
      for (let k = a; k <= b; k++) {
        obs += counts[k]!;
        exp += draws * p[k - 1]!;
      }
      chi += (obs - exp) ** 2 / exp;
    }
    expect(chi).toBeLessThan(43.8);
  });

  it('is steeper for a larger exponent and deterministic per seed', () => {
    const share1 = (s: number): number => {
      const z = new ZipfSampler(100_000, s, 5);
      let ones = 0;
      for (let i = 0; i < 50_000; i++) if (z.next() === 1) ones++;
      return ones / 50_000;
    };
    const p105 = zipfPmf(100_000, 1.05)[0]!;
    expect(Math.abs(share1(1.05) - p105)).toBeLessThan(0.01);
    expect(share1(1.5)).toBeGreaterThan(share1(1.05) + 0.2);
    const a = new ZipfSampler(50, 1.2, 9);
    const b = new ZipfSampler(50, 1.2, 9);
    expect(Array.from({ length: 20 }, () => a.next())).toEqual(Array.from({ length: 20 }, () => b.next()));
  });

  it('handles n = 1 and rejects bad parameters', () => {
    const z = new ZipfSampler(1, 1.05);
    for (let i = 0; i < 10; i++) expect(z.next()).toBe(1);
    expect(() => new ZipfSampler(0, 1)).toThrow(/n to be an integer >= 1 but received 0/);
    expect(() => new ZipfSampler(10, 0)).toThrow(/s > 0 but received 0/);
  });
});

describe('scatterRank', () => {
  it('is a bijection from ranks 1..n onto 0..n-1', () => {
    for (const n of [1, 2, 1000, 4096, 12345, 1 << 20]) {
      const seen = new Uint8Array(n);
      for (let r = 1; r <= n; r++) seen[scatterRank(r, n)]!++;
      expect(seen.every((c) => c === 1)).toBe(true);
    }
  });
});

describe('keys', () => {
  it('makes distinct keys, and fillKeys continues the same sequence', () => {
    const k = makeKeys(200_000, 1);
    expect(new Set(k).size).toBe(200_000);
    const part = fillKeys(new BigInt64Array(1000), 150_000, 1);
    expect(Array.from(part)).toEqual(Array.from(k.subarray(150_000, 151_000)));
    expect(makeKeys(10, 2)).not.toEqual(makeKeys(10, 1));
  });

  it('pickKeys copies keys[idx[i]]', () => {
    const k = makeKeys(100, 4);
    const idx = Uint32Array.from([5, 0, 99, 5]);
    expect(Array.from(pickKeys(k, idx))).toEqual([k[5], k[0], k[99], k[5]]);
  });
});

describe('drawIndices', () => {
  it('uniform draws cover [0, n) evenly', () => {
    const n = 10;
    const idx = drawIndices(100_000, n, 'uniform', 1);
    const counts = new Array<number>(n).fill(0);
    for (const i of idx) counts[i]!++;
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(500);
  });

  it('zipf draws put the most mass on the hottest (scattered) index', () => {
    const n = 1000;
    const idx = drawIndices(50_000, n, { zipf: 1.05 }, 1);
    const counts = new Array<number>(n).fill(0);
    for (const i of idx) counts[i]!++;
    const hottest = counts.indexOf(Math.max(...counts));
    expect(hottest).toBe(scatterRank(1, n));
    expect(Math.abs(counts[hottest]! / 50_000 - zipfPmf(n, 1.05)[0]!)).toBeLessThan(0.01);
  });
});
