/**
 * An independent model of a table, written for the differential property tests from
 * the documented rules (scores.ts, rawTable.ts, core.md) and sharing no code with the
 * reference backend: rows in a Map keyed by decimal key, scores as bigints, the clock,
 * the epoch, the eviction rule of capped tables, and the optimizers of model.ts.
 * Values are float64 rounded to float32 when stored, so they match a backend to
 * float32 rounding (compared with a tolerance).
 */
import { initialRow } from '../initializers.js';
import { resolveOptimizer, type OptimizerSpec } from '../optimizers.js';
import type { ResolvedTableOptions } from '../tableOptions.js';
import type { ScorePolicy } from '../scores.js';
import { type ModelOptimizer, modelStep } from './model.js';
import type { RowState } from './harness.js';

const U64 = (1n << 64n) - 1n;
const LOW32 = (1n << 32n) - 1n;
const f32 = Math.fround;

interface Row {
  key: bigint;
  value: number[];
  slots: number[][];
  score: bigint;
}

/** One distinct key of a call: how often it occurs and the caller's score at its last occurrence. */
interface Seen {
  key: bigint;
  count: number;
  given: bigint | undefined;
}

export interface ModelFind {
  values: number[];
  exists: number[];
}

/** The model table; keys are bigints (int32 keys too). */
export class TableModel {
  readonly o: ResolvedTableOptions;
  readonly widths: number[];
  rows = new Map<string, Row>();
  clock = 0;
  epoch = 0;

  constructor(o: ResolvedTableOptions) {
    this.o = o;
    this.widths = o.slots.widths.map((w) => (w === 'dim' ? o.dim : 1));
    if (o.kind === 'static') for (let r = 0; r < o.vocabularySize; r++) this.rows.set(String(r), this.fresh(BigInt(r)));
  }

  get static(): boolean {
    return this.o.kind === 'static';
  }

  /** The initial row of `key` (values from core's counter-based generator, the spec's RNG). */
  initial(key: bigint): number[] {
    const out = new Float32Array(this.o.dim);
    const k = this.o.keyDtype === 'int32' ? Number(key) : key;
    initialRow(this.o.initializer, this.o.seed, this.o.stream, k, this.o.dim, out, 0, Number(key));
    return Array.from(out);
  }

  fresh(key: bigint): Row {
    return { key, value: this.initial(key), slots: this.widths.map((w, i) => new Array<number>(w).fill(f32(this.o.slots.initial[i]!))), score: 0n };
  }

  get policy(): ScorePolicy {
    return this.o.scorePolicy;
  }

  /** Whether a call of this kind updates scores of its resident keys. */
  touches(write: boolean): boolean {
    const p = this.policy;
    if (write) return true;
    return p === 'lru' || p === 'lfu' || p === 'epochLru' || p === 'epochLfu';
  }

  /** scores.ts's table of policies. */
  score(old: bigint | undefined, count: number, given: bigint | undefined): bigint {
    const c = BigInt(count);
    switch (this.policy) {
      case 'lru':
        return BigInt(this.clock);
      case 'lfu': {
        const s = (old ?? 0n) + c;
        return s > U64 ? U64 : s;
      }
      case 'epochLru':
        return (BigInt(this.epoch) << 32n) + (BigInt(this.clock) & LOW32);
      case 'epochLfu': {
        const e = BigInt(this.epoch);
        const sameEpoch = old !== undefined && old >> 32n === e;
        let n = sameEpoch ? (old & LOW32) + c : c;
        if (n > LOW32) n = LOW32;
        return (e << 32n) + n;
      }
      case 'timestamp':
        return BigInt(Math.floor(Date.now() / 1000));
      case 'frequency': {
        const s = (old ?? 0n) + 1n;
        return s > U64 ? U64 : s;
      }
      case 'customized':
        return given ?? old ?? 0n;
    }
  }

  distinct(keys: bigint[], scores: bigint[] | null): Seen[] {
    const m = new Map<string, Seen>();
    keys.forEach((k, i) => {
      const s = m.get(String(k));
      if (s) {
        s.count++;
        s.given = scores ? scores[i] : undefined;
      } else m.set(String(k), { key: k, count: 1, given: scores ? scores[i] : undefined });
    });
    return [...m.values()];
  }

