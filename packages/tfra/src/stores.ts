import {
  type EmbeddingTable,
  type FindOptions,
  type FindResult,
  type Keys,
  UnsupportedError,
} from '@embedstack/core';
import type { KVCreator } from './kvCreators.js';

/**
 * One shard of a Variable as the Variable sees it. Keys are normalised and
 * already placed on this shard; values are flat [n * dim]. All-or-nothing per call
 * is the store's (the core table's) guarantee.
 */
export interface ShardStore {
  /** The shard's own table once prepared by its creator (connected, imported), or null for views. */
  ready(): Promise<EmbeddingTable | null>;
  /** The shard's own table when its preparation has already finished (a call on it then starts now, not a tick later), else null. */
  readyNow(): EmbeddingTable | null;
  /** Reads rows (never inserts); `opts` (caller arrays, a shard plan) go to the table. */
  find(keys: Keys, opts?: FindOptions): Promise<FindResult>;
  /** `scores`: the creator's scores of `keys` ('customized'), computed by the caller for every shard before any write (kvCreators' `shardScores`). */
  upsert(keys: Keys, values: Float32Array, scores?: BigUint64Array): Promise<void>;
  /** TFRA bp_v2 rule with deltas (see core.md); `scores` as in upsert. */
  accum(keys: Keys, deltas: Float32Array, exists: Uint8Array, scores?: BigUint64Array): Promise<void>;
  remove(keys: Keys): Promise<number>;
  clear(): Promise<void>;
  size(): Promise<number>;
  /** Every row of the shard, in batches (a huge shard never needs one giant buffer). */
  exportBatches(): AsyncGenerator<{ keys: Keys; values: Float32Array }>;
}

/** The store of a Variable's own table (looked up through `table()`, which may be replaced when slots are added). */
export function tableStore(table: () => EmbeddingTable, creator: KVCreator): ShardStore {
  const prepared = new WeakMap<EmbeddingTable, Promise<void>>();
  const done = new WeakSet<EmbeddingTable>();
  const ready = async (): Promise<EmbeddingTable> => {
    const t = table();
    let p = prepared.get(t);
    if (!p) {
      p = creator.prepare(t);
      prepared.set(t, p);
    }
    await p;
    done.add(t);
    return t;
  };
  const readyNow = (): EmbeddingTable | null => {
    const t = table();
    return done.has(t) ? t : null;
  };
  return {
    ready,
    readyNow,
    find: async (keys, opts) => (await ready()).find(keys, opts),
    upsert: async (keys, values, scores) => (await ready()).upsert(keys, values, scores && { scores }),
    accum: async (keys, deltas, exists, scores) => (await ready()).accum(keys, deltas, exists, scores && { scores }),
    remove: async (keys) => (await ready()).remove(keys),
    clear: async () => (await ready()).clear(),
    size: async () => creator.sizeOf(await ready()),
    async *exportBatches() {
      for await (const b of (await ready()).exportBatches()) yield { keys: b.keys, values: b.values };
    },
  };
}

export interface StoredRow {
  values: Float32Array;
  slots: Float32Array[];
  score: bigint;
}

/** The rows (value, slots, score) of `keys` present in `table`, by a scan of the table: O(table size). */
export async function scanRows(table: EmbeddingTable, keys: Keys): Promise<Map<bigint | number, StoredRow>> {
  const wanted = new Set<bigint | number>(keys as Iterable<bigint | number>);
  const out = new Map<bigint | number, StoredRow>();
  const dim = table.dim;
  const widths = table.slotWidths;
  for await (const b of table.exportBatches()) {
    for (let i = 0; i < b.keys.length; i++) {
      const k = b.keys[i]!;
      if (!wanted.has(k)) continue;
      out.set(k, {
        values: b.values.slice(i * dim, i * dim + dim),
        slots: b.slots.map((s, j) => s.slice(i * widths[j]!, (i + 1) * widths[j]!)),
        score: b.scores[i]!,
      });
    }
  }
  return out;
}

/**
 * A read view of slot `slot` of the rows of `table()` (slots live beside rows).
 * Lookups scan the table (O(table size)): meant for inspection and tests, not the
 * training path. `upsert` rewrites the slot of keys present in the table (absent
 * keys are ignored: a slot has no row of its own); `accum`, `remove` and `clear`
 * are UNSUPPORTED (remove keys from the primary variable instead).
 */
export function slotStore(table: () => EmbeddingTable, slot: number, viewName: string): ShardStore {
  const unsupported = (op: string) =>
    Promise.reject(
      new UnsupportedError(
        `${op} is not supported on slot variable "${viewName}": slots live beside the rows of their variable; ${op} the primary variable instead`,
      ),
    );
  return {
    async find(keys) {
      const t = table();
      const width = t.slotWidths[slot]!;
      const initial = t.options.slots.initial[slot]!;
      const rows = await scanRows(t, keys);
      const values = new Float32Array(keys.length * width).fill(initial);
      const exists = new Uint8Array(keys.length);
      for (let i = 0; i < keys.length; i++) {
        const r = rows.get(keys[i]!);
        if (!r) continue;
        values.set(r.slots[slot]!, i * width);
        exists[i] = 1;
      }
      return { values, exists };
    },
    async upsert(keys, values) {
      const t = table();
      const width = t.slotWidths[slot]!;
      const rows = await scanRows(t, keys);
      const last = new Map<bigint | number, number>();
      for (let i = 0; i < keys.length; i++) if (rows.has(keys[i]!)) last.set(keys[i]!, i);
      if (last.size === 0) return;
      const present = [...last.keys()];
      const widths = t.slotWidths;
      const outValues = new Float32Array(present.length * t.dim);
      const outSlots = widths.map((w) => new Float32Array(present.length * w));
      const outScores = new BigUint64Array(present.length);
      present.forEach((k, j) => {
        const r = rows.get(k)!;
        outValues.set(r.values, j * t.dim);
        r.slots.forEach((s, si) => outSlots[si]!.set(s, j * widths[si]!));
        const src = last.get(k)!;
        outSlots[slot]!.set(values.subarray(src * width, src * width + width), j * width);
        outScores[j] = r.score;
      });
      const keyArr = t.keyDtype === 'int64' ? BigInt64Array.from(present as bigint[]) : Int32Array.from(present as number[]);
      await t.importRows(keyArr, outValues, outSlots, outScores);
    },
    ready: () => Promise.resolve(null),
    readyNow: () => null,
    accum: () => unsupported('accum'),
    remove: () => unsupported('remove'),
    clear: () => unsupported('clear'),
    size: () => Promise.resolve(table().size()),
    async *exportBatches() {
      const t = table();
      for await (const b of t.exportBatches()) yield { keys: b.keys, values: b.slots[slot]! };
    },
  };
}
