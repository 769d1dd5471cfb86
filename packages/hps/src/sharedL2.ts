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
  /** Suffix of the L2 table names: '' for HugeCTR's stable `<model>.<table>` (a model's first load only), `.v<seq>` for every later load. */
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

/**
 * INCR of KEYS[1] (seq), raised above ARGV[1] and above every `.v<n>` registered in KEYS[2] (gens: a
 * version another server is loading, not published yet) when it is not: a counter that went back
 * never hands out a number in use.
 */
const NEXT_SEQ =
  "local v = redis.call('INCR', KEYS[1]) local f = tonumber(ARGV[1]) " +
  "for _, s in ipairs(redis.call('HKEYS', KEYS[2])) do local n = tonumber(string.match(s, '^%.v(%d+)$')) if n and n > f then f = n end end " +
  "if v <= f then v = f + 1 redis.call('SET', KEYS[1], v) end return v";

/** Redis's clock in milliseconds (lease expiries are Redis times: servers' clocks never matter). */
const NOW = "if redis.replicate_commands then redis.replicate_commands() end local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) ";

/**
 * A renewal: KEYS leases, uses; ARGV id, leaseMs, the suffixes used (JSON). Writes the server's
 * expiry (now + leaseMs) and its suffixes; returns 1 when its previous lease was still running,
 * 0 when it had expired (but no collection has run since: one forgets expired leases first), -1
 * when it was gone (never written, forgotten by a collection, or lost by Redis).
 */
const RENEW =
  NOW +
  "local prev = redis.call('ZSCORE', KEYS[1], ARGV[1]) " +
  "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) " +
  'if not prev then return -1 end if tonumber(prev) >= now then return 1 end return 0';

/**
 * A collection's reads, at one instant: KEYS gens, live, leases, uses; ARGV the caller's suffixes
 * (JSON), and the caller's id when it leaves (its lease is removed first). Forgets expired leases,
 * then returns `[suffix, tables, ...]` of the registered versions that are not live, not the
 * caller's, and named by no running lease (a `uses` entry without a lease, left by a removal of
 * which only the ZREM was applied, is forgotten). The leases are read only when some registered
 * version is neither live nor the caller's (a poll in the steady state reads two keys).
 */
const COLLECT =
  NOW +
  "if ARGV[2] then redis.call('ZREM', KEYS[3], ARGV[2]) redis.call('HDEL', KEYS[4], ARGV[2]) end " +
  "local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now) " +
  "for _, id in ipairs(dead) do redis.call('ZREM', KEYS[3], id) redis.call('HDEL', KEYS[4], id) end " +
  "local gens = redis.call('HGETALL', KEYS[1]) if #gens == 0 then return {} end " +
  'local used = {} ' +
  "local top = redis.call('ZRANGE', KEYS[2], -1, -1) if top[1] then used[cjson.decode(top[1]).suffix] = true end " +
  'for _, s in ipairs(cjson.decode(ARGV[1])) do used[s] = true end ' +
  'local cand = {} for i = 1, #gens, 2 do if not used[gens[i]] then cand[#cand + 1] = i end end ' +
  'if #cand == 0 then return {} end ' +
  "local uses = redis.call('HGETALL', KEYS[4]) " +
  'for i = 1, #uses, 2 do ' +
  "if redis.call('ZSCORE', KEYS[3], uses[i]) then for _, s in ipairs(cjson.decode(uses[i + 1])) do used[s] = true end " +
  "else redis.call('HDEL', KEYS[4], uses[i]) end end " +
  'local out = {} for _, i in ipairs(cand) do if not used[gens[i]] then out[#out + 1] = gens[i] out[#out + 1] = gens[i + 1] end end ' +
  'return out';

/**
 * The end of a deletion: KEYS gens, leases, uses; ARGV the suffix. Unregisters the version unless a
 * running lease names it now (a server whose lease lapsed and that renewed it since the collection's
 * reads: it still uses the version, writes into it, and must find it registered).
 */
const UNREGISTER =
  NOW +
  "for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], now, '+inf')) do " +
  "local u = redis.call('HGET', KEYS[3], id) if u then for _, s in ipairs(cjson.decode(u)) do if s == ARGV[1] then return 0 end end end end " +
  "redis.call('HDEL', KEYS[1], ARGV[1]) return 1";

/** The Redis keys of a model's bookkeeping: one hash tag per model, so one cluster slot. */
const ctlKey = (model: string, what: string): string => `hps-ctl:{${model}}:${what}`;

