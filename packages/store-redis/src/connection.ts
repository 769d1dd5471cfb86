import { InvalidTypeError, invalidParameter, StoreUnavailableError } from '@embedstack/core';
import { Cluster, Redis, ReplyError } from 'ioredis';
import { keySlot } from './naming.js';
import type { ResolvedRedisStoreOptions } from './options.js';
import { SCRIPTS, type ScriptName } from './scripts.js';

/** One argument of a Redis command: binary (Buffer), a string, or a number. */
export type RedisArg = Buffer | string | number;

/** One command of a batch. `route` is the key whose cluster slot decides the node. */
export interface BatchCommand {
  /** The key whose cluster slot decides the node. */
  route: Buffer;
  /** A Redis command name, or a script of `SCRIPTS` when `script` is true. */
  name: string;
  /** True when `name` is a script of SCRIPTS (a command ioredis defines from it). Default false. */
  script?: boolean;
  /** Arguments after the command name (keys included). Replies come back as Buffers. */
  args: RedisArg[];
}

/** The outcome of one command of a batch ({@link RedisConnection.exec}): its error, or its value. */
export interface Reply {
  /** The command's error (a Redis error reply or a connection failure), or null. */
  error: Error | null;
  /** The reply (bulk strings as Buffers); not meaningful when `error` is set. */
  value: unknown;
}

/**
 * True when a failure says the cluster slot map this client routes by may be stale: a
 * redirection or cluster-state reply, or no reply at all (a lost or missing connection,
 * e.g. a master that died and whose replica is being promoted).
 */
function staleRoute(e: Error): boolean {
  return /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(e.message) || !(e instanceof (ReplyError as new () => Error));
}

/** True when a command failed before it ran (re-sending it is safe, nothing was applied). */
export function neverRan(e: Error): boolean {
  return NOT_RUN.test(e.message);
}

/**
 * True when the command certainly changed nothing: it never ran ({@link neverRan}), or the
 * server refused it as a whole before running it (no memory under `noeviction`, no ACL
 * permission, a read-only replica, a failing RDB save, a key of another type). Errors raised
 * inside a script (their message names the script) are not: the script may have written
 * before failing. Re-sending these would fail again.
 */
export function notApplied(e: Error): boolean {
  return neverRan(e) || (e instanceof (ReplyError as new () => Error) && REFUSED.test(e.message) && !/ script: /.test(e.message));
}

const REFUSED = /^(OOM|NOPERM|NOAUTH|READONLY|MISCONF|WRONGTYPE|BUSY|NOSCRIPT) /;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const NODE_GONE = 'no connection to the master';
/**
 * Failures after which the command certainly did not run, so that re-sending is safe
 * even for writes: redirections and cluster-state replies, a master we have no
 * connection to, and ioredis refusing a pipeline whose slot map changed under it.
 */
const NOT_RUN = new RegExp(
  `^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN|LOADING) |^${NODE_GONE}|All keys in the pipeline should belong to the same slots allocation group|All the keys in a pipeline command`,
);

/**
 * One ioredis client (standalone `Redis` or `Cluster`) plus the batch executor.
 *
 * Batches: commands are grouped by node (cluster: by the node set that serves the
 * route key's slot, which is what an ioredis cluster pipeline requires); each group
 * goes out as one pipeline, all groups in parallel. Commands of one bucket keep
 * their order (same pipeline, same connection). Thread safety: JS is
 * single-threaded; concurrent batches are independent pipelines.
 *
 * Failure handling: ioredis never re-sends unfulfilled commands after a reconnect
 * (`autoResendUnfulfilledCommands: false`) and has no offline queue, so a command
 * is sent at most once by this layer; read-only batches are retried per the
 * store's retry policy, write batches never.
 */
export class RedisConnection {
  /** The store options it was opened with. */
  readonly options: ResolvedRedisStoreOptions;
  /** The ioredis client: a standalone `Redis` or a `Cluster`. */
  readonly client: Redis | Cluster;
  /** The last error the client reported (connection refused, ...), for messages. */
  lastError: Error | undefined;
  #closed = false;
  #dbChecked = false;
  #dbCheck: Promise<void> | null = null;
  readonly #scripted = new WeakSet<Redis>();

