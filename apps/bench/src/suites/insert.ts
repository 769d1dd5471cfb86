/**
 * insert: findOrInsert and upsert of new keys into an empty table that grows
 * from the default initCapacity (growth included), against a JS Map doing the
 * same. One sample = the whole fill, in batches; table creation is untimed.
 */
import { createTable, type EmbeddingTable } from '@embedstack/core';
import { type JsMapTable, jsMapFindOrInsert, jsMapUpsert } from '../peers/jsMap.js';
import type { Group, SuiteResult } from '../report.js';
import { makeKeys } from '../rng.js';
import { formatCount } from '../format.js';
import { valuePattern } from '../tables.js';
import { BATCH, runEntries, settle } from './common.js';
import type { Suite } from './types.js';

const DIM = 64;
type Op = 'findOrInsert' | 'upsert';

/** Runs `fill(batchKeys, batchValues)` over all keys and returns the seconds it took. */
function timedFill(keys: BigInt64Array, values: Float32Array, fill: (k: BigInt64Array, v: Float32Array) => void): number {
  const t0 = performance.now();
  for (let b = 0; b < keys.length; b += BATCH) {
    const e = Math.min(keys.length, b + BATCH);
    fill(keys.subarray(b, e), values.subarray(0, (e - b) * DIM));
  }
  return (performance.now() - t0) / 1000;
}

export const insertSuite: Suite = {
  name: 'insert',
  description: 'findOrInsert / upsert of new keys with growth vs JS Map',
  steps: () => 4,
  async run(ctx) {
    const n = ctx.args.full ? 4 << 20 : 1 << 18;
    const keys = makeKeys(n, 3);
    const values = valuePattern(BATCH, DIM);
    const newTable = (): EmbeddingTable => createTable({ dim: DIM, name: 'bench_insert' }, { backend: ctx.backend });
    const fillOurs = (op: Op) => (): number => {
      const t = newTable();
      const s = op === 'upsert' ? timedFill(keys, values, (k, v) => t.upsertSync(k, v)) : timedFill(keys, values, (k) => void t.findOrInsertSync(k));
      if (t.size() !== n) throw new Error(`${op}: expected ${n} keys in the table but found ${t.size()}`);
      t.dispose();
      return s;
    };
    const fillMap = (op: Op) => (): number => {
      const map: JsMapTable = new Map();
      const s = op === 'upsert' ? timedFill(keys, values, (k, v) => jsMapUpsert(map, k, v, DIM)) : timedFill(keys, values, (k) => void jsMapFindOrInsert(map, k, DIM));
      map.clear();
      return s;
    };
    const groups: Group[] = [];
    for (const op of ['findOrInsert', 'upsert'] as const) {
      // Ours first, then the JS Map: its fills leave a large heap of garbage whose collection
      // (on the second core) would otherwise overlap our samples.
      const opts = { warmup: 1, minSamples: 3, maxSamples: 3, minMs: 0 };
      const ours = await runEntries(
        [{ job: { label: `${op}Sync ${formatCount(n)} new keys`, fn: fillOurs(op), items: n }, name: `${op}Sync`, kind: 'ours', unit: 'keys/s' }],
        opts,
      );
      await settle();
      const peer = await runEntries(
        [
          {
            // The JS Map fills take seconds each: no warm-up fill (its JIT warms within the first batches).
            job: { label: `JS Map ${op} ${formatCount(n)} new keys`, fn: fillMap(op), items: n, warmup: 0 },
            name: 'JS Map',
            kind: 'peer',
            unit: 'keys/s',
            note: op === 'upsert' ? 'set(key, row copy)' : 'get, else set(key, new Float32Array(dim))',
          },
        ],
        opts,
      );
      const figures = [...ours, ...peer];
      await settle();
      groups.push({
        title: `${op} of ${formatCount(n)} new keys, dim ${DIM}, batch ${formatCount(BATCH)}, from the default initCapacity (1024)`,
        params: { op, keys: n, dim: DIM, batch: BATCH },
        figures,
      });
    }
    const result: SuiteResult = {
      suite: 'insert',
      path: 'EmbeddingTable.findOrInsertSync / upsertSync, growth by doubling included',
      groups,
      targets: [],
      notes: ['each sample fills a fresh table or Map (creation untimed); median of 3 fills (ours after 1 warm-up fill; the JS Map without)'],
      charts: [],
    };
    return result;
  },
};