/**
 * The Redis side of servers sharing an L2 (all keys `hps-ctl:{<model>}:*`, one cluster slot):
 * - `seq`: a counter; every load that writes a model into the L2 takes the next value;
 * - `live`: a sorted set of published versions, scored by seq (the highest is the live one);
 * - `gens`: a hash of the versions (table sets: `.v<seq>`, and '' for HugeCTR's stable names)
 *   created, with their tables;
 * - `leases`: a sorted set of the servers using the model, scored by when their lease expires
 *   (Redis's clock, ms), and `uses`: a hash of the versions each of them uses (served, draining,
 *   being loaded).
 * A version is deleted only when it is registered, not live, and named by no running lease.
 * A poll costs a fixed number of round trips and commands however many servers share the model
 * (one script renews, one reads what may be deleted).
 */
export class SharedL2Control {
  /** This server's id (its lease). */
  readonly id = randomUUID();
  /** Per model: table suffix -> how many of this server's versions use it. */
  readonly #uses = new Map<string, Map<string, number>>();
  /** Models whose lease this server has written (a later renewal that finds it gone reports a lapse). */
  readonly #leased = new Set<string>();
  /** Models whose lease a renewal found lapsed, until takeLapsed. */
  readonly #lapsed = new Set<string>();
  /** Per model: how many renewals found its lease gone (forgotten by a collection, or lost; never reset). */
  readonly #lapseCount = new Map<string, number>();

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
   * The next global load number of `model`, above `floor` (the highest seq the caller knows) and
   * above every registered `.v<n>`: the counter is raised past them when it went back (an evicted
   * key, a failover that lost writes).
   */
  async nextSeq(model: string, floor = 0): Promise<number> {
    const [v] = await this.#run(model, [['EVAL', NEXT_SEQ, 2, ctlKey(model, 'seq'), ctlKey(model, 'gens'), floor]], false);
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
   * A renewal that finds the lease it wrote before expired or gone (no renewal reached Redis for
   * leaseMs, or Redis lost the keys) notes the model for {@link takeLapsed}: other servers may have
   * deleted the versions the lease named.
   */
  async renew(model?: string): Promise<void> {
    const models = model === undefined ? [...this.#uses.keys()] : [model];
    await Promise.all(
      models.map(async (m) => {
        const [alive] = await this.#run(m, [['EVAL', RENEW, 2, ctlKey(m, 'leases'), ctlKey(m, 'uses'), this.id, this.leaseMs, JSON.stringify(this.uses(m))]], false);
        if (alive !== 1 && this.#leased.has(m)) {
          this.#lapsed.add(m);
          if (alive === -1) this.#lapseCount.set(m, this.lapses(m) + 1);
        }
        this.#leased.add(m);
      }),
    );
  }

  /**
   * How many renewals have found this server's lease of `model` gone (a collection forgot it once
   * it had expired, or Redis lost it): unchanged between two calls (the second one after a
   * renewal) = no collection ran without it, so none deleted a version it named meanwhile (one
   * that expired and was renewed before any collection did no harm).
   */
  lapses(model: string): number {
    return this.#lapseCount.get(model) ?? 0;
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

  /**
   * Registers version `suffix` unless it is registered already (HSETNX): true when this call
   * registered it (the caller may create its tables), false when another server had.
   */
  async claim(model: string, suffix: string, tables: readonly VersionTable[]): Promise<boolean> {
    const [r] = await this.#run(model, [['HSETNX', ctlKey(model, 'gens'), suffix, JSON.stringify(tables.map((t) => ({ name: t.name, dim: t.dim })))]], false);
    return r === 1;
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
   * Deletes (through `drop`) every registered version of `model` that is not live, not used by
   * this server, and named by no running lease (expired leases are forgotten). The registry, the
   * live version and the leases are read by one script, at one instant; a server registers and
   * leases a version before creating it, and leases one before checking that it is still live and
   * switching to it, so a version a live server uses or is about to use is never deleted. A deleted
   * version stays registered when a lease names it again by then (a lapsed server renewed meanwhile).
   * @param leaving this server's lease of `model` ends first (close): what only it used is deleted too
   * @returns the suffixes deleted
   */
  async collect(model: string, drop: (suffix: string, tables: VersionTable[]) => Promise<void>, leaving = false): Promise<string[]> {
    const keys = ['gens', 'live', 'leases', 'uses'].map((k) => ctlKey(model, k));
    const args: RedisArg[] = leaving ? ['[]', this.id] : [JSON.stringify(this.uses(model))];
    const [r] = await this.#run(model, [['EVAL', COLLECT, keys.length, ...keys, ...args]], false);
    const flat = r as Buffer[];
    const deleted: string[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const suffix = flat[i]!.toString('utf8');
      await drop(suffix, JSON.parse(flat[i + 1]!.toString('utf8')) as VersionTable[]);
      await this.#run(model, [['EVAL', UNREGISTER, 3, ctlKey(model, 'gens'), ctlKey(model, 'leases'), ctlKey(model, 'uses'), suffix]], false);
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
            ['ZREM', ctlKey(m, 'leases'), this.id],
            ['HDEL', ctlKey(m, 'uses'), this.id],
          ],
          false,
        ),
      ),
    );
  }
}
