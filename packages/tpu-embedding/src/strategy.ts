import { InvalidTypeError, invalidParameter } from '@embedstack/core';

/**
 * The largest replica or host count taken (2^16: beyond any TPU pod; TF's largest
 * slices have a few thousand cores). A bound, so that a stray huge number is an
 * error rather than a loop or an allocation per host.
 */
export const MAX_STRATEGY_COUNT = 65_536;

/** Options of {@link ReplicaStrategy} (TF's `TPUStrategy` topology, reduced to two counts). */
export interface ReplicaStrategyOptions {
  /** Replicas (TPU cores) the global batch is split over, integer in [1, 65536]. Default 1. */
  numReplicas?: number | null;
  /** Hosts each table is sharded over, row-wise, integer in [1, 65536]. Default 1. */
  numHosts?: number | null;
}

/**
 * Stands in for TF's `TPUStrategy`: how many replicas share a step and how many
 * hosts hold each table. `enqueue` takes the global batch (replica r owns the r-th
 * contiguous slice; lookups run per replica and per shard, concurrently on async
 * backends); each table is stored as `numHosts` row shards. Results never depend
 * on either number. Options are read-only properties.
 *
 * @throws InvalidArgumentError when a count is not an integer in [1, 65536]
 */
export class ReplicaStrategy {
  /** Replicas the global batch is split over. */
  readonly numReplicas: number;
  /** Hosts (row shards) each table is stored as. */
  readonly numHosts: number;

  constructor(options?: ReplicaStrategyOptions | null) {
    const o = (options ?? {}) as Record<string, unknown>;
    if (typeof o !== 'object' || Array.isArray(o)) {
      throw invalidParameter('options', 'an options object ({ numReplicas, numHosts })', options, InvalidTypeError);
    }
    for (const k of Object.keys(o)) {
      if (k !== 'numReplicas' && k !== 'numHosts') throw invalidParameter(`options.${k}`, 'one of numReplicas, numHosts', k);
    }
    const count = (v: unknown, argument: string): number => {
      const n = v ?? 1;
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > MAX_STRATEGY_COUNT) throw invalidParameter(argument, `an integer in [1, ${MAX_STRATEGY_COUNT}]`, n);
      return n;
    };
    this.numReplicas = count(o.numReplicas, 'numReplicas');
    this.numHosts = count(o.numHosts, 'numHosts');
    Object.freeze(this);
  }
}

/** A contiguous block of rows [start, start + size) held by one shard. */
export interface ShardRange {
  /** First row of the shard. */
  start: number;
  /** Rows in the shard. */
  size: number;
}

/**
 * TF's row sharding of `rows` over `hosts`: the first `rows % hosts` shards get
 * `floor(rows / hosts) + 1` rows, the rest `floor(rows / hosts)`; empty shards are
 * skipped (so there are min(rows, hosts) shards).
 * @throws InvalidArgumentError when rows is not an integer >= 0 or hosts not an integer in [1, 65536]
 */
export function shardRanges(rows: number, hosts: number): ShardRange[] {
  if (!Number.isSafeInteger(rows) || rows < 0) throw invalidParameter('rows', 'an integer >= 0', rows);
  if (!Number.isSafeInteger(hosts) || hosts < 1 || hosts > MAX_STRATEGY_COUNT) throw invalidParameter('hosts', `an integer in [1, ${MAX_STRATEGY_COUNT}]`, hosts);
  const q = Math.floor(rows / hosts);
  const r = rows % hosts;
  const out: ShardRange[] = [];
  let start = 0;
  // Only the first min(rows, hosts) shards are non-empty (with hosts > rows, q is 0 and
  // the r = rows first shards hold one row each), so a huge host count costs nothing.
  const shards = Math.min(rows, hosts);
  for (let s = 0; s < shards; s++) {
    const size = s < r ? q + 1 : q;
    out.push({ start, size });
    start += size;
  }
  return out;
}

/** The shard holding `row` under {@link shardRanges}`(rows, hosts)`. */
export function shardOf(row: number, rows: number, hosts: number): number {
  const q = Math.floor(rows / hosts);
  const r = rows % hosts;
  const big = r * (q + 1);
  return row < big ? Math.floor(row / (q + 1)) : r + Math.floor((row - big) / q);
}
