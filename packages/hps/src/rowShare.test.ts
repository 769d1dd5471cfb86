// Shares of a table given as fractions in ps.json (gpucacheper, initial_cache_rate,
// cache_refresh_percentage_per_iteration, overflow_resolution_target) are whole row counts the way
// the config means them: 0.07 of 100 rows is 7, never 8 for 7.000000000000001 in floats.
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { HPS } from './index.js';
import { rowShare } from './rowShare.js';
import { expectedRows, psConfig, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const keys = spreadKeys(101);
const dim = 4;

/** A server of one table of the first `rows` keys, model options `model`, global options `global`. */
async function serve(rows: number, model: Record<string, unknown>, global: Record<string, unknown> = {}): Promise<HPS> {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const s = await HPS.create({ psConfig: psConfig([writeTable(join(t.dir, 't0'), keys.slice(0, rows), dim)], [dim], model, global) });
  cleanups.push(() => s.close());
  return s;
}

/** How many of `ask` are found (not the default value -1) with no L1 and no L3: the rows L2 holds. */
async function foundInL2(s: HPS, ask: readonly bigint[]): Promise<boolean[]> {
  const got = (await s.lookup(ask, 'm', 0)).data as Float32Array;
  return ask.map((_, i) => got[i * dim] !== -1);
}

describe('fractions of a row count (computed by hand)', () => {
  it('rowShare: float error never adds or drops a row; real fractions still round as asked', () => {
    expect(rowShare(0.07, 100, 'ceil')).toBe(7); // 0.07 * 100 = 7.000000000000001
    expect(rowShare(0.14, 100, 'ceil')).toBe(14); // 14.000000000000002
    expect(rowShare(0.29, 100, 'floor')).toBe(29); // 28.999999999999996
    expect(rowShare(0.57, 100, 'floor')).toBe(57); // 56.99999999999999
    expect(rowShare(0.285, 100, 'round')).toBe(29); // 28.499999999999996: 28.5
    expect(rowShare(0.2, 10, 'ceil')).toBe(2);
    expect(rowShare(0.25, 10, 'ceil')).toBe(3);
    expect(rowShare(0.25, 10, 'floor')).toBe(2);
    expect(rowShare(0.25, 10, 'round')).toBe(3);
    expect(rowShare(0.0701, 100, 'ceil')).toBe(8); // 7.01: a real fraction of a row
    expect(rowShare(0.2899, 100, 'floor')).toBe(28);
    expect(rowShare(0, 100, 'ceil')).toBe(0);
    expect(rowShare(1, 100, 'floor')).toBe(100);
    expect(rowShare(0.3, 1e9, 'floor')).toBe(3e8);
  });

  it('gpucacheper: the L1 holds ceil(gpucacheper * rows) rows (0.07 x 100 -> 7, was 8; 0.2 x 10 -> 2; 0.25 x 10 -> 3)', async () => {
    for (const [per, rows, want] of [
      [0.07, 100, 7],
      [0.14, 100, 14],
      [0.2, 10, 2],
      [0.25, 10, 3],
    ] as const) {
      const s = await serve(rows, { gpucacheper: per });
      expect(s.modelInfo('m').tables[0]!.cache).toEqual({ type: 'dynamic', rows: want });
    }
  });

  it("uvm: the device share is floor(gpucacheper * rows) (0.29 x 100 -> 29, was 28; 0.57 x 100 -> 57, was 56)", async () => {
    for (const [per, rows, want] of [
      [0.29, 100, 29],
      [0.57, 100, 57],
      [0.07, 100, 7],
      [0.25, 10, 2],
    ] as const) {
      const s = await serve(rows, { embedding_cache_type: 'uvm', gpucacheper: per });
      expect(s.modelInfo('m').tables[0]!.cache).toEqual({ type: 'uvm', rows, deviceRows: want, hostRows: rows - want });
    }
  });

  it('initial_cache_rate: L2 is loaded with round(rate * rows) rows (0.285 x 100 -> 29, was 28)', async () => {
    const s = await serve(100, { gpucache: false }, { volatile_db: { type: 'hash_map', initial_cache_rate: 0.285 } });
    // no L1, no L3: a key is found only in L2, which holds the first rows of the file
    expect(await foundInL2(s, keys.slice(0, 100))).toEqual(keys.slice(0, 100).map((_, i) => i < 29));
  });

  it('cache_refresh_percentage_per_iteration: init_ec prefills round(percentage * rows) rows into L1 (0.285 x 100 -> 29, was 28)', async () => {
    const s = await serve(100, { gpucacheper: 0.5, init_ec: true, cache_refresh_percentage_per_iteration: 0.285 });
    // the 29th row of the file was prefilled (an L1 hit), the 30th was not
    await s.lookup([keys[28]!], 'm', 0);
    expect(s.stats('m', 0).l1).toMatchObject({ hits: 1, misses: 0 });
    await s.lookup([keys[29]!], 'm', 0);
    expect(s.stats('m', 0).l1).toMatchObject({ hits: 1, misses: 1 });
  });

  it('overflow_resolution_target: a partition past overflow_margin is cut to floor(target * margin) rows (0.29 x 100 -> 29, was 28)', async () => {
    const s = await serve(101, { gpucache: false }, { volatile_db: { type: 'hash_map', num_partitions: 1, overflow_margin: 100, overflow_resolution_target: 0.29 } });
    const found = await foundInL2(s, keys);
    expect(found.filter(Boolean).length).toBe(29);
    const present = new Set(keys.filter((_, i) => found[i]));
    expect(Array.from((await s.lookup(keys, 'm', 0)).data as Float32Array)).toEqual(expectedRows(keys, dim, present, -1));
  });
});
