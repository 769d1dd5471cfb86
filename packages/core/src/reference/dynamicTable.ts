import type { Bag, Combiner, LookupCombiner } from '../combiners.js';
import type { Keys } from '../dtypes.js';
import { initialRow } from '../initializers.js';
import { makeKeys } from '../keys.js';
import type { ResolvedOptimizer } from '../optimizers.js';
import type { ExportBatch, FindResult, RawTableSync } from '../rawTable.js';
import { scoresOnRead } from '../scores.js';
import { roundStored, STORAGE_BYTES } from '../storageDtype.js';
import type { ResolvedTableOptions } from '../tableOptions.js';
import { applyOptimizerRow, combineBag, dedupeGradients } from './kernels.js';
import { applyCombined, backward, partialLookup, type PlainOps, plannedGradients, plannedRead } from './plannedOps.js';
import type { ResolvedShardPlan } from '../shardPlan.js';
import { type EvictionCandidate, evictionLosers, nextScore, nowSeconds, type ScoreClock } from './scoring.js';

type Key = bigint | number;

interface Row {
  value: Float32Array;
  slots: Float32Array[];
  score: bigint;
}

/** Per distinct key of a call: occurrence count and the caller's score at its last occurrence. */
interface Occurrence {
  count: number;
  given: bigint | undefined;
}

/**
 * Reference dynamic table: a JS `Map` from key (bigint for int64, number for int32)
 * to a record holding the row, its slots and its score. Memory: JS heap.
 * Not thread-safe (JS is single-threaded; every call runs to completion).
 *
 * Export order is the Map's insertion order (a removed and re-inserted key moves to
 * the end). Other backends may use another order: compare exports as sets.
 *
 * Capacity: starts at initCapacity and doubles (capped at maxCapacity) when the
 * size exceeds it; it never shrinks (clear keeps it).
 *
 * Inserts into a full capped table follow the eviction rule of `scores.ts` (see
 * `scoring.ts` for the precise score rules): a call first decides which of its new
 * keys are admitted and which resident rows are evicted, then applies its
 * operation in key order, then updates the scores of the call's resident keys.
 */
export class ReferenceDynamicTable implements RawTableSync {
  readonly #o: ResolvedTableOptions;
  readonly #widths: number[];
  #rows = new Map<Key, Row>();
  #capacity: number;
  #t: ScoreClock = { clock: 0, epoch: 0, now: 0n };
  #disposed = false;
  /** The plain (plan-less) reads and update the planned operations are built from. */
  readonly #plain: PlainOps;

