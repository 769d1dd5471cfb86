import { StoreUnavailableError } from '@embedstack/core';
import { Cluster, Redis } from 'ioredis';
import { keySlot } from './naming.js';
import type { ResolvedRedisStoreOptions } from './options.js';
import { SCRIPTS, type ScriptName } from './scripts.js';

export type RedisArg = Buffer | string | number;

/** One command of a batch. `route` is the key whose cluster slot decides the node. */
export interface BatchCommand {
  route: Buffer;
  /** A Redis command name, or a script of `SCRIPTS` when `script` is true. */
  name: string;
  script?: boolean;
  /** Arguments after the command name (keys included). Replies come back as Buffers. */
  args: RedisArg[];
}

export interface Reply {
  error: Error | null;
  value: unknown;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** ioredis rejects the whole pipeline, before sending anything, when the slot map changed under it. */
const NOT_SENT = /All keys in the pipeline should belong to the same slots allocation group|All the keys in a pipeline command/;

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
  readonly options: ResolvedRedisStoreOptions;
  readonly client: Redis | Cluster;
  /** The last error the client reported (connection refused, ...), for messages. */
  lastError: Error | undefined;
  #closed = false;

  constructor(options: ResolvedRedisStoreOptions) {
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
    for (const [name, def] of Object.entries(SCRIPTS)) this.client.defineCommand(name, def);
  }

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
    if (c.status === 'ready') return;
    if (c.status === 'wait') c.connect().catch(() => {});
    const timeout = this.options.connectTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        c.off('ready', onReady);
        c.off('end', onEnd);
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const onEnd = () => done(new StoreUnavailableError(`The connection to Redis at ${this.address} ended${this.#cause()}`));
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
    return group === '' ? 'standalone' : group.split(';')[0]!;
  }

  /**
   * Sends `cmds` as one pipeline per node and returns one reply per command, in
   * order (errors are returned, not thrown). `readOnly` batches are retried per
   * the retry policy. @throws StoreUnavailableError only when not connected.
   */
  async exec(cmds: readonly BatchCommand[], readOnly: boolean): Promise<Reply[]> {
    await this.ready();
    const replies: Reply[] = new Array(cmds.length);
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
      await Promise.all(
        [...groups.values()].map(async (idx) => {
          const res = await this.#pipeline(idx.map((i) => cmds[i]!));
          const failed = res.some((r) => r.error !== null);
          const resend = failed && res.every((r) => r.error && NOT_SENT.test(r.error.message));
          idx.forEach((i, j) => {
            replies[i] = res[j]!;
            if (res[j]!.error && (readOnly || resend)) retry.push(i);
          });
        }),
      );
      if (retry.length === 0 || attempt >= this.options.retry.attempts) break;
      pending = retry.sort((a, b) => a - b);
      await sleep(this.options.retry.delayMs);
      if (this.#closed) break;
      await this.ready().catch(() => {});
    }
    return replies;
  }

  async #pipeline(cmds: readonly BatchCommand[]): Promise<Reply[]> {
    const p = this.client.pipeline() as unknown as Record<string, (...a: RedisArg[]) => unknown> & {
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
    if (!e || !/max retries per request/i.test(e.message)) return e;
    return new Error(`the connection to Redis was lost before the reply (${e.message})${this.#cause()}`, { cause: e });
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
    await Promise.race([c.quit().catch(() => {}), sleep(1000)]);
    c.disconnect();
  }
}
