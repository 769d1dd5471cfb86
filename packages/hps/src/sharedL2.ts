import { randomUUID } from 'node:crypto';
import { StoreUnavailableError } from '@embedstack/core';
import type { RedisArg, RedisStore } from '@embedstack/store-redis';

/** A table of a version in a shared L2. */
export interface VersionTable {
  /** Table name (`embedding_table_names`). */
  name: string;
  /** Floats per row. */
  dim: number;
}

/**
 * What a server that wrote a model into a shared L2 publishes (the `live` sorted set, scored by
 * `seq`): the servers sharing the L2 switch to the highest one.
 */
export interface PublishedVersion {
  /** Global sequence number of the load (INCR of the model's `seq` key): higher = newer. */
  seq: number;
  /** Suffix of the L2 table names: '' for HugeCTR's stable `<model>.<table>`, `.v<seq>` for a reload. */
  suffix: string;
  /** The tables, with the rows of each table's model files. */
  tables: (VersionTable & { rows: number })[];
  /** The exact table folders the version was read from (an export's `ckpt-N/<table>`). */
  files: string[];
}

/** Options of the shared-L2 protocol (HPS.create's `sharedL2`). */
export interface SharedL2Options {
  /**
   * Milliseconds between two polls of the published version (and renewals of this server's
   * lease). A server switches to another server's newer load within about this time.
   * Default 1000.
   */
  pollIntervalMs?: number;
  /**
   * Lifetime of this server's lease in Redis (renewed every poll), in milliseconds. A killed
   * server's versions are deleted once its lease has expired. At least 2 * pollIntervalMs.
   * Default 15000.
   */
  leaseMs?: number;
  /**
   * Switch to a newer version another server publishes while this one runs. Default true. With
   * false, an attaching server takes the version published when it starts (or loads the model)
   * and keeps it.
   */
  followReloads?: boolean;
}

/** INCR of KEYS[1], raised to ARGV[1] + 1 when it is not above ARGV[1]. */
const NEXT_SEQ = "local v = redis.call('INCR', KEYS[1]) local f = tonumber(ARGV[1]) if v <= f then v = f + 1 redis.call('SET', KEYS[1], v) end return v";

/** The Redis keys of a model's bookkeeping: one hash tag per model, so one cluster slot. */
const ctlKey = (model: string, what: string): string => `hps-ctl:{${model}}:${what}`;

/**
 * The Redis side of servers sharing an L2 (all keys `hps-ctl:{<model>}:*`):
 * - `seq`: a counter; every load that writes a model into the L2 takes the next value;
 * - `live`: a sorted set of published versions, scored by seq (the highest is the live one);
 * - `gens`: a hash of the reload versions (`.v<seq>` table sets) created, with their tables;
 * - `servers` + `lease:<id>`: the servers using the model, each with a lease (a key with a TTL)
 *   listing the versions it uses (served, draining, being loaded).
 * A `.v<seq>` set is deleted only when it is registered, not live, and named by no lease.
 */
export class SharedL2Control {
  /** This server's id (its lease key). */
  readonly id = randomUUID();
  /** Per model: table suffix -> how many of this server's versions use it. */
  readonly #uses = new Map<string, Map<string, number>>();
  /** Models whose `servers` set this server has pruned once (the ids of killed servers go then, or at a collection). */
  readonly #pruned = new Set<string>();
  /** Models whose lease this server has written (a later renewal that finds it gone reports a lapse). */
  readonly #leased = new Set<string>();
  /** Models whose lease a renewal found lapsed, until takeLapsed. */
  readonly #lapsed = new Set<string>();

  constructor(
    private readonly store: RedisStore,
    readonly leaseMs: number,
  ) {}