  /** @throws InvalidTypeError unless `options` are resolved store options (resolveStoreOptions) */
  constructor(options: ResolvedRedisStoreOptions) {
    const ok = typeof options === 'object' && options !== null && Array.isArray(options.hosts) && options.hosts.length > 0 && typeof options.retry === 'object' && options.retry !== null && (options.mode === 'standalone' || options.mode === 'cluster');
    if (!ok) throw invalidParameter('options', 'resolved store options (resolveStoreOptions)', options, InvalidTypeError);
    this.options = options;
    const o = options;
    const common = {
      username: o.username,
      password: o.password,
      connectTimeout: o.connectTimeoutMs,
      commandTimeout: o.commandTimeoutMs,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
    };
    if (o.mode === 'cluster') {
      this.client = new Cluster(
        o.hosts.map((h) => ({ host: h.host, port: h.port })),
        {
          lazyConnect: true,
          enableOfflineQueue: true,
          redisOptions: common,
          clusterRetryStrategy: (times: number) => Math.min(100 * times, 2000),
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          maxRedirections: o.retry.clusterRedirections,
          slotsRefreshTimeout: Math.max(1000, Math.min(o.connectTimeoutMs, 5000)),
        },
      );
    } else {
      const h = o.hosts[0]!;
      this.client = new Redis({
        ...common,
        host: h.host,
        port: h.port,
        db: o.db,
        lazyConnect: true,
        enableOfflineQueue: false,
        retryStrategy: (times: number) => Math.min(100 * times, 2000),
      });
    }
    this.client.on('error', (e: Error) => {
      this.lastError = e;
    });
    // Each new connection selects `db` again: check it again (see #checkDb).
    this.client.on('ready', () => {
      this.#dbChecked = false;
    });
    for (const [name, def] of Object.entries(SCRIPTS)) this.client.defineCommand(name, def);
  }

  /** True in cluster mode. */
  get isCluster(): boolean {
    return this.options.mode === 'cluster';
  }

  /** Where the store points, for messages. */
  get address(): string {
    return this.options.hosts.map((h) => `${h.host}:${h.port}`).join(',');
  }

  /**
   * Resolves when the client is connected (cluster: slots known).
   * @throws StoreUnavailableError when closed or not ready within connectTimeoutMs
   */
  async ready(): Promise<void> {
    if (this.#closed) throw new StoreUnavailableError(`The Redis store at ${this.address} was closed`);
    const c = this.client;
    if (c.status !== 'ready') await this.#connected();
    if (this.options.db !== 0 && !this.#dbChecked) await this.#checkDb();
  }

  /**
   * ioredis selects `db` when it connects but only emits an 'error' when the server refuses
   * (e.g. an index >= the server's `databases`) and then serves database 0: select it here and
   * refuse to run anything until that worked, so that no command reads or writes database 0.
   */
  async #checkDb(): Promise<void> {
    this.#dbCheck ??= this.client.call('SELECT', String(this.options.db)).then(
      () => {
        this.#dbChecked = true;
        this.#dbCheck = null;
      },
      (e: unknown) => {
        this.#dbCheck = null;
        throw new StoreUnavailableError(
          `Redis at ${this.address} refused database ${this.options.db} (options.db): ${(e as Error)?.message ?? String(e)}`,
          { cause: e },
        );
      },
    );
    return this.#dbCheck;
  }

