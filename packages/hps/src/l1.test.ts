// The L1 cache is set-associative LRU (HugeCTR's GPU embedding cache): checked through the
// server's L1 hit/miss counts against a small set-associative model written here.
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
// core's cache contract: set = ((fmix64(key) >> 32) * sets) >> 32 (a plain BigInt oracle).
import { cacheSetOf as setOf } from '@embedstack/core/testing';
import { HPS, L1_WAYS } from './index.js';
import { expectedRows, psConfig, spreadKeys, tempDir, writeTable } from '../test/fixtures.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Per set, keys from least to most recently used; a full set drops its first. */
class SetLru {
  readonly sets: bigint[][];
  constructor(
    sets: number,
    readonly ways: number,
  ) {
    this.sets = Array.from({ length: sets }, () => []);
  }
  /** A lookup of one key found at L2/L3: whether it was an L1 hit. */
  touch(k: bigint): boolean {
    const set = this.sets[setOf(k, this.sets.length)]!;
    const at = set.indexOf(k);
    if (at >= 0) {
      set.splice(at, 1);
      set.push(k);
      return true;
    }
    if (set.length === this.ways) set.shift();
    set.push(k);
    return false;
  }
}

describe('HPS L1: set-associative LRU', () => {
  it('a full set evicts its own least recently used key; every lookup hits or misses as the model says', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const keys = spreadKeys(1000);
    const present = new Set(keys);
    // 12.8% of 1000 rows = 128 slots = 2 sets of 64; threshold > 1: misses are always cached at once
    const s = await HPS.create({ psConfig: psConfig([writeTable(join(t.dir, 't0'), keys, 4)], [4], { gpucacheper: 0.128, hit_rate_threshold: 1.1 }) });
    cleanups.push(() => s.close());
    expect(L1_WAYS).toBe(64);
    const model = new SetLru(2, 64);
    const set0 = keys.filter((k) => setOf(k, 2) === 0).slice(0, 70);
    const set1 = keys.filter((k) => setOf(k, 2) === 1).slice(0, 70);
    let before = s.stats('m', 0).l1;
    /** One key's lookup (rows checked): whether it was an L1 hit. */
    const lookup = async (k: bigint): Promise<boolean> => {
      const got = await s.lookup([k], 'm', 0);
      expect(Array.from(got.data as Float32Array)).toEqual(expectedRows([k], 4, present, -1));
      const now = s.stats('m', 0).l1;
      const hit = now.hits - before.hits === 1;
      expect(hit || now.misses - before.misses === 1).toBe(true);
      before = now;
      return hit;
    };
    // fill set 0 (64 misses), touch its oldest key, then one more key: the second oldest goes
    for (const k of set0.slice(0, 64)) expect(await lookup(k)).toBe(false);
    expect(await lookup(set0[0]!)).toBe(true);
    expect(await lookup(set0[64]!)).toBe(false);
    expect(await lookup(set0[0]!)).toBe(true);
    expect(await lookup(set0[2]!)).toBe(true);
    expect(await lookup(set0[1]!)).toBe(false); // evicted by set0[64]
    for (const k of [...set0.slice(0, 64), set0[0]!, set0[64]!, set0[0]!, set0[2]!, set0[1]!]) model.touch(k);
    // set 1 is untouched by all that: its keys are misses, set 0's residents stay
    expect(await lookup(set1[0]!)).toBe(false);
    model.touch(set1[0]!);
    // random single-key lookups over both sets (more keys than ways): hit or miss exactly as the model says
    let x = 12345;
    const pool = [...set0, ...set1];
    for (let step = 0; step < 400; step++) {
      x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
      const k = pool[x % pool.length]!;
      const want = model.touch(k);
      expect(await lookup(k), `step ${step}, key ${k}`).toBe(want);
    }
  });

  it('below 64 rows a cache is one set of exactly its rows (ways = min(64, rows)); from 64 up, whole sets of 64', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const keys = spreadKeys(100);
    const present = new Set(keys);
    // 100 rows: gpucacheper 0.2 -> 20 rows, one set of 20 slots; 0.7 -> 70 rows, 2 sets of 64 = 128 slots
    const files = writeTable(join(t.dir, 't0'), keys, 2);
    const small = await HPS.create({ psConfig: psConfig([files], [2], { gpucacheper: 0.2, hit_rate_threshold: 1.1 }) });
    cleanups.push(() => small.close());
    const large = await HPS.create({ psConfig: psConfig([files], [2], { gpucacheper: 0.7, hit_rate_threshold: 1.1 }) });
    cleanups.push(() => large.close());
    expect(small.modelInfo('m').tables[0]!.cache).toEqual({ type: 'dynamic', rows: 20 });
    expect(large.modelInfo('m').tables[0]!.cache).toEqual({ type: 'dynamic', rows: 128 });
    // one set of 20: 20 keys fill it (all misses, then all hits); a 21st evicts the least recently used
    const counts = async (k: bigint[]): Promise<[number, number]> => {
      const before = small.stats('m', 0).l1;
      const got = await small.lookup(k, 'm', 0);
      expect(Array.from(got.data as Float32Array)).toEqual(expectedRows(k, 2, present, -1));
      const now = small.stats('m', 0).l1;
      return [now.hits - before.hits, now.misses - before.misses];
    };
    for (const k of keys.slice(0, 20)) expect(await counts([k])).toEqual([0, 1]);
    for (const k of keys.slice(0, 20)) expect(await counts([k])).toEqual([1, 0]);
    expect(await counts([keys[20]!])).toEqual([0, 1]); // evicts keys[0], the least recently used
    expect(await counts([keys[0]!])).toEqual([0, 1]); // evicts keys[1]
    expect(await counts([keys[2]!])).toEqual([1, 0]);
    expect(await counts([keys[1]!])).toEqual([0, 1]);
  });
});