  async #run(model: string, cmds: [name: string, ...args: RedisArg[]][], readOnly: boolean): Promise<unknown[]> {
    const route = Buffer.from(ctlKey(model, 'seq'));
    const replies = await this.store.connection.exec(
      cmds.map(([name, ...args]) => ({ route, name, args })),
      readOnly,
    );
    const failed = replies.find((r) => r.error);
    if (failed) throw new StoreUnavailableError(`Redis failed the shared-L2 bookkeeping of model ${JSON.stringify(model)}: ${failed.error!.message}`, { cause: failed.error });
    return replies.map((r) => r.value);
  }

  /**
   * The next global load number of `model`, above `floor` (the highest seq the caller knows):
   * the counter is raised past it when it went back (an evicted key, a failover that lost writes).
   */
  async nextSeq(model: string, floor = 0): Promise<number> {
    const [v] = await this.#run(model, [['EVAL', NEXT_SEQ, 1, ctlKey(model, 'seq'), floor]], false);
    return Number(v);
  }

  /** Counts one use of `suffix` by this server; the returned function ends it (idempotent). */
  use(model: string, suffix: string): () => void {
    let m = this.#uses.get(model);
    if (!m) this.#uses.set(model, (m = new Map()));
    m.set(suffix, (m.get(suffix) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = m.get(suffix)! - 1;
      if (n > 0) m.set(suffix, n);
      else m.delete(suffix);
    };
  }

  /** Suffixes this server uses for `model`. */
  uses(model: string): string[] {
    return [...(this.#uses.get(model)?.keys() ?? [])];
  }

  /**
   * Writes this server's lease for `model` (or every model it uses): the versions it uses, for leaseMs.
   * A renewal that finds the lease it wrote before gone (it lapsed: no renewal reached Redis for
   * leaseMs, or Redis lost the key) notes the model for {@link takeLapsed}: other servers may have
   * deleted the versions the lease named.
   */
  async renew(model?: string): Promise<void> {
    const models = model === undefined ? [...this.#uses.keys()] : [model];
    await Promise.all(
      models.map(async (m) => {
        const [previous] = await this.#run(
          m,
          // the lease first: a server found in `servers` always has its lease written already
          [
            ['SET', ctlKey(m, `lease:${this.id}`), JSON.stringify(this.uses(m)), 'PX', this.leaseMs, 'GET'],
            ['SADD', ctlKey(m, 'servers'), this.id],
          ],
          false,
        );
        if (previous === null && this.#leased.has(m)) this.#lapsed.add(m);
        this.#leased.add(m);
      }),
    );
  }

  /** The models whose lease was found lapsed since the last call (then forgotten). */
  takeLapsed(): string[] {
    const models = [...this.#lapsed];
    this.#lapsed.clear();
    return models;
  }

  /** Whether reload version `suffix` of `model` is still registered (not deleted by a collection). */
  async registered(model: string, suffix: string): Promise<boolean> {
    const [r] = await this.#run(model, [['HEXISTS', ctlKey(model, 'gens'), suffix]], true);
    return r === 1;
  }

  /** Registers a reload version's table set (before its tables are created), so that it is found if its server dies. */
  async register(model: string, suffix: string, tables: readonly VersionTable[]): Promise<void> {
    await this.#run(model, [['HSET', ctlKey(model, 'gens'), suffix, JSON.stringify(tables.map((t) => ({ name: t.name, dim: t.dim })))]], false);
  }

  /** Publishes a version; a version published later with a lower seq never becomes the live one. */
  async publish(model: string, v: PublishedVersion): Promise<void> {
    const key = ctlKey(model, 'live');
    await this.#run(model, [['ZADD', key, v.seq, JSON.stringify(v)], ['ZREMRANGEBYRANK', key, 0, -2]], false);
  }

  /** The live version of `model` (the highest published), or null. */
  async live(model: string): Promise<PublishedVersion | null> {
    const [r] = await this.#run(model, [['ZRANGE', ctlKey(model, 'live'), -1, -1]], true);
    const first = (r as Buffer[])[0];
    return first ? (JSON.parse(first.toString('utf8')) as PublishedVersion) : null;
  }

  /**
   * Deletes (through `drop`) every registered reload version of `model` that is not live, not
   * used by this server, and named by no other server's lease (expired leases are forgotten).
   * Reads in this order: registry, live, leases; a server registers and leases a version before
   * creating it, and leases one before checking that it is still live and switching to it, so a
   * version a live server uses or is about to use is never deleted.
   * @returns the suffixes deleted
   */
  async collect(model: string, drop: (suffix: string, tables: VersionTable[]) => Promise<void>): Promise<string[]> {
    const [gens] = await this.#run(model, [['HGETALL', ctlKey(model, 'gens')]], true);
    const flat = gens as Buffer[];
    if (flat.length === 0 && this.#pruned.has(model)) return [];
    this.#pruned.add(model);
    const registered = new Map<string, VersionTable[]>();
    for (let i = 0; i < flat.length; i += 2) registered.set(flat[i]!.toString('utf8'), JSON.parse(flat[i + 1]!.toString('utf8')) as VersionTable[]);
    const live = await this.live(model);
    const [members] = await this.#run(model, [['SMEMBERS', ctlKey(model, 'servers')]], true);
    const others = (members as Buffer[]).map((b) => b.toString('utf8')).filter((id) => id !== this.id);
    const leases = others.length === 0 ? [] : await this.#run(model, others.map((id) => ['GET', ctlKey(model, `lease:${id}`)] as [string, ...RedisArg[]]), true);
    const used = new Set(this.uses(model));
    if (live) used.add(live.suffix);
    const gone: string[] = [];
    leases.forEach((l, i) => {
      if (l === null) gone.push(others[i]!);
      else for (const s of JSON.parse((l as Buffer).toString('utf8')) as string[]) used.add(s);
    });
    if (gone.length > 0) await this.#run(model, [['SREM', ctlKey(model, 'servers'), ...gone]], false);
    const deleted: string[] = [];
    for (const [suffix, tables] of registered) {
      if (used.has(suffix)) continue;
      await drop(suffix, tables);
      await this.#run(model, [['HDEL', ctlKey(model, 'gens'), suffix]], false);
      deleted.push(suffix);
    }
    return deleted;
  }

  /** Removes this server's leases (best effort): its versions can be collected at once. */
  async close(): Promise<void> {
    await Promise.allSettled(
      [...this.#uses.keys()].map((m) =>
        this.#run(
          m,
          [
            ['DEL', ctlKey(m, `lease:${this.id}`)],
            ['SREM', ctlKey(m, 'servers'), this.id],
          ],
          false,
        ),
      ),
    );
  }
}