  constructor(options: ResolvedTableOptions) {
    this.#o = options;
    this.#widths = options.slots.widths.map((w) => (w === 'dim' ? options.dim : 1));
    this.#capacity = Math.min(options.initCapacity, options.maxCapacity);
    this.#plain = {
      dim: options.dim,
      find: (keys) => this.#find(keys),
      findOrInsert: (keys, scores) => this.#findOrInsert(keys, scores),
      applyGradients: (keys, grads, optimizer) => this.#applyGradients(keys, grads, optimizer),
    };
  }

  // ---- helpers ---------------------------------------------------------------

  #initialValue(key: Key, out: Float32Array, offset = 0): void {
    const o = this.#o;
    initialRow(o.initializer, o.seed, o.stream, key, o.dim, out, offset);
    roundStored(o.storageDtype, out, offset, offset + o.dim);
  }

  /** Rounds a row's value to the storage dtype (after every write). */
  #store(value: Float32Array): void {
    roundStored(this.#o.storageDtype, value);
  }

  #newRow(key: Key): Row {
    const value = new Float32Array(this.#o.dim);
    this.#initialValue(key, value);
    const slots = this.#widths.map((w, i) => new Float32Array(w).fill(this.#o.slots.initial[i]!));
    return { value, slots, score: 0n };
  }

  #occurrences(keys: Keys, scores: BigUint64Array | null): Map<Key, Occurrence> {
    const occ = new Map<Key, Occurrence>();
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const o = occ.get(k);
      const given = scores ? scores[i] : undefined;
      if (o) {
        o.count++;
        o.given = given;
      } else occ.set(k, { count: 1, given });
    }
    return occ;
  }

  /** Starts a scored call: advances the clock and reads the wall clock. */
  #begin(): void {
    this.#t.clock++;
    this.#t.now = this.#o.scorePolicy === 'timestamp' ? nowSeconds() : 0n;
  }

  /**
   * Admission of the call's new keys (`newKeys`: distinct, absent, in order of first
   * appearance). When they do not fit, evicts losing residents (not in the call)
   * and returns the refused new keys.
   */
  #admit(newKeys: Key[], occ: Map<Key, Occurrence>, explicit: boolean): Set<Key> {
    const refused = new Set<Key>();
    const max = this.#o.maxCapacity;
    if (newKeys.length <= max - this.#rows.size) return refused;
    const candidates: EvictionCandidate<Key>[] = [];
    let touched = 0;
    for (const [key, row] of this.#rows) {
      if (occ.has(key)) touched++;
      else candidates.push({ key, score: row.score, resident: true });
    }
    for (const key of newKeys) {
      const o = occ.get(key)!;
      const score = explicit ? o.given! : nextScore(this.#o.scorePolicy, undefined, o.count, o.given, this.#t);
      candidates.push({ key, score, resident: false });
    }
    for (const loser of evictionLosers(candidates, max - touched)) {
      if (loser.resident) this.#rows.delete(loser.key);
      else refused.add(loser.key);
    }
    return refused;
  }

  /** Inserts a fresh row (initial value and slots); grows the capacity. */
  #insert(key: Key): Row {
    const row = this.#newRow(key);
    this.#rows.set(key, row);
    while (this.#rows.size > this.#capacity) this.#capacity = Math.min(this.#capacity * 2, this.#o.maxCapacity);
    return row;
  }

  /** Updates the scores of the call's resident keys (see scoring.ts). */
  #touch(occ: Map<Key, Occurrence>, write: boolean, explicit = false): void {
    const policy = this.#o.scorePolicy;
    if (!write && !scoresOnRead(policy)) return;
    for (const [key, o] of occ) {
      const row = this.#rows.get(key);
      if (!row) continue;
      row.score = explicit ? o.given! : nextScore(policy, row.score, o.count, o.given, this.#t);
    }
  }

  /** Distinct absent keys of the call, in order of first appearance, filtered by `wants(i)`. */
  #absent(keys: Keys, wants: (i: number) => boolean = () => true): Key[] {
    const seen = new Set<Key>();
    const out: Key[] = [];
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (this.#rows.has(k) || seen.has(k) || !wants(i)) continue;
      seen.add(k);
      out.push(k);
    }
    return out;
  }

  #check(): void {
    if (this.#disposed) throw new Error('reference table used after dispose');
  }

  // ---- RawTableSync ----------------------------------------------------------

  find(keys: Keys, out: FindResult | null = null, plan: ResolvedShardPlan | null = null): FindResult {
    this.#check();
    return plannedRead(this.#plain, keys, null, false, out, plan);
  }

  findOrInsert(keys: Keys, scores: BigUint64Array | null, out: FindResult | null = null, plan: ResolvedShardPlan | null = null): FindResult {
    this.#check();
    return plannedRead(this.#plain, keys, scores, true, out, plan);
  }

  #find(keys: Keys): FindResult {
    this.#begin();
    const dim = this.#o.dim;
    const values = new Float32Array(keys.length * dim);
    const exists = new Uint8Array(keys.length);
    for (let i = 0; i < keys.length; i++) {
      const row = this.#rows.get(keys[i]!);
      if (row) {
        values.set(row.value, i * dim);
        exists[i] = 1;
      } else this.#initialValue(keys[i]!, values, i * dim);
    }
    this.#touch(this.#occurrences(keys, null), false);
    return { values, exists };
  }

  #findOrInsert(keys: Keys, scores: BigUint64Array | null): FindResult {
    this.#begin();
    const dim = this.#o.dim;
    const occ = this.#occurrences(keys, scores);
    const refused = this.#admit(this.#absent(keys), occ, false);
    const values = new Float32Array(keys.length * dim);
    const exists = new Uint8Array(keys.length);
    const present = new Set<Key>();
    for (const k of occ.keys()) if (this.#rows.has(k)) present.add(k);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      exists[i] = present.has(k) ? 1 : 0;
      if (refused.has(k)) {
        this.#initialValue(k, values, i * dim);
        continue;
      }
      const row = this.#rows.get(k) ?? this.#insert(k);
      values.set(row.value, i * dim);
    }
    this.#touch(occ, true);
    return { values, exists };
  }

  upsert(keys: Keys, values: Float32Array, scores: BigUint64Array | null): void {
    this.#check();
    this.#begin();
    const dim = this.#o.dim;
    const occ = this.#occurrences(keys, scores);
    const refused = this.#admit(this.#absent(keys), occ, false);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (refused.has(k)) continue;
      const row = this.#rows.get(k) ?? this.#insert(k);
      row.value.set(values.subarray(i * dim, (i + 1) * dim));
      this.#store(row.value);
    }
    this.#touch(occ, true);
  }

  assign(keys: Keys, values: Float32Array, scores: BigUint64Array | null): void {
    this.#check();
    this.#begin();
    const dim = this.#o.dim;
    for (let i = 0; i < keys.length; i++) {
      const row = this.#rows.get(keys[i]!);
      if (!row) continue;
      row.value.set(values.subarray(i * dim, (i + 1) * dim));
      this.#store(row.value);
    }
    this.#touch(this.#occurrences(keys, scores), true);
  }

  /** bp_v2: present & exists -> value += delta; absent & !exists -> insert delta as the value; else no-op. In order. */
  accum(keys: Keys, deltas: Float32Array, exists: Uint8Array, scores: BigUint64Array | null): void {
    this.#check();
    this.#begin();
    const dim = this.#o.dim;
    const occ = this.#occurrences(keys, scores);
    const refused = this.#admit(this.#absent(keys, (i) => exists[i] === 0), occ, false);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (refused.has(k)) continue;
      const row = this.#rows.get(k);
      const delta = deltas.subarray(i * dim, (i + 1) * dim);
      if (row && exists[i]) {
        for (let c = 0; c < dim; c++) row.value[c] = row.value[c]! + delta[c]!;
        this.#store(row.value);
      } else if (!row && !exists[i]) {
        const fresh = this.#insert(k).value;
        fresh.set(delta);
        this.#store(fresh);
      }
    }
    this.#touch(occ, true);
  }

  remove(keys: Keys): number {
    this.#check();
    let n = 0;
    for (let i = 0; i < keys.length; i++) if (this.#rows.delete(keys[i]!)) n++;
    return n;
  }

  clear(): void {
    this.#check();
    this.#rows.clear();
  }

  size(): number {
    return this.#rows.size;
  }

  capacity(): number {
    return this.#capacity;
  }

  /** Estimate: per row the floats, the 8-byte score and key, plus ~64 bytes of Map/record overhead. */
  memoryUsage(): number {
    const slotFloats = this.#widths.reduce((a, b) => a + b, 0);
    return this.#rows.size * (this.#o.dim * STORAGE_BYTES[this.#o.storageDtype] + slotFloats * 4 + 16 + 64);
  }

  exportBatch(offset: number, limit: number): ExportBatch {
    this.#check();
    const dim = this.#o.dim;
    const entries = [...this.#rows].slice(offset, offset + Math.min(limit, this.#rows.size));
    const n = entries.length;
    const keys = makeKeys(this.#o.keyDtype, n, (i) => entries[i]![0]);
    const values = new Float32Array(n * dim);
    const slots = this.#widths.map((w) => new Float32Array(n * w));
    const scores = new BigUint64Array(n);
    entries.forEach(([, row], i) => {
      values.set(row.value, i * dim);
      row.slots.forEach((s, j) => slots[j]!.set(s, i * this.#widths[j]!));
      scores[i] = row.score;
    });
    return { keys, values, slots, scores };
  }

  /**
   * Bulk load, an upsert of values, slots and scores: `slots` null gives every
   * imported row its slots' initial values; `scores` null scores the rows as an
   * upsert does, explicit scores are set verbatim (and rank new keys for eviction).
   */
  importRows(keys: Keys, values: Float32Array, slots: Float32Array[] | null, scores: BigUint64Array | null): void {
    this.#check();
    this.#begin();
    const dim = this.#o.dim;
    const explicit = scores !== null;
    const occ = this.#occurrences(keys, scores);
    const refused = this.#admit(this.#absent(keys), occ, explicit);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (refused.has(k)) continue;
      const row = this.#rows.get(k) ?? this.#insert(k);
      row.value.set(values.subarray(i * dim, (i + 1) * dim));
      this.#store(row.value);
      row.slots.forEach((s, j) => {
        const w = this.#widths[j]!;
        if (slots) s.set(slots[j]!.subarray(i * w, (i + 1) * w));
        else s.fill(this.#o.slots.initial[j]!);
      });
    }
    this.#touch(occ, true, explicit);
  }

  /** With insertMissing: exactly findOrInsert on the bag's keys; else exactly find. Then combineBag. */
  lookupCombined(bag: Bag<Keys>, combiner: LookupCombiner, maxNorm: number, insertMissing: boolean, out: Float32Array | null = null): Float32Array {
    this.#check();
    const dim = this.#o.dim;
    const r = insertMissing ? this.#findOrInsert(bag.keys, null) : this.#find(bag.keys);
    const c = combineBag((j) => r.values.subarray(j * dim, (j + 1) * dim), bag, dim, combiner, maxNorm);
    if (!out) return c;
    out.set(c);
    return out;
  }

  lookupCombinedPartial(bag: Bag<Keys>, combiner: Combiner, maxNorm: number, insert: boolean, plan: ResolvedShardPlan, out: Float64Array): Float64Array {
    this.#check();
    return partialLookup(this.#plain, bag, combiner, maxNorm, insert, plan, out);
  }

  lookupCombinedBackward(bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, maxNorm: number, plan: ResolvedShardPlan | null, out: Float32Array): Float32Array {
    this.#check();
    return backward(this.#plain, bag, grads, combiner, maxNorm, plan, out);
  }

  applyCombinedGradients(bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, maxNorm: number, plan: ResolvedShardPlan | null, optimizer: ResolvedOptimizer): void {
    this.#check();
    applyCombined(this.#plain, bag, grads, combiner, maxNorm, plan, optimizer);
  }

  applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer, plan: ResolvedShardPlan | null = null): void {
    this.#check();
    const p = plannedGradients(keys, grads, this.#o.dim, plan);
    this.#applyGradients(p.keys, p.grads, optimizer);
  }

  /** Dedupe (float32 sums in order), insert missing keys (eviction rule), one fused update per admitted row. */
  #applyGradients(keys: Keys, grads: Float32Array, optimizer: ResolvedOptimizer): void {
    this.#begin();
    const dim = this.#o.dim;
    const { unique, sums } = dedupeGradients(keys, grads, dim);
    const occ = this.#occurrences(keys, null);
    const refused = this.#admit(this.#absent(keys), occ, false);
    unique.forEach((k, u) => {
      if (refused.has(k)) return;
      const row = this.#rows.get(k) ?? this.#insert(k);
      applyOptimizerRow(optimizer, row.value, row.slots, sums.subarray(u * dim, (u + 1) * dim));
      this.#store(row.value);
    });
    this.#touch(occ, true);
  }

  /** Keeps the numReserved highest scores; ties keep smaller signed keys. */
  restrict(numReserved: number): number {
    this.#check();
    if (this.#rows.size <= numReserved) return 0;
    const ranked = [...this.#rows].map(([key, row]) => ({ key, score: row.score, resident: true }));
    const losers = evictionLosers(ranked, numReserved);
    for (const l of losers) this.#rows.delete(l.key);
    return losers.length;
  }

  setEpoch(epoch: number): void {
    this.#t.epoch = epoch;
  }

  dispose(): void {
    this.#disposed = true;
    this.#rows = new Map();
  }
}
