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
   * and keeps it; one that finds none published (it serves the stable tables) takes the first
   * version published after.
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

/** The number at the end of a `uses` value (the lapses its server's renewals found), in `n`: the higher of the two. */
const LAPSES_IN = (value: string, n: string) =>
  `if ${value} then local e = cjson.decode(${value}) local last = e[#e] if type(last) == 'number' and last > ${n} then ${n} = last end end `;

/**
 * A renewal: KEYS leases, uses, gens, live; ARGV id, leaseMs, the suffixes used (JSON), their `gens`
 * values (JSON, in the same order), '1' when this server wrote this lease before, the lapses this server
 * counted. Writes the server's expiry (now + leaseMs) and, in `uses`, its suffixes followed by the lapses
 * of its lease (the count it sent, + 1 when this renewal finds a lapse, never less than the count
 * stored: a renewal in flight, or one whose reply was lost, may have found one the server has not
 * counted yet). Returns {1, lapses} when its previous lease was still running,
 * {0, lapses} when it had expired (but no collection has run since: one forgets expired leases first),
 * {-1, lapses, suffixes...} when it was gone (never written, forgotten by a collection, or lost by
 * Redis). A lease written before and found gone may have let a collection delete what it named: each
 * version used that is neither live nor registered is registered again (keys written into it since,
 * by lookups' write-backs or updates, are deleted once no server uses it) and listed after the count.
 */
const RENEW =
  NOW +
  "local prev = redis.call('ZSCORE', KEYS[1], ARGV[1]) local held = ARGV[5] == '1' local n = tonumber(ARGV[6]) " +
  "if prev then local u = redis.call('HGET', KEYS[2], ARGV[1]) " +
  LAPSES_IN('u', 'n') +
  'elseif held then n = n + 1 end ' +
  'local sfx = cjson.decode(ARGV[3]) local rec = {} for i, s in ipairs(sfx) do rec[i] = s end rec[#rec + 1] = n ' +
  "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(rec)) " +
  'if prev then if tonumber(prev) >= now then return {1, n} end return {0, n} end ' +
  'local out = {-1, n} if not held then return out end ' +
  "local top = redis.call('ZRANGE', KEYS[4], -1, -1) local live = nil if top[1] then live = cjson.decode(top[1]).suffix end " +
  'local tabs = cjson.decode(ARGV[4]) ' +
  "for i, s in ipairs(sfx) do if s ~= live and redis.call('HEXISTS', KEYS[3], s) == 0 then redis.call('HSET', KEYS[3], s, tabs[i]) out[#out + 1] = s end end " +
  'return out';

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

/**
 * A publication: KEYS live, leases, uses; ARGV seq, the version (JSON), the publisher's id, the lapses
 * it had counted when it registered the version. Publishes the version (ZADD, then all but the highest
 * seq removed) only while the publisher's lease exists and found no lapse since (the count its `uses`
 * entry holds): a lease a collection forgot, or forgot and a renewal of the same server wrote again
 * (whose reply the server has not read yet), refuses it, since the version, registered but not live,
 * may have been deleted meanwhile. Returns 1 when published, 0 when refused. A lease that expired but
 * that no collection forgot is accepted (a collection forgets expired leases before it picks versions,
 * so none deleted the version).
 */
