import type { Keys } from './dtypes.js';
import { InvalidTypeError, invalidParameter, OutOfRangeError, argName } from './errors.js';
import { errorClassFor, unknownKeys } from './validation.js';

/**
 * Where the keys of one logical table live when it is split over N shards (one
 * core table per shard), and how a global key maps to the shard's local key:
 *
 * - `'mod'`, dynamic tables: key k lives on shard floorMod(k, N) under its own key k
 *   (SOK DynamicVariable, TFRA's default partitioner).
 * - `'mod'`, static tables (round-robin): global row i lives on shard i mod N at
 *   local row floor(i / N) (SOK's distributed Variable).
 * - `'range'`: the shard holds the contiguous global keys [start, end) at local key
 *   k - start (TF's TPU row sharding: `shardRanges`).
 * - `'localized'`: the shard holds every key under its own key (SOK `localized:k`:
 *   the whole table on one device).
 */
export type ShardPlacement = 'mod' | 'range' | 'localized';

/** This table's part in a sharded table. Every field is required for its placement. */
export type ShardPlan =
  | {
      /** Key k (dynamic) or row i (static, round-robin) lives on shard floorMod(k, numShards). */
      readonly placement: 'mod';
      /** Number of shards N, integer >= 1. */
      readonly numShards: number;
      /** This table's shard, integer in [0, N). */
      readonly shard: number;
    }
  | {
      /** This shard holds the global keys [start, end) at local key k - start. */
      readonly placement: 'range';
      /** First global key held (safe integer). */
      readonly start: number;
      /** One past the last global key held (safe integer, >= start). */
      readonly end: number;
    }
  | {
      /** This shard holds every key under its own key (the whole table on one device). */
      readonly placement: 'localized';
    };

/** A validated plan, as backends receive it. */
export interface ResolvedShardPlan {
  /** Where the keys live (see {@link ShardPlacement}). */
  readonly placement: ShardPlacement;
  /** 'mod': N >= 1; else 1. */
  readonly numShards: number;
  /** 'mod': d in [0, N); else 0. */
  readonly shard: number;
  /** 'range': [start, end) as safe integers; else 0, 0. */
  readonly start: number;
  /** 'range': one past the last global key held; else 0. */
  readonly end: number;
  /** 'mod' on a static table: local row floor(k / N) (round-robin); else local key k (or k - start). */
  readonly roundRobin: boolean;
}

/** The table facts a plan is checked against. */
export interface PlanTarget {
  /** The table's kind. */
  readonly kind: 'dynamic' | 'static';
  /** Static tables: rows; dynamic: ignored (0). */
  readonly vocabularySize: number;
  /** int32 tables take 'range' bounds within int32 (local keys must fit). */
  readonly keyDtype?: 'int64' | 'int32';
}

const MAX_SHARDS = 1 << 20;

/** The fields of each placement's plan. */
const FIELDS: Readonly<Record<ShardPlacement, readonly string[]>> = Object.freeze({
  mod: ['placement', 'numShards', 'shard'],
  range: ['placement', 'start', 'end'],
  localized: ['placement'],
});

/**
 * Validates `plan` for a table.
 * @throws InvalidTypeError (not a plan object), InvalidArgumentError naming the field
 */
export function resolveShardPlan(plan: unknown, table: PlanTarget, argument = 'plan'): ResolvedShardPlan {
  argument = argName(argument, 'plan');
  const target = table as Partial<PlanTarget> | null;
  if (typeof target !== 'object' || target === null || (target.kind !== 'dynamic' && target.kind !== 'static') || (target.kind === 'static' && !Number.isSafeInteger(target.vocabularySize))) {
    throw invalidParameter('table', 'a table or its options ({ kind, vocabularySize, keyDtype })', table, InvalidTypeError);
  }
  if (typeof plan !== 'object' || plan === null || Array.isArray(plan)) {
    throw invalidParameter(argument, "a shard plan ({ placement: 'mod' | 'range' | 'localized', ... })", plan, InvalidTypeError);
  }
  const p = plan as Record<string, unknown>;
  const int = (field: string, min: number, max: number): number => {
    const v = p[field];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
      throw invalidParameter(`${argument}.${field}`, `an integer in [${min}, ${max}]`, v, errorClassFor(v, 'number'));
    }
    return v;
  };
  // a field of another placement or misspelt would be ignored, silently (no allocation: per call of find)
  const fields = typeof p.placement === 'string' && Object.prototype.hasOwnProperty.call(FIELDS, p.placement) ? FIELDS[p.placement as ShardPlacement] : undefined;
  if (fields !== undefined) unknownKeys(p, fields, argument, 'fields');
  switch (p.placement) {
    case 'mod': {
      const numShards = int('numShards', 1, MAX_SHARDS);
      const shard = int('shard', 0, numShards - 1);
      return { placement: 'mod', numShards, shard, start: 0, end: 0, roundRobin: table.kind === 'static' };
    }
    case 'range': {
      const [lo, hi] = table.keyDtype === 'int32' ? [-2147483648, 2147483648] : [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
      const start = int('start', lo, hi);
      const end = int('end', start, hi);
      if (table.kind === 'static' && end - start > table.vocabularySize) {
        throw invalidParameter(`${argument}.end`, `at most start + vocabularySize (${start} + ${table.vocabularySize})`, end);
      }
      return { placement: 'range', numShards: 1, shard: 0, start, end, roundRobin: false };
    }
    case 'localized':
      return { placement: 'localized', numShards: 1, shard: 0, start: 0, end: 0, roundRobin: false };
    default:
      throw invalidParameter(`${argument}.placement`, "'mod', 'range' or 'localized'", p.placement, errorClassFor(p.placement, 'string'));
  }
}

