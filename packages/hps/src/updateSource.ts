import { invalidParameter, InvalidTypeError, UnsupportedError } from '@embedstack/core';
import { RedisStore, type BatchCommand } from '@embedstack/store-redis';
import type { UpdateSourceConfig } from './config.js';
import { redisHosts } from './redisDb.js';

/** A running update source. */
export interface UpdateSource {
  stop(): Promise<void>;
}

/** Applies one message: table tag `hps_et.<model>.<table>`, keys `[n]`, rows `[n, dim]`. */
export type UpdateHandler = (tag: string, keys: BigInt64Array, values: Float32Array) => Promise<void>;

/**
 * One update message as written to the stream: HugeCTR's message (table tag, keys,
 * vectors) as the fields of a Redis stream entry on the key named by the tag:
 * `XADD hps_et.<model>.<table> * keys <int64 LE bytes> vectors <float32 LE bytes>`.
 */
export function updateMessageFields(keys: BigInt64Array, values: Float32Array): [string, Buffer, string, Buffer] {
  if (!(keys instanceof BigInt64Array)) throw invalidParameter('keys', 'a BigInt64Array', keys, InvalidTypeError);
  if (!(values instanceof Float32Array)) throw invalidParameter('values', 'a Float32Array', values, InvalidTypeError);
  if (keys.length === 0 ? values.length !== 0 : values.length % keys.length !== 0 || values.length === 0) {
    throw invalidParameter('values', `keys.length (${keys.length}) * dim floats`, values);
  }
  return ['keys', Buffer.from(keys.buffer, keys.byteOffset, keys.byteLength), 'vectors', Buffer.from(values.buffer, values.byteOffset, values.byteLength)];
}

function decodeEntry(fields: unknown): { keys: BigInt64Array; values: Float32Array } | null {
  if (!Array.isArray(fields)) return null;
  let kb: Buffer | null = null;
  let vb: Buffer | null = null;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = String(fields[i]);
    if (name === 'keys' && Buffer.isBuffer(fields[i + 1])) kb = fields[i + 1] as Buffer;
    if (name === 'vectors' && Buffer.isBuffer(fields[i + 1])) vb = fields[i + 1] as Buffer;
  }
  if (!kb || !vb || kb.length % 8 !== 0 || vb.length % 4 !== 0) return null;
  const keys = new BigInt64Array(kb.length / 8);
  new Uint8Array(keys.buffer).set(kb);
  const values = new Float32Array(vb.length / 4);
  new Uint8Array(values.buffer).set(vb);
  return { keys, values };
}

/**
 * Polls one Redis stream per table tag (`tags()`, re-read each round so models loaded
 * later are followed) from the entries after the server started, and hands each
 * message to `handler` in order. Malformed messages (keys not whole int64, vectors not
 * keys * dim floats) are skipped. Cluster mode polls each stream on its own node.
 */
class RedisStreamSource implements UpdateSource {
  #stopped = false;
  #loop: Promise<void>;
  #last = new Map<string, string>();

  constructor(
    private readonly store: RedisStore,
    private readonly config: UpdateSourceConfig,
    private readonly tags: () => string[],
    private readonly handler: UpdateHandler,
    start: Map<string, string>,
  ) {
    this.#last = start;
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    const idle = Math.max(5, Math.min(50, this.config.pollTimeoutMs));
    while (!this.#stopped) {
      let got = 0;
      try {
        const tags = this.tags();
        for (const t of tags) if (!this.#last.has(t)) this.#last.set(t, '0-0');
        const cmds: BatchCommand[] = tags.map((t) => ({ route: Buffer.from(t), name: 'XREAD', args: ['COUNT', this.config.maxBatchSize, 'STREAMS', t, this.#last.get(t)!] }));
        const replies = cmds.length > 0 ? await this.store.connection.exec(cmds, true) : [];
        for (let i = 0; i < replies.length; i++) {
          const r = replies[i]!;
          if (r.error || !Array.isArray(r.value)) continue;
          // XREAD answers [[stream, entries]]; some clients unwrap a single stream to [stream, entries]
          const streams = (Buffer.isBuffer(r.value[0]) ? [r.value] : r.value) as unknown[][];
          for (const stream of streams) {
            const entries = stream[1] as [Buffer, unknown][];
            for (const [id, fields] of entries) {
              const m = decodeEntry(fields);
              if (m) await this.handler(tags[i]!, m.keys, m.values).catch(() => undefined);
              this.#last.set(tags[i]!, id.toString());
              got++;
            }
          }
        }
      } catch {
        await new Promise((r) => setTimeout(r, this.config.failureBackoffMs));
      }
      if (got === 0 && !this.#stopped) await new Promise((r) => setTimeout(r, idle));
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    await this.store.close();
  }
}

/**
 * Starts consuming online updates of the tables named by `tags()` (`hps_et.<model>.<table>`).
 * @throws UnsupportedError for kafka_message_queue, StoreUnavailableError when Redis is unreachable
 */
export async function startUpdateSource(config: UpdateSourceConfig, tags: () => string[], handler: UpdateHandler): Promise<UpdateSource> {
  if (config.type !== 'redis_stream') throw new UnsupportedError(`update_source.type '${config.type}' is not supported: use 'redis_stream'`);
  const store = new RedisStore({ mode: config.brokers.length > 1 ? 'cluster' : 'standalone', hosts: redisHosts(config.brokers), connectTimeoutMs: 3000 });
  try {
    await store.ping();
    // start after the entries already in the streams
    const start = new Map<string, string>();
    const t = tags();
    const replies = await store.connection.exec(t.map((tag) => ({ route: Buffer.from(tag), name: 'XREVRANGE', args: [tag, '+', '-', 'COUNT', 1] })), true);
    replies.forEach((r, i) => {
      const last = Array.isArray(r.value) && Array.isArray(r.value[0]) ? String((r.value[0] as unknown[])[0]) : '0-0';
      start.set(t[i]!, last);
    });
    return new RedisStreamSource(store, config, tags, handler, start);
  } catch (e) {
    await store.close().catch(() => undefined);
    throw e;
  }
}