const PUBLISH =
  "if not redis.call('ZSCORE', KEYS[2], ARGV[3]) then return 0 end " +
  "local n = tonumber(ARGV[4]) local u = redis.call('HGET', KEYS[3], ARGV[3]) " +
  LAPSES_IN('u', 'n') +
  "if n > tonumber(ARGV[4]) then return 0 end " +
  "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -2) return 1";

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
  /** Per model: table suffix -> how many of this server's versions use it, and its tables. */
  readonly #uses = new Map<string, Map<string, { n: number; tables: readonly VersionTable[] }>>();
  /** Models whose lease this server has written (a later renewal that finds it gone reports a lapse). */
  readonly #leased = new Set<string>();
  /** Models whose lease a renewal found lapsed, until takeLapsed. */
  readonly #lapsed = new Set<string>();
  /** Per model: how many renewals found its lease gone (forgotten by a collection, or lost; never reset). */
  readonly #lapseCount = new Map<string, number>();
  /** Per model: the versions its renewals registered again after a lapse, until takeRegisteredAgain. */
  readonly #again = new Map<string, Set<string>>();

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

  /**
   * Counts one use of version `suffix` (of `tables`) by this server; the returned function ends it
   * (idempotent).
   */
  use(model: string, suffix: string, tables: readonly VersionTable[]): () => void {
    let m = this.#uses.get(model);
    if (!m) this.#uses.set(model, (m = new Map()));
    const u = m.get(suffix);
    if (u) u.n++;
    else m.set(suffix, { n: 1, tables });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const e = m.get(suffix)!;
      if (--e.n === 0) m.delete(suffix);
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
   * deleted the versions the lease named. When it was gone, the same script registers again each
   * version it uses that is neither live nor registered ({@link takeRegisteredAgain}).
   */
  async renew(model?: string): Promise<void> {
    const models = model === undefined ? [...this.#uses.keys()] : [model];
    await Promise.all(
      models.map(async (m) => {
        const used = [...(this.#uses.get(m) ?? [])];
        const keys = ['leases', 'uses', 'gens', 'live'].map((k) => ctlKey(m, k));
        const gens = used.map(([, u]) => JSON.stringify(u.tables.map((t) => ({ name: t.name, dim: t.dim }))));
        const args = [this.id, this.leaseMs, JSON.stringify(used.map(([s]) => s)), JSON.stringify(gens), this.#leased.has(m) ? 1 : 0, this.lapses(m)];
        const [r] = await this.#run(m, [['EVAL', RENEW, keys.length, ...keys, ...args]], false);
        const [alive, stored, ...again] = r as [number, number, ...Buffer[]];
        if (this.#leased.has(m)) {
          // the count Redis keeps counts the lapses of replies this server never read (lost, or not yet read)
          const before = this.lapses(m);
          const count = Math.max(before + (alive === -1 ? 1 : 0), Number(stored));
          if (alive !== 1 || count !== before) this.#lapsed.add(m);
          this.#lapseCount.set(m, count);
        }
        if (again.length) {
          let set = this.#again.get(m);
          if (!set) this.#again.set(m, (set = new Set()));
          for (const s of again) set.add(s.toString('utf8'));
        }
        this.#leased.add(m);
      }),
    );
  }

  /** The versions of `model` that renewals registered again after a lapse (deleted meanwhile) since the last call (then forgotten). */
  takeRegisteredAgain(model: string): string[] {
    const again = [...(this.#again.get(model) ?? [])];
    this.#again.delete(model);
    return again;
  }

  /**
   * How many renewals have found this server's lease of `model` gone (a collection forgot it once
   * it had expired, or Redis lost it; also those whose reply was lost, from the count Redis keeps): unchanged between two calls (the second one after a
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

  /**
   * Publishes a version while this server's lease of `model` exists and has found no lapse since
   * the version was registered (one script: the checks and the write at one instant); a version
   * published later with a lower seq never becomes the live one.
   * @param lapseMark {@link lapses} when the version was registered (default: now)
   * @returns false when the lease was gone, or had lapsed since (a collection forgot it: the version
   *   may have been deleted): nothing was published, and the lapse is noted as a renewal's would be ({@link takeLapsed})
   */
  async publish(model: string, v: PublishedVersion, lapseMark = this.lapses(model)): Promise<boolean> {
    const keys = ['live', 'leases', 'uses'].map((k) => ctlKey(model, k));
    const [r] = await this.#run(model, [['EVAL', PUBLISH, keys.length, ...keys, v.seq, JSON.stringify(v), this.id, lapseMark]], false);
    if (r === 1) return true;
    this.#lapsed.add(model);
    this.#lapseCount.set(model, this.lapses(model) + 1);
    return false;
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
