import { createTable, InternalError, type EmbeddingBackend, type EmbeddingTable, type ScorePolicy } from '@embedstack/core';
import type { OverflowPolicy, VolatileDbConfig } from './config.js';
import { copyRow, gatherKeys, ownTurn } from './keyOps.js';

/** Rows fetched from a level: `values` `[n, dim]` (zeros where not found), host memory. */
export interface FetchResult {
  values: Float32Array;
  found: Uint8Array;
  hits: number;
}

/**
 * The L2 contract (HugeCTR's volatile DB): named tables of int64 keys to float32 rows.
 * Implementations: {@link HashMapDb} (in-process) and the Redis Cluster one.
 */
export interface VolatileDb {
  readonly kind: string;
  /** True when other processes see the same tables (Redis): table names are then stable and never dropped. */
  readonly shared: boolean;
  createTable(name: string, dim: number): Promise<void>;
  dropTable(name: string): Promise<void>;
  fetch(name: string, keys: BigInt64Array, dim: number): Promise<FetchResult>;
  /** Inserts or overwrites rows, then enforces the overflow policy. */
  insert(name: string, keys: BigInt64Array, values: Float32Array): Promise<void>;
  /** Rows held by the table (all partitions). */
  size(name: string): Promise<number>;
  close(): Promise<void>;
}

/** Scores of the core table standing for each HugeCTR overflow policy. */
const POLICY_SCORES: Record<OverflowPolicy, ScorePolicy> = {
  evict_oldest: 'lru',
  evict_least_used: 'lfu',
  evict_random: 'customized',
};

/** Partition of each key: a multiplicative hash of its two 32-bit words (no BigInt per key). */
export function partitionOf(keys: BigInt64Array, parts: number): Uint16Array {
  const out = new Uint16Array(keys.length);
  if (parts === 1) return out;
  const w = new Uint32Array(keys.buffer, keys.byteOffset, keys.length * 2);
  for (let i = 0; i < keys.length; i++) {
    const h = Math.imul(w[2 * i]! ^ Math.imul(w[2 * i + 1]!, 0x85ebca6b), 0x9e3779b1) >>> 0;
    out[i] = (h >>> 16) % parts;
  }
  return out;
}

/** Batches of at least this many floats yield to the event loop between partitions. */
const YIELD_WORK = 1 << 15;

interface Split {
  /** per partition: positions in the batch */
  pos: Int32Array[];
  keys: BigInt64Array[];
}

function split(keys: BigInt64Array, parts: number): Split {
  const p = partitionOf(keys, parts);
  const counts = new Int32Array(parts);
  for (let i = 0; i < p.length; i++) counts[p[i]!]!++;
  const pos = Array.from(counts, (c) => new Int32Array(c));
  const fill = new Int32Array(parts);
  for (let i = 0; i < p.length; i++) pos[p[i]!]![fill[p[i]!]!++] = i;
  return { pos, keys: pos.map((ix) => gatherKeys(keys, ix)) };
}

/**
 * HugeCTR's in-process hash map L2: each table is `numPartitions` core dynamic tables
 * (native memory of the backend), keys routed by hash. A partition holding more than
 * `overflowMargin` rows is cut back to `overflowResolutionTarget * overflowMargin` by
 * core's `restrict` with the policy's scores (evict_oldest: lru, evict_least_used: lfu,
 * evict_random: random scores). Safe for concurrent calls (the backend locks each table).
 */
export class HashMapDb implements VolatileDb {
  readonly kind = 'hash_map';
  readonly shared = false;
  #tables = new Map<string, EmbeddingTable[]>();

  constructor(
    private readonly config: VolatileDbConfig,
    private readonly backend: EmbeddingBackend,
  ) {}

  async createTable(name: string, dim: number): Promise<void> {
    if (this.#tables.has(name)) return;
    const policy = POLICY_SCORES[this.config.overflowPolicy];
    const parts = Array.from({ length: this.config.numPartitions }, (_, i) =>
      createTable({ kind: 'dynamic', name: `${name}.p${i}`, dim, keyDtype: 'int64', scorePolicy: policy, initializer: { kind: 'zeros' } }, { backend: this.backend }),
    );
    this.#tables.set(name, parts);
  }

  async dropTable(name: string): Promise<void> {
    for (const t of this.#tables.get(name) ?? []) t.dispose();
    this.#tables.delete(name);
  }

  #parts(name: string): EmbeddingTable[] {
    const p = this.#tables.get(name);
    if (!p) throw new InternalError(`L2 table ${name} does not exist (unloaded while in use)`);
    return p;
  }

  async fetch(name: string, keys: BigInt64Array, dim: number): Promise<FetchResult> {
    const parts = this.#parts(name);
    const n = keys.length;
    if (parts.length === 1) {
      const r = await parts[0]!.find(keys);
      const found = r.exists;
      let hits = 0;
      for (let i = 0; i < n; i++) hits += found[i]!;
      if (hits < n) for (let i = 0; i < n; i++) if (!found[i]) r.values.fill(0, i * dim, (i + 1) * dim);
      return { values: r.values, found, hits };
    }
    const s = split(keys, parts.length);
    const values = new Float32Array(n * dim);
    const found = new Uint8Array(n);
    let hits = 0;
    const yieldEach = n * dim >= YIELD_WORK;
    for (let p = 0; p < parts.length; p++) {
      const pos = s.pos[p]!;
      if (pos.length === 0) continue;
      // small partitions run inline (synchronously): yield between them so a large batch never blocks the loop long
      if (yieldEach) await ownTurn();
      const r = await parts[p]!.find(s.keys[p]!);
      for (let j = 0; j < pos.length; j++) {
        if (!r.exists[j]) continue;
        const i = pos[j]!;
        copyRow(values, i, r.values, j, dim);
        found[i] = 1;
        hits++;
      }
    }
    return { values, found, hits };
  }

  async insert(name: string, keys: BigInt64Array, values: Float32Array): Promise<void> {
    const parts = this.#parts(name);
    if (keys.length === 0) return;
    const dim = values.length / keys.length;
    const random = this.config.overflowPolicy === 'evict_random';
    const scoresOf = (n: number): BigUint64Array | undefined => (random ? BigUint64Array.from({ length: n }, () => BigInt(Math.floor(Math.random() * 2 ** 52))) : undefined);
    const one = async (t: EmbeddingTable, k: BigInt64Array, v: Float32Array): Promise<void> => {
      const scores = scoresOf(k.length);
      await t.upsert(k, v, scores ? { scores } : undefined);
      const margin = this.config.overflowMargin;
      if (t.size() > margin) await t.restrict(Math.floor(this.config.overflowResolutionTarget * margin));
    };
    if (parts.length === 1) return one(parts[0]!, keys, values);
    const s = split(keys, parts.length);
    const yieldEach = values.length >= YIELD_WORK;
    for (let p = 0; p < parts.length; p++) {
      const pos = s.pos[p]!;
      if (pos.length === 0) continue;
      if (yieldEach) await ownTurn();
      const v = new Float32Array(pos.length * dim);
      for (let j = 0; j < pos.length; j++) copyRow(v, j, values, pos[j]!, dim);
      await one(parts[p]!, s.keys[p]!, v);
    }
  }

  async size(name: string): Promise<number> {
    return this.#parts(name).reduce((a, t) => a + t.size(), 0);
  }

  /** Rows per partition (tests and stats). */
  partitionSizes(name: string): number[] {
    return this.#parts(name).map((t) => t.size());
  }

  async close(): Promise<void> {
    for (const name of [...this.#tables.keys()]) await this.dropTable(name);
  }
}
