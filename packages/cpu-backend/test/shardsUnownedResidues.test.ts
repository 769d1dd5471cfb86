import { createTable, lookupCombinedShards, RaggedTensor } from '@embedstack/core';
import { cpuBackend } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';

/**
 * Shards by floorMod over 8 residues of which only 0..5 have a table: sok's static
 * variable of 6 rows on 8 devices (a device of no rows holds no table). A bag whose keys
 * all fall on owned residues pools each row's entries in bag order, as one table holding
 * every row does, bit for bit. These five float32 values are ones where the shard-order
 * arithmetic (each shard's partial divided by the row's weight sum, then added) rounds to
 * the next float32: (((v4 + v2) + v2) + v0 + v5) / 5 = 0.010602377..., the partials'
 * way 0.010602378... (a sok property run found them, Dec 1 2026).
 */
const VALUES = [0.00877365656197071, 0.03394939377903938, 0.0030287972185760736, 0.04543137550354004, 0.04193822294473648, -0.0037575848400592804];
const BAG = [4, 2, 2, 0, 5];

/** One table's mean of the bag: float64 sum in bag order, divided once, rounded once. */
function bagOrderMean(): number {
  let acc = 0;
  for (const i of BAG) acc += VALUES[i]!;
  return Math.fround(acc / BAG.length);
}

/** The shard-order way: each owner's entries divided by the weight sum, the partials added in shard order. */
function shardOrderMean(): number {
  let acc = 0;
  for (let d = 0; d < 8; d++) {
    let part = 0;
    for (const i of BAG) if (i % 8 === d) part += VALUES[i]!;
    acc += part / BAG.length;
  }
  return Math.fround(acc);
}

describe('shards bag with residues that no shard owns', () => {
  it('the chosen values tell the two arithmetics apart', () => {
    expect(bagOrderMean()).toBe(Math.fround(0.010602377355098724));
    expect(shardOrderMean()).not.toBe(bagOrderMean());
  });

  for (const kind of ['dynamic', 'static'] as const) {
    it(`pools in bag order when every key is owned (${kind} tables on residues 0..5 of 8)`, async () => {
      const shards = VALUES.map((v, d) => {
        const table = createTable(kind === 'static' ? { kind, dim: 1, vocabularySize: 1 } : { dim: 1 }, { backend: cpuBackend });
        // The static shard holds global row d at local row floor(d / 8) = 0; the dynamic one key d.
        table.upsertSync(BigInt64Array.of(kind === 'static' ? 0n : BigInt(d)), Float32Array.of(v));
        return { table, plan: { placement: 'mod' as const, numShards: 8, shard: d } };
      });
      try {
        const ids = RaggedTensor.fromNestedArray([BAG, [], [3]]);
        const got = await lookupCombinedShards(shards, ids, { combiner: 'mean' });
        expect(Array.from(got)).toEqual([bagOrderMean(), 0, Math.fround(VALUES[3]!)]);
      } finally {
        for (const s of shards) s.table.dispose();
      }
    });
  }
});
