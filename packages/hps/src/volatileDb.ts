import { createTable, InternalError, type EmbeddingBackend, type EmbeddingTable, type ScorePolicy } from '@embedstack/core';
import type { OverflowPolicy, VolatileDbConfig } from './config.js';
import { copyRow, gatherKeys, ownTurn } from './keyOps.js';
import { rowShare } from './rowShare.js';

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
  /** True when other processes see the same tables (Redis): `dropTable` then keeps the rows, only `deleteTable` removes them. */
  readonly shared: boolean;
  /** Creates or opens table `name`; each call is one use of it (of one model version), ended by `dropTable`. */
  createTable(name: string, dim: number): Promise<void>;
  /** Ends one use of the table; the last one forgets it in this process (in-process: frees it; shared: the rows stay in the store for the others). */
  dropTable(name: string): Promise<void>;
  /** Drops the table and deletes its rows from the store (shared: for every process; only for tables no other process reads). */
  deleteTable(name: string): Promise<void>;
  fetch(name: string, keys: BigInt64Array, dim: number): Promise<FetchResult>;
  /** Inserts or overwrites rows, then enforces the overflow policy. */
  insert(name: string, keys: BigInt64Array, values: Float32Array): Promise<void>;
  /** Rows held by the table (all partitions). */
  size(name: string): Promise<number>;
  /** Removes every row of the table (all partitions; on a shared store, for every process sharing it). */
  clear(name: string): Promise<void>;
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
 * A volatile DB whose tables are each split into HugeCTR's `num_partitions` partitions,
 * each partition a core table (in-process native, or a Redis store table), keys routed by
 * hash ({@link partitionOf}). HugeCTR's overflow handling runs per partition: one holding
 * more than `overflowMargin` rows after an insert is cut back to
 * `overflowResolutionTarget * overflowMargin` rows by core's `restrict` with the policy's
 * scores (evict_oldest: lru, evict_least_used: lfu, evict_random: random customized scores).
 */
export abstract class PartitionedDb implements VolatileDb {
  abstract readonly kind: string;
  abstract readonly shared: boolean;
  /** Whether a batch's partitions run concurrently (a remote store) or one per loop turn (in-process, inline calls). */
  protected abstract readonly concurrent: boolean;
  #tables = new Map<string, EmbeddingTable[]>();
  /** Uses of each open table: two versions of a model may read the same names (a shared L2's stable tables). */
  #uses = new Map<string, number>();

  constructor(protected readonly config: VolatileDbConfig) {}

  /** Creates (or opens) partition `index` of table `name`. */
  protected abstract openPart(name: string, index: number, dim: number, scorePolicy: ScorePolicy): Promise<EmbeddingTable>;

  async createTable(name: string, dim: number): Promise<void> {
    this.#uses.set(name, (this.#uses.get(name) ?? 0) + 1);
    if (this.#tables.has(name)) return;
    const policy = POLICY_SCORES[this.config.overflowPolicy];
    let parts: EmbeddingTable[];
    try {
      parts = await Promise.all(Array.from({ length: this.config.numPartitions }, (_, i) => this.openPart(name, i, dim, policy)));
    } catch (e) {
      this.#release(name);
      throw e;
    }
    if (this.#tables.has(name) || !this.#uses.has(name)) for (const t of parts) t.dispose();
    else this.#tables.set(name, parts);
  }

  /** Ends one use; true when it was the last one. */
  #release(name: string): boolean {
    const n = (this.#uses.get(name) ?? 0) - 1;
    if (n > 0) {
      this.#uses.set(name, n);
      return false;
    }
    this.#uses.delete(name);
    return true;
  }

  async dropTable(name: string): Promise<void> {
    if (!this.#release(name)) return;
    for (const t of this.#tables.get(name) ?? []) t.dispose();
    this.#tables.delete(name);
  }

  /**
   * Deletes table `name` from a shared store (every key, the score clock included: a store's
   * raw table that can `drop()` does so, else it is cleared), then forgets it.
   */
  async deleteTable(name: string): Promise<void> {
    try {
      if (this.shared && this.#tables.has(name)) {
        await Promise.all(
          this.#parts(name).map((t) => {
            const raw = t.raw as { drop?: () => Promise<void> };
            return typeof raw.drop === 'function' ? raw.drop() : t.clear();
          }),
        );
      }
    } finally {
      await this.dropTable(name);
    }
  }

  #parts(name: string): EmbeddingTable[] {
    const p = this.#tables.get(name);
    if (!p) throw new InternalError(`L2 table ${name} does not exist (unloaded while in use)`);
    return p;
  }

  /** Runs `job` for every partition with keys: concurrently, or in-process one per loop turn for large batches. */
  async #eachPart(s: Split, work: number, job: (p: number) => Promise<void>): Promise<void> {
    const busy = s.pos.map((pos, p) => (pos.length > 0 ? p : -1)).filter((p) => p >= 0);
    if (this.concurrent) {
      await Promise.all(busy.map(job));
      return;
    }
    // small partitions run inline (synchronously): yield between them so a large batch never blocks the loop long
    const yieldEach = work >= YIELD_WORK;
    for (const p of busy) {
      if (yieldEach) await ownTurn();
      await job(p);
    }
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
    await this.#eachPart(s, n * dim, async (p) => {
      const pos = s.pos[p]!;
      const r = await parts[p]!.find(s.keys[p]!);
      for (let j = 0; j < pos.length; j++) {
        if (!r.exists[j]) continue;
        const i = pos[j]!;
        copyRow(values, i, r.values, j, dim);
        found[i] = 1;
        hits++;
      }
    });
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
      if (t.size() > margin) await t.restrict(rowShare(this.config.overflowResolutionTarget, margin, 'floor'));
    };
    if (parts.length === 1) return one(parts[0]!, keys, values);
    const s = split(keys, parts.length);
    await this.#eachPart(s, values.length, async (p) => {
      const pos = s.pos[p]!;
      const v = new Float32Array(pos.length * dim);
      for (let j = 0; j < pos.length; j++) copyRow(v, j, values, pos[j]!, dim);
      await one(parts[p]!, s.keys[p]!, v);
    });
  }

  async size(name: string): Promise<number> {
    return this.#parts(name).reduce((a, t) => a + t.size(), 0);
  }

  async clear(name: string): Promise<void> {
    await Promise.all(this.#parts(name).map((t) => t.clear()));
  }

  /** Rows per partition as last seen (a shared store's count is refreshed by this process's calls). */
  partitionSizes(name: string): number[] {
    return this.#parts(name).map((t) => t.size());
  }

  async close(): Promise<void> {
    for (const parts of this.#tables.values()) for (const t of parts) t.dispose();
    this.#tables.clear();
    this.#uses.clear();
  }
}

/**
 * HugeCTR's in-process hash map L2 (`hash_map` / `parallel_hash_map`): each partition is
 * a core dynamic table in the backend's native memory. Safe for concurrent calls (the
 * backend locks each table).
 */
export class HashMapDb extends PartitionedDb {
  readonly kind = 'hash_map';
  readonly shared = false;
  protected readonly concurrent = false;

  constructor(
    config: VolatileDbConfig,
    private readonly backend: EmbeddingBackend,
  ) {
    super(config);
  }

  protected async openPart(name: string, index: number, dim: number, scorePolicy: ScorePolicy): Promise<EmbeddingTable> {
    return createTable({ kind: 'dynamic', name: `${name}.p${index}`, dim, keyDtype: 'int64', scorePolicy, initializer: { kind: 'zeros' } }, { backend: this.backend });
  }
}