  async #connected(): Promise<void> {
    const c = this.client;
    if (c.status === 'wait') c.connect().catch(() => {});
    const timeout = this.options.connectTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        c.off('ready', onReady);
        c.off('end', onEnd);
        c.off('error', onError);
        c.off('node error', onError);
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const onEnd = () => done(new StoreUnavailableError(`The connection to Redis at ${this.address} ended${this.#cause()}`));
      // Refused credentials will not get better by waiting: fail now, not after connectTimeoutMs.
      const onError = (e: Error) => {
        if (!/^(WRONGPASS|NOAUTH) /.test(e?.message ?? '')) return;
        const who = this.options.username ? `user "${this.options.username}"` : 'the default user';
        done(new StoreUnavailableError(`Redis at ${this.address} refused the credentials of ${who} (options.username / options.password): ${e.message}`, { cause: e }));
      };
      c.on('error', onError);
      c.on('node error', onError);
      const timer = setTimeout(
        () =>
          done(
            new StoreUnavailableError(
              `Redis at ${this.address} (${this.options.mode}) was not ready within ${timeout} ms (connectTimeoutMs)${this.#cause()}`,
            ),
          ),
        timeout,
      );
      c.on('ready', onReady);
      c.on('end', onEnd);
      if (c.status === 'ready') done();
    });
  }

  #cause(): string {
    return this.lastError ? `: ${this.lastError.message}` : '';
  }

  /** Cluster node group serving `route` ('' in standalone mode). */
  groupOf(route: Buffer): string {
    if (!this.isCluster) return '';
    const slot = keySlot(route);
    const nodes = (this.client as Cluster).slots[slot];
    return nodes && nodes.length > 0 ? nodes.join(';') : `unassigned slot ${slot}`;
  }

  /** The master address of a group, for messages. */
  static nodeLabel(group: string): string {
    if (typeof group !== 'string') throw invalidParameter('group', 'a node group name (string)', group, InvalidTypeError);
    return group === '' ? 'standalone' : group.split(';')[0]!;
  }

  /**
   * Sends `cmds` as one pipeline per node and returns one reply per command, in
   * order (errors are returned, not thrown).
   *
   * Re-sending: a command that failed before it could run (MOVED, ASK, TRYAGAIN,
   * CLUSTERDOWN, LOADING, a node not connected, a stale slot map) is sent again,
   * after a slot-map refresh, up to `retry.clusterRedirections` times; other
   * failures are re-sent only for `readOnly` batches, up to `retry.attempts` times.
   * In cluster mode write batches go to the node's own connection, not through
   * ioredis's cluster pipeline, which would re-send a whole pipeline after a lost
   * connection (running an accum twice if the server had executed it).
   * @throws StoreUnavailableError only when not connected.
   */
  async exec(cmds: readonly BatchCommand[], readOnly: boolean): Promise<Reply[]> {
    await this.ready();
    const replies: Reply[] = new Array(cmds.length);
    const { attempts, delayMs, clusterRedirections } = this.options.retry;
    // Re-sends of commands that never ran stop after this time too: waiting for a master's
    // connection and refreshing the slot map can each take up to connectTimeoutMs (a host that
    // does not answer), which clusterRedirections tries would otherwise multiply.
    const until = Date.now() + this.options.connectTimeoutMs + clusterRedirections * delayMs;
    let pending = cmds.map((_, i) => i);
    for (let attempt = 0; pending.length > 0; attempt++) {
      const groups = new Map<string, number[]>();
      for (const i of pending) {
        const g = this.groupOf(cmds[i]!.route);
        let list = groups.get(g);
        if (!list) groups.set(g, (list = []));
        list.push(i);
      }
      const retry: number[] = [];
      let refresh = false;
      await Promise.all(
        [...groups].map(async ([group, idx]) => {
          const res = await this.#pipeline(group, idx.map((i) => cmds[i]!), readOnly, until);
          idx.forEach((i, j) => {
            const r = res[j]!;
            replies[i] = r;
            if (!r.error) return;
            const safe = neverRan(r.error);
            if (this.isCluster && staleRoute(r.error)) refresh = true;
            if ((safe && attempt < clusterRedirections && Date.now() < until) || (readOnly && attempt < attempts)) retry.push(i);
          });
        }),
      );
      if (retry.length === 0 || this.#closed) {
        // The call ends here, but the next one should route by a fresh slot map (writes go to the
        // master's own connection, which ioredis never re-routes by itself: a failover would
        // otherwise stay invisible to writes).
        if (refresh && !this.#closed) (this.client as Cluster).refreshSlotsCache();
        break;
      }
      pending = retry.sort((a, b) => a - b);
      if (refresh) await this.#refreshSlots(until);
      await sleep(delayMs);
      await this.ready().catch(() => {});
    }
    return replies;
  }

  /** Refreshes ioredis's slot map; waits for it up to connectTimeoutMs, and not past `until`. */
  #refreshSlots(until: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, Math.min(this.options.connectTimeoutMs, until - Date.now())));
      (this.client as Cluster).refreshSlotsCache(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** The connection to a group's master (cluster), with the scripts defined on it. */
  #node(group: string): Redis | undefined {
    const key = RedisConnection.nodeLabel(group);
    const node = (this.client as Cluster).nodes('master').find((n) => `${n.options.host}:${n.options.port}` === key);
    if (node && !this.#scripted.has(node)) {
      for (const [name, def] of Object.entries(SCRIPTS)) node.defineCommand(name, def);
      this.#scripted.add(node);
    }
    return node;
  }

  /** Waits (up to connectTimeoutMs, and not past `until`) for a cluster node's connection; false when it fails or has ended. */
  #nodeReady(node: Redis, until: number): Promise<boolean> {
    if (node.status === 'ready') return Promise.resolve(true);
    const wait = Math.min(this.options.connectTimeoutMs, until - Date.now());
    if (node.status === 'end' || node.status === 'close' || wait <= 0) {
      if (node.status === 'wait') node.connect().catch(() => {}); // for the next call
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        node.off('ready', onReady);
        node.off('close', onGone);
        node.off('end', onGone);
        resolve(ok);
      };
      const onReady = () => done(true);
      const onGone = () => done(false);
      const timer = setTimeout(onGone, wait);
      node.on('ready', onReady);
      node.on('close', onGone);
      node.on('end', onGone);
      if (node.status === 'wait') node.connect().catch(() => {});
    });
  }

  async #pipeline(group: string, cmds: readonly BatchCommand[], readOnly: boolean, until: number): Promise<Reply[]> {
    let target: Redis | Cluster = this.client;
    if (this.isCluster && !readOnly) {
      const node = this.#node(group);
      // Only a connected node takes a write: a connection that is still connecting (e.g. one
      // ioredis re-created for a master that just died) would queue the commands and fail them
      // all alike whether they were sent or not. Not connected = certainly not sent.
      if (!node || !(await this.#nodeReady(node, until))) {
        const error = new Error(`${NODE_GONE} ${RedisConnection.nodeLabel(group)}${this.#cause()}`);
        return cmds.map(() => ({ error, value: null }));
      }
      target = node;
    }
    // ioredis types its pipeline's commands one by one; the dynamic names used here (script
    // commands `<name>Buffer` defined on the client, `callBuffer`) are not in those types.
    const p = target.pipeline() as unknown as Record<string, (...a: RedisArg[]) => unknown> & {
      exec(): Promise<[Error | null, unknown][] | null>;
    };
    for (const c of cmds) {
      if (c.script) p[`${c.name as ScriptName}Buffer`]!(...c.args);
      else p.callBuffer!(c.name, ...c.args);
    }
    try {
      const res = (await p.exec()) ?? [];
      return cmds.map((_, i) => {
        const r = res[i];
        return r ? { error: this.#explain(r[0]), value: r[1] } : { error: new Error('no reply'), value: null };
      });
    } catch (e) {
      const error = this.#explain(e instanceof Error ? e : new Error(String(e)));
      return cmds.map(() => ({ error, value: null }));
    }
  }

  /** ioredis reports a connection lost mid-command as a retry-limit error: say what happened. */
  #explain(e: Error | null): Error | null {
    if (!e) return e;
    if (/max retries per request/i.test(e.message)) {
      return new Error(`the connection to Redis was lost before the reply (${e.message})${this.#cause()}`, { cause: e });
    }
    if (/^Stream isn't writeable/.test(e.message)) {
      return new Error(`not connected to Redis (the connection was lost; the command was not sent)${this.#cause()}`, { cause: e });
    }
    return e;
  }

  /** Closes the connection (QUIT, then a hard disconnect after 1 s). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const c = this.client;
    if (c.status === 'end' || c.status === 'wait') {
      c.disconnect();
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([c.quit().catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, 1000)))]);
    clearTimeout(timer);
    c.disconnect();
  }
}