  /**
   * Admission of the call's new keys `fresh` (distinct, absent, in order): when they do
   * not fit under maxCapacity, keep the best by score among untouched residents and new
   * keys (score desc, new keys first, smaller key); evict losing residents; return the
   * refused new keys.
   */
  admit(fresh: bigint[], seen: Seen[], explicit: boolean): Set<string> {
    const refused = new Set<string>();
    const max = this.o.maxCapacity;
    if (this.static || fresh.length <= max - this.rows.size) return refused;
    const inCall = new Set(seen.map((s) => String(s.key)));
    let touched = 0;
    const cands: { key: bigint; score: bigint; resident: boolean }[] = [];
    for (const r of this.rows.values()) {
      if (inCall.has(String(r.key))) touched++;
      else cands.push({ key: r.key, score: r.score, resident: true });
    }
    const bySeen = new Map(seen.map((s) => [String(s.key), s]));
    for (const k of fresh) {
      const s = bySeen.get(String(k))!;
      cands.push({ key: k, score: explicit ? s.given! : this.score(undefined, s.count, s.given), resident: false });
    }
    cands.sort((a, b) => {
      if (a.score !== b.score) return a.score > b.score ? -1 : 1;
      if (a.resident !== b.resident) return a.resident ? 1 : -1;
      return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
    });
    for (const loser of cands.slice(Math.max(0, max - touched))) {
      if (loser.resident) this.rows.delete(String(loser.key));
      else refused.add(String(loser.key));
    }
    return refused;
  }

  /** Distinct keys of the call that are absent, in order of first appearance (only occurrences passing `wants`). */
  absent(keys: bigint[], wants: (i: number) => boolean = () => true): bigint[] {
    const out: bigint[] = [];
    const seen = new Set<string>();
    keys.forEach((k, i) => {
      const s = String(k);
      if (this.rows.has(s) || seen.has(s) || !wants(i)) return;
      seen.add(s);
      out.push(k);
    });
    return out;
  }

  /** Scores of the call's resident keys after the call. */
  touch(seen: Seen[], write: boolean, explicit = false): void {
    if (this.static || !this.touches(write)) return;
    for (const s of seen) {
      const r = this.rows.get(String(s.key));
      if (r) r.score = explicit ? s.given! : this.score(r.score, s.count, s.given);
    }
  }

  /** Starts a scored call. */
  begin(): void {
    this.clock++;
  }

  find(keys: bigint[]): ModelFind {
    this.begin();
    const out: ModelFind = { values: [], exists: [] };
    for (const k of keys) {
      const r = this.rows.get(String(k));
      out.values.push(...(r ? r.value : this.initial(k)));
      out.exists.push(r ? 1 : 0);
    }
    this.touch(this.distinct(keys, null), false);
    return out;
  }

  findOrInsert(keys: bigint[], scores: bigint[] | null): ModelFind {
    this.begin();
    const seen = this.distinct(keys, scores);
    const refused = this.admit(this.absent(keys), seen, false);
    const present = new Set(seen.filter((s) => this.rows.has(String(s.key))).map((s) => String(s.key)));
    const out: ModelFind = { values: [], exists: [] };
    for (const k of keys) {
      const s = String(k);
      out.exists.push(present.has(s) ? 1 : 0);
      if (refused.has(s)) {
        out.values.push(...this.initial(k));
        continue;
      }
      let r = this.rows.get(s);
      if (!r) this.rows.set(s, (r = this.fresh(k)));
      out.values.push(...r.value);
    }
    this.touch(seen, true);
    return out;
  }

  /** upsert (insert = true) or assign (existing keys only). */
  write(keys: bigint[], values: number[][], scores: bigint[] | null, insert: boolean): void {
    this.begin();
    const seen = this.distinct(keys, scores);
    const refused = insert ? this.admit(this.absent(keys), seen, false) : new Set<string>();
    keys.forEach((k, i) => {
      const s = String(k);
      let r = this.rows.get(s);
      if (!r && (!insert || refused.has(s))) return;
      if (!r) this.rows.set(s, (r = this.fresh(k)));
      r.value = values[i]!.map(f32);
    });
    this.touch(seen, true);
  }

  /** present & exists -> add delta; absent & !exists -> insert delta; else nothing; in order. */
  accum(keys: bigint[], deltas: number[][], exists: boolean[], scores: bigint[] | null): void {
    this.begin();
    const seen = this.distinct(keys, scores);
    const refused = this.admit(this.absent(keys, (i) => !exists[i]), seen, false);
    keys.forEach((k, i) => {
      const s = String(k);
      if (refused.has(s)) return;
      const r = this.rows.get(s);
      if (r && exists[i]) r.value = r.value.map((x, c) => f32(x + deltas[i]![c]!));
      else if (!r && !exists[i]) this.rows.set(s, { ...this.fresh(k), value: deltas[i]!.map(f32) });
    });
    this.touch(seen, true);
  }

  /** Bulk load: values, slots (or their initial values), scores verbatim when given. */
  importRows(keys: bigint[], values: number[][], slots: number[][][] | null, scores: bigint[] | null): void {
    this.begin();
    const explicit = scores !== null;
    const seen = this.distinct(keys, scores);
    const refused = this.admit(this.absent(keys), seen, explicit);
    keys.forEach((k, i) => {
      const s = String(k);
      if (refused.has(s)) return;
      let r = this.rows.get(s);
      if (!r) this.rows.set(s, (r = this.fresh(k)));
      r.value = values[i]!.map(f32);
      r.slots = slots ? slots.map((sl) => sl[i]!.map(f32)) : this.fresh(k).slots;
    });
    this.touch(seen, true, explicit && !this.static);
  }

