// The hash-bag ceiling's sizes are the table's own, and the bag suite's size sweep runs end to end
// (tiny sizes: its figures mean nothing here, only that every pairing runs on the same rows).
import { describe, expect, it } from 'vitest';
import { loadBackend } from '../backend.js';
import { Fixtures } from '../fixtures.js';
import { loadNative } from '../native.js';
import { dynamicTable } from '../tables.js';
import { makeKeys } from '../rng.js';
import { bagSweep, bestCeiling, ceilingSummary, hashCeilingName, presizedIndexBytes, RECORD_BYTES, tableLayoutBytes } from './hashBag.js';
import { TINY_MEASURE } from './common.js';

describe('the hash-bag ceiling', () => {
  it("takes the index size from a cpu table's memoryUsage(): 13 keys per 64-byte group when presized", async () => {
    const { backend } = await loadBackend('cpu');
    for (const n of [1000, 13_000, 70_001]) {
      const t = dynamicTable(backend, 16, makeKeys(n, 3));
      try {
        const cap = t.capacity();
        expect(cap).toBe(Math.max(1024, n));
        const got = tableLayoutBytes(t);
        expect(got).toEqual({ indexBytes: presizedIndexBytes(cap), recordBytes: cap * RECORD_BYTES, from: 'memoryUsage' });
        // by hand: 70,001 keys -> 70,001 / 13 = 5384 groups + 1
        if (n === 70_001) expect(got.indexBytes).toBe(5385 * 64);
      } finally {
        t.dispose();
      }
    }
  });

  it('prints each ratio of a group from its figures, and a dash for a missing one', () => {
    const f = (name: string, kind: 'ours' | 'peer', samples: number[]) => ({ name, kind, value: samples[1]!, unit: 'rows/s', samples, interleaved: 1 });
    const g = {
      title: 't',
      params: {},
      figures: [f('static', 'ours', [100, 100, 100]), f('dynamic', 'ours', [50, 60, 70]), f('gather', 'peer', [100, 125, 100]), f('ceiling', 'peer', [50, 50, 50])],
    };
    // per round: dynamic / ceiling 1.0, 1.2, 1.4; dynamic / gather 0.5, 0.48, 0.7; ceiling / gather 0.5, 0.4, 0.5
    expect(ceilingSummary(g, 'dynamic', 'static', 'gather', 'ceiling')).toBe(
      'dynamic 1.20x the hash-bag ceiling, 0.50x the gather-reduce; the ceiling 0.50x the gather-reduce; static 1.00x the gather-reduce; dynamic / static 0.60x',
    );
    expect(ceilingSummary(g, 'dynamic', 'static', 'gather', 'none')).toMatch(/^dynamic — the hash-bag ceiling/);
  });

  it("is the fastest variant of each round, keeping the rounds' pairing, and says which variant won how often", () => {
    const v = (name: string, samples: number[]) => ({ name: `${hashCeilingName(2)}: ${name}`, kind: 'peer' as const, value: NaN, unit: 'rows/s', samples, interleaved: 7 });
    const other = { name: 'dynamic', kind: 'ours' as const, value: 5, unit: 'rows/s', samples: [5, 5, 5, 5], interleaved: 7 };
    const figs = bestCeiling([v('a', [10, 1, 3, 8]), other, v('b', [2, 9, 4, 1]), v('c', [1, 1, 6, 9])], 2, 'sizes');
    expect(figs.map((f) => f.name)).toEqual(['dynamic', hashCeilingName(2)]);
    const c = figs[1]!;
    expect(c.samples).toEqual([10, 9, 6, 9]);
    expect(c.value).toBe(9); // median of 6, 9, 9, 10 (the middle two averaged)
    expect(c.interleaved).toBe(7);
    expect(c.note).toBe('sizes; per round the fastest of 3 variants, rounds won: a 1, b 1, c 2 of 4');
  });

  it('leaves figures without any variant as they are (no ceiling made up)', () => {
    const other = { name: 'dynamic', kind: 'ours' as const, value: 5, unit: 'rows/s', samples: [5, 5], interleaved: 2 };
    expect(bestCeiling([other], 2, 'sizes')).toEqual([other]);
    expect(bestCeiling([], 2, 'sizes')).toEqual([]);
  });

  it('sweeps sizes: one group per size with the four figures, measured on tables it builds and frees', async () => {
    const { backend, threads } = await loadBackend('cpu');
    const native = loadNative();
    const fixtures = new Fixtures(backend, native, threads);
    try {
      const { groups, summary } = await bagSweep({ backend, native, fixtures, threads }, { dim: 8, features: 2, ids: 3, batch: 16 }, [2048, 5000], undefined, TINY_MEASURE);
      expect(groups.map((g) => g.params.keys)).toEqual([2048, 5000]);
      for (const g of groups) {
        expect(g.figures.map((x) => x.name)).toEqual([
          'static lookupCombinedSync, reused out',
          'dynamic lookupCombinedSync, reused out',
          `native loop (${threads === 1 ? '1 thread' : `${threads} threads`})`,
          `native hash-bag ceiling (${threads === 1 ? '1 thread' : `${threads} threads`})`,
        ]);
        for (const x of g.figures) expect(x.value).toBeGreaterThan(0);
      }
      expect(summary).toHaveLength(2);
      expect(summary[0]).toMatch(/^2K keys: dynamic \d+\.\d\dx the hash-bag ceiling/);
    } finally {
      fixtures.releaseAll();
    }
  }, 60_000);
});
