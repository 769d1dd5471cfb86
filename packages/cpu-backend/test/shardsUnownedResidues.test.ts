import { createTable, lookupCombinedShards, RaggedTensor } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * Shards by floorMod over 8 residues of which only 0..5 have a table: sok's static
 * variable of 6 rows on 8 devices (a device of no rows holds no table). A bag whose keys
 * all fall on owned residues pools each row's entries in bag order, as one table holding
 * every row does, bit for bit. These six float32 values are ones where the shard-order
 * arithmetic (each shard's partial divided by the row's weight sum, then added) rounds to
 * the next float32: (((v4 + v2) + v2) + v0 + v5) / 5 = 0.010602377..., the partials'
 * way 0.010602378... (a sok property run found them, Dec 1 2026). A bag with a key on an
 * unowned residue (6) keeps the partials added in shard order, for every row of the bag.
 */
const VALUES = [0.00877365656197071, 0.03394939377903938, 0.0030287972185760736, 0.04543137550354004, 0.04193822294473648, -0.0037575848400592804];
const BAG = [4, 2, 2, 0, 5];

/** One table's mean of the bag: float64 sum in bag order, divided once, rounded once. */
function bagOrderMean(): number {
  let acc = 0;
  for (const i of BAG) acc += VALUES[i]!;
  return Math.fround(acc / BAG.length);
}

/**
 * The shard-order way: each owner's entries of `bag` divided by the row's weight sum (every
 * entry counts, owned or not), the partials added in shard order; keys 6 and 7 have no owner.
 */
function shardOrderMean(bag: readonly number[] = BAG): number {
  let acc = 0;
  for (let d = 0; d < 6; d++) {
    let part = 0;
    for (const i of bag) if (i % 8 === d) part += VALUES[i]!;
    acc += part / bag.length;
  }
  return Math.fround(acc);
}

describe('shards bag with residues that no shard owns', () => {
  it('the chosen values tell the two arithmetics apart', () => {
    expect(bagOrderMean()).toBe(Math.fround(0.010602377355098724));
    expect(shardOrderMean()).not.toBe(bagOrderMean());
  });

  /** Shard tables on residues 0..5 of 8, each holding its value: the static shard global row d at local row floor(d / 8) = 0, the dynamic one key d. */
  const shardsOf = (kind: 'dynamic' | 'static') =>
    VALUES.map((v, d) => {
      const table = createTable(kind === 'static' ? { kind, dim: 1, vocabularySize: 1 } : { dim: 1 }, { backend: cpuBackend });
      table.upsertSync(BigInt64Array.of(kind === 'static' ? 0n : BigInt(d)), Float32Array.of(v));
      return { table, plan: { placement: 'mod' as const, numShards: 8, shard: d } };
    });

  for (const kind of ['dynamic', 'static'] as const) {
    it(`pools in bag order when every key is owned (${kind} tables on residues 0..5 of 8), as one table holding every row`, async () => {
      const shards = shardsOf(kind);
      const one = createTable({ dim: 1 }, { backend: cpuBackend });
      try {
        one.upsertSync(BigInt64Array.from(VALUES, (_, i) => BigInt(i)), Float32Array.from(VALUES));
        const ids = RaggedTensor.fromNestedArray([BAG, [], [3]]);
        const want = [bagOrderMean(), 0, Math.fround(VALUES[3]!)];
        expect(Array.from(await one.lookupCombined(ids, { combiner: 'mean' }))).toEqual(want);
        expect(Array.from(await lookupCombinedShards(shards, ids, { combiner: 'mean' }))).toEqual(want);
        // Inserting missing keys: each shard's rows read first (the find-first path); none is missing.
        expect(Array.from(await lookupCombinedShards(shards, ids, { combiner: 'mean', insertMissing: true }))).toEqual(want);
      } finally {
        one.dispose();
        for (const s of shards) s.table.dispose();
      }
    });
  }

  it('adds the partials in shard order when a key of the bag has no owner (dynamic tables)', async () => {
    const shards = shardsOf('dynamic');
    try {
      const withUnowned = [...BAG, 6];
      const ids = RaggedTensor.fromNestedArray([BAG, withUnowned]);
      const got = await lookupCombinedShards(shards, ids, { combiner: 'mean' });
      // Both rows the shard-order way (the choice is made for the whole bag); key 6 reads nothing.
      expect(Array.from(got)).toEqual([shardOrderMean(), shardOrderMean(withUnowned)]);
      expect(shardOrderMean()).not.toBe(bagOrderMean());
    } finally {
      for (const s of shards) s.table.dispose();
    }
  });
});