  remove(keys: bigint[]): number {
    const distinct = new Set(keys.map(String));
    if (this.static) {
      for (const s of distinct) this.rows.set(s, this.fresh(BigInt(s)));
      return distinct.size;
    }
    let n = 0;
    for (const s of distinct) if (this.rows.delete(s)) n++;
    return n;
  }

  clear(): void {
    if (this.static) for (const s of this.rows.keys()) this.rows.set(s, this.fresh(BigInt(s)));
    else this.rows.clear();
  }

  /** Keeps the n best scores (ties: smaller key); returns how many were removed. */
  restrict(n: number): number {
    if (this.static || this.rows.size <= n) return 0;
    const ranked = [...this.rows.values()].sort((a, b) => (a.score !== b.score ? (a.score > b.score ? -1 : 1) : a.key < b.key ? -1 : 1));
    for (const r of ranked.slice(n)) this.rows.delete(String(r.key));
    return ranked.length - n;
  }

  /** Sums each key's gradients (float32, in order), admits new keys, one optimizer step per admitted row. */
  applyGradients(keys: bigint[], grads: number[][], spec: OptimizerSpec, step: number): void {
    this.begin();
    const seen = this.distinct(keys, null);
    const sums = new Map<string, number[]>();
    keys.forEach((k, i) => {
      const s = String(k);
      const g = sums.get(s) ?? new Array<number>(this.o.dim).fill(0);
      sums.set(
        s,
        g.map((x, c) => f32(x + grads[i]![c]!)),
      );
    });
    const refused = this.admit(this.absent(keys), seen, false);
    const opt = toModel(spec, step);
    for (const s of seen) {
      const key = String(s.key);
      if (refused.has(key)) continue;
      let r = this.rows.get(key);
      if (!r) this.rows.set(key, (r = this.fresh(s.key)));
      const m = { w: r.value.slice(), slots: r.slots.map((x) => x.slice()) };
      modelStep(opt, m, sums.get(key)!, step);
      r.value = m.w.map(f32);
      r.slots = m.slots.map((x) => x.map(f32));
    }
    this.touch(seen, true);
  }

  /** The embedding bag (core.md): reads as find, or as findOrInsert with insertMissing. */
  lookupCombined(rows: bigint[][], weights: number[][] | null, combiner: 'sum' | 'mean' | 'sqrtn' | 'max' | 'min', maxNorm: number, insert: boolean): number[] {
    const flat = rows.flat();
    const read = insert ? this.findOrInsert(flat, null) : this.find(flat);
    const dim = this.o.dim;
    const out: number[] = [];
    let j = 0;
    rows.forEach((r, i) => {
      const acc = new Array<number>(dim).fill(0);
      let ws = 0;
      let ws2 = 0;
      r.forEach((_, e) => {
        const w = weights ? weights[i]![e]! : 1;
        let v = read.values.slice(j * dim, (j + 1) * dim);
        const n = Math.hypot(...v);
        if (maxNorm > 0 && n > maxNorm) v = v.map((x) => (x * maxNorm) / n);
        // max / min: the first entry's value, replaced only by a strictly greater / smaller one
        if (combiner === 'max') v.forEach((x, c) => (acc[c] = e === 0 || w * x > acc[c]! ? w * x : acc[c]!));
        else if (combiner === 'min') v.forEach((x, c) => (acc[c] = e === 0 || w * x < acc[c]! ? w * x : acc[c]!));
        else v.forEach((x, c) => (acc[c] = acc[c]! + w * x));
        ws += w;
        ws2 += w * w;
        j++;
      });
      const d = combiner === 'mean' ? ws : combiner === 'sqrtn' ? Math.sqrt(ws2) : 1;
      out.push(...acc.map((x) => (d === 0 ? 0 : x / d)));
    });
    return out;
  }

  /** The state as the harness's snapshot: decimal key -> value, slots, score. */
  snapshot(): Map<string, RowState> {
    const out = new Map<string, RowState>();
    for (const r of this.rows.values()) out.set(String(r.key), { value: r.value.slice(), slots: r.slots.map((s) => s.slice()), score: r.score });
    return out;
  }
}

/** The model's optimizer for a core spec at `step` (hyperparameters read from core's resolution of the spec). */
function toModel(spec: OptimizerSpec, step: number): ModelOptimizer {
  const r = resolveOptimizer(spec, step);
  return {
    kind: r.kind,
    lr: r.lr,
    beta1: r.beta1,
    beta2: r.beta2,
    epsilon: r.epsilon,
    momentum: r.momentum,
    nesterov: r.useNesterov,
    exponent: r.exponent,
    sumInsideSqrt: r.sumInsideSqrt,
    l1: r.l1,
    l2: r.l2,
    beta: r.beta,
    lrPower: r.learningRatePower,
    rho: r.rho,
    clipGrad: [r.clipGradMin, r.clipGradMax],
    weightDecay: r.weightDecay,
    clipWeight: [r.clipWeightMin, r.clipWeightMax],
  };
}
