import { StoreUnavailableError } from '@embedstack/core';
import { type BatchCommand, notApplied, RedisConnection } from './connection.js';
import type { KeyPlan } from './keyPlan.js';

/** What a failed call reports. */
export interface BatchContext {
  /** Operation name for messages ('find', 'upsert', ...). */
  op: string;
  /** Table name for messages. */
  table: string;
  /** The call's keys (for naming the affected ones), when it has keys. */
  plan?: KeyPlan;
  /** True when the batch writes: failed commands leave their keys in an unknown state. */
  write: boolean;
}

const MAX_LISTED_KEYS = 16;

/**
 * The commands of one round trip of a call, with the bucket and key indices each
 * command covers, so that a failure can say exactly which keys and buckets are
 * affected. `run` never returns partial results: any failed command rejects the
 * whole call with StoreUnavailableError (a failed HMGET is never taken as "missing").
 */
export class Batch {
  readonly cmds: BatchCommand[] = [];
  readonly covers: { bucket: number; idx: readonly number[] }[] = [];

  /** Adds a command; returns its reply index. */
  add(bucket: number, cmd: BatchCommand, idx: readonly number[] = []): number {
    this.cmds.push(cmd);
    this.covers.push({ bucket, idx });
    return this.cmds.length - 1;
  }

  get length(): number {
    return this.cmds.length;
  }

  /**
   * Executes and returns the replies in order.
   * @throws StoreUnavailableError naming the failed keys (or count), buckets and nodes
   */
  async run(conn: RedisConnection, ctx: BatchContext): Promise<unknown[]> {
    if (this.cmds.length === 0) return [];
    let replies;
    try {
      replies = await conn.exec(this.cmds, !ctx.write);
    } catch (e) {
      // Not connected: nothing was sent, every key of the batch is unknown.
      const error = e instanceof Error ? e : new Error(String(e));
      throw this.#failure(this.cmds.map((_, i) => i), error, conn, ctx, false);
    }
    const failed = replies.map((r, i) => (r.error ? i : -1)).filter((i) => i >= 0);
    if (failed.length > 0) {
      const sent = !failed.every((i) => notApplied(replies[i]!.error!));
      throw this.#failure(failed, replies[failed[0]!]!.error!, conn, ctx, sent);
    }
    return replies.map((r) => r.value);
  }

  #failure(failed: number[], first: Error, conn: RedisConnection, ctx: BatchContext, sent = true): StoreUnavailableError {
    const buckets = new Set<number>();
    const nodes = new Set<string>();
    const keyIdx = new Set<number>();
    for (const i of failed) {
      buckets.add(this.covers[i]!.bucket);
      nodes.add(RedisConnection.nodeLabel(conn.groupOf(this.cmds[i]!.route)));
      for (const k of this.covers[i]!.idx) keyIdx.add(k);
    }
    const where = `bucket(s) [${[...buckets].sort((a, b) => a - b).join(', ')}] on node(s) [${[...nodes].join(', ')}]`;
    const state = !sent
      ? ctx.write
        ? 'could not be written (nothing was applied)'
        : 'could not be read'
      : ctx.write
        ? 'are in an unknown state (the write may or may not have been applied)'
        : 'could not be read';
    let what: string;
    if (ctx.plan && keyIdx.size > 0) {
      const distinct = [...new Set([...keyIdx].sort((a, b) => a - b).map((i) => ctx.plan!.key(i)))];
      what = `${distinct.length} of the call's keys (${listKeys(distinct)}) in ${where} ${state}`;
    } else {
      what = `the data of ${where} ${!sent ? 'could not be reached' : ctx.write ? 'is in an unknown state' : 'could not be read'}`;
    }
    return new StoreUnavailableError(`Redis ${ctx.op} on table "${ctx.table}" failed: ${what}: ${first.message}`, { cause: first });
  }
}

function listKeys(keys: readonly (bigint | number)[]): string {
  const listed = keys.slice(0, MAX_LISTED_KEYS).map((k) => String(k));
  const more = keys.length > listed.length ? ` and ${keys.length - listed.length} more` : '';
  return listed.join(', ') + more;
}

/** The distinct keys of a plan, listed (at most 16, then a count), for messages. */
export function describeKeys(plan: KeyPlan): string {
  return listKeys(plan.distinct.first.map((i) => plan.key(i)));
}
