import { initialRow, type Keys, type ResolvedTableOptions, referenceKernels, type ScoreClock, StoreUnavailableError } from '@embedstack/core';
import { Batch, type BatchContext, describeKeys } from './batch.js';
import type { RedisConnection } from './connection.js';
import { KeyPlan } from './keyPlan.js';
import { TableKeyspace } from './keyspace.js';
import { addHlen, type KvContext } from './kv.js';
import type { ResolvedRedisTableLayout } from './options.js';
import { printableKey } from './naming.js';
import { addTouch, needsClock, touchesOn } from './scoring.js';

/** The scores context of one call: the shared clock's value and this client's wall clock. */
export interface CallClock {
  clock: bigint;
  now: bigint;
}

/**
 * State and plumbing shared by a Redis table's operations (package-internal): the
 * connection, key names, the per-bucket row-count cache, the epoch, and helpers to
 * run batches, advance the clock and update scores. Not thread-safe by itself: the
 * owning RedisRawTable orders calls with its lock.
 */
export class TableCore {
  readonly conn: RedisConnection;
  readonly options: ResolvedTableOptions;
  readonly layout: ResolvedRedisTableLayout;
  readonly keyspace: TableKeyspace;
  /** Width in floats of each slot. */
  readonly widths: number[];
  readonly isStatic: boolean;
  readonly capped: boolean;
  /** Scores are kept (dynamic tables with trackScores). */
  readonly scored: boolean;
  /** Cached HLEN per bucket (dynamic tables). */
  readonly sizes: Float64Array;
  sizesLoaded = false;
  epoch = 0;

  constructor(conn: RedisConnection, options: ResolvedTableOptions, layout: ResolvedRedisTableLayout) {
    this.conn = conn;
    this.options = options;
    this.layout = layout;
    this.keyspace = new TableKeyspace(conn, layout, options.slots.names);
    this.widths = options.slots.widths.map((w) => (w === 'dim' ? options.dim : 1));
    this.isStatic = options.kind === 'static';
    this.capped = options.maxCapacity !== Infinity;
    this.scored = !this.isStatic && layout.trackScores;
    this.sizes = new Float64Array(layout.storageSlice);
  }

  get name(): string {
    return this.options.name;
  }

  /** Row count: vocabularySize for static tables, else the cache's sum. */
  size(): number {
    if (this.isStatic) return this.options.vocabularySize;
    let s = 0;
    for (const v of this.sizes) s += v;
    return s;
  }

  /** Resolves bucket names; the first call also loads the row counts. */
  async ctx(): Promise<KvContext> {
    const buckets = await this.keyspace.init();
    const ctx = { buckets, chunk: this.layout.keysSendingSize, table: this.name };
    if (!this.sizesLoaded && !this.isStatic) await this.loadSizes(ctx);
    return ctx;
  }

  /** HLEN of every bucket into the cache. */
  async loadSizes(ctx: KvContext): Promise<void> {
    const b = new Batch();
    const read = this.sizesOfAll(b, ctx);
    read(await this.run(b, 'size', undefined, false));
    this.sizesLoaded = true;
  }

  run(batch: Batch, op: string, plan: KeyPlan | undefined, write: boolean): Promise<unknown[]> {
    const c: BatchContext = { op, table: this.name, write };
    if (plan) c.plan = plan;
    return batch.run(this.conn, c);
  }

  plan(keys: Keys): KeyPlan {
    return new KeyPlan(keys, this.layout.storageSlice);
  }

  /** Appends HLEN of the plan's buckets; call the result with the replies to refresh the cache. */
  sizesOf(batch: Batch, ctx: KvContext, plan: KeyPlan): (replies: readonly unknown[]) => void {
    if (this.isStatic) return () => {};
    const read = addHlen(batch, ctx, new Set(plan.bucket));
    return (replies) => {
      for (const [b, n] of read(replies)) this.sizes[b] = n;
    };
  }

  /** Appends HLEN of every bucket (exact size, capped admission). */
  sizesOfAll(batch: Batch, ctx: KvContext): (replies: readonly unknown[]) => void {
    const read = addHlen(batch, ctx, ctx.buckets.keys());
    return (replies) => {
      for (const [b, n] of read(replies)) this.sizes[b] = n;
    };
  }

  /** True when a call of this kind updates scores. */
  tracks(write: boolean): boolean {
    return this.scored && touchesOn(this.options.scorePolicy, write);
  }

  /** Starts a scored call: INCR of the shared clock when the policy reads it, and the wall clock. */
  async begin(op: string, write: boolean, plan?: KeyPlan): Promise<CallClock> {
    const policy = this.options.scorePolicy;
    const now = this.scored && policy === 'timestamp' ? referenceKernels.nowSeconds() : 0n;
    if (!this.scored || !needsClock(policy) || !(write || touchesOn(policy, false))) return { clock: 0n, now };
    const key = this.keyspace.clock;
    const b = new Batch();
    b.add(0, { route: key, name: 'INCR', args: [key] });
    try {
      const [v] = await this.run(b, op, undefined, true);
      return { clock: BigInt(Number(v)), now };
    } catch (e) {
      const cause = (e as Error).cause instanceof Error ? ((e as Error).cause as Error).message : (e as Error).message;
      throw new StoreUnavailableError(
        `Redis ${op} on table "${this.name}" failed before reading or writing any row (${plan ? `${plan.n} keys: ${describeKeys(plan)}` : 'no keys'}): ` +
          `advancing the score clock ${printableKey(key)} failed: ${cause}`,
        { cause: e },
      );
    }
  }

  /** The reference's score clock for this call (for scoring new keys client-side). */
  scoreClock(c: CallClock): ScoreClock {
    return { clock: Number(c.clock), epoch: this.epoch, now: c.now };
  }

  /** Adds the score update of distinct ids `ids` (only rows present when it runs are touched). */
  touch(batch: Batch, ctx: KvContext, plan: KeyPlan, ids: readonly number[], c: CallClock, write: boolean, given: BigUint64Array | null, explicit = false): void {
    if (!this.scored) return;
    if (!explicit && !this.tracks(write)) return;
    addTouch(batch, ctx, plan, ids, { policy: this.options.scorePolicy, epoch: this.epoch }, c, given, explicit);
  }

  /** Initial row of `key` into out[offset..offset+dim) (static tables: the key is the row index). */
  initial(key: bigint | number, out: Float32Array, offset: number): void {
    const o = this.options;
    initialRow(o.initializer, o.seed, o.stream, key, o.dim, out, offset, this.isStatic ? Number(key) : 0);
  }
}

/** Every distinct id of a plan, 0..d-1. */
export function allIds(plan: KeyPlan): number[] {
  return plan.distinct.first.map((_, id) => id);
}