/** floor(a / b) and the non-negative floorMod(a, b) of a bigint key. */
function divModBig(k: bigint, n: bigint): [bigint, bigint] {
  let q = k / n;
  let r = k - q * n;
  if (r < 0n) {
    r += n;
    q -= 1n;
  }
  return [q, r];
}

/**
 * The local key of global key `k` under `plan`, or null when another shard owns it.
 * Exact on every int64 key.
 */
export function localKeyOf(k: bigint | number, plan: ResolvedShardPlan): bigint | number | null {
  switch (plan.placement) {
    case 'localized':
      return k;
    case 'range':
      if (typeof k === 'number') return k >= plan.start && k < plan.end ? k - plan.start : null;
      return k >= BigInt(plan.start) && k < BigInt(plan.end) ? k - BigInt(plan.start) : null;
    case 'mod': {
      const n = plan.numShards;
      if (typeof k === 'number') {
        const r = ((k % n) + n) % n;
        if (r !== plan.shard) return null;
        return plan.roundRobin ? Math.floor(k / n) : k;
      }
      const [q, r] = divModBig(k, BigInt(n));
      if (Number(r) !== plan.shard) return null;
      return plan.roundRobin ? q : k;
    }
  }
}

/** The entries of a key array a shard owns: their positions (ascending) and local keys (same dtype). */
export interface PlanEntries {
  /** [m] positions in the input keys of the owned entries, increasing. */
  positions: Int32Array;
  /** [m] their local keys, in the dtype of the input keys. */
  local: Keys;
}

/** Positions and local keys of the entries of `keys` owned under `plan` (input order kept). */
export function planEntries(keys: Keys, plan: ResolvedShardPlan): PlanEntries {
  const n = keys.length;
  const pos = new Int32Array(n);
  let m = 0;
  if (keys instanceof Int32Array) {
    const local = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const l = localKeyOf(keys[i]!, plan) as number | null;
      if (l === null) continue;
      pos[m] = i;
      local[m++] = l;
    }
    return { positions: pos.slice(0, m), local: local.slice(0, m) };
  }
  const local = new BigInt64Array(n);
  for (let i = 0; i < n; i++) {
    const l = localKeyOf(keys[i]!, plan) as bigint | null;
    if (l === null) continue;
    pos[m] = i;
    local[m++] = l;
  }
  return { positions: pos.slice(0, m), local: local.slice(0, m) };
}

/**
 * Checks that every key a static-table shard owns maps to a row in [0, rows).
 * Keys other shards own are not checked (their shard checks them).
 * @throws OutOfRangeError naming `argument[i]`
 */
export function checkOwnedRows(keys: Keys, plan: ResolvedShardPlan, rows: number, tableName: string, argument: string): void {
  for (let i = 0; i < keys.length; i++) {
    const l = localKeyOf(keys[i]!, plan);
    if (l === null) continue;
    if (l < 0 || l >= rows) {
      throw new OutOfRangeError(
        `Expected ${argument}[${i}] to map to a row index in [0, ${rows}) of table "${tableName}" (${describePlan(plan)}) but received ${keys[i]} (local row ${l})`,
        { argument },
      );
    }
  }
}

/** One-line description of a plan for messages. */
export function describePlan(plan: ResolvedShardPlan): string {
  switch (plan.placement) {
    case 'mod':
      return `shard ${plan.shard} of ${plan.numShards}, ${plan.roundRobin ? 'round-robin rows' : 'keys mod N'}`;
    case 'range':
      return `keys [${plan.start}, ${plan.end})`;
    case 'localized':
      return 'every key';
  }
}
