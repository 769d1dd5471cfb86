/**
 * The demo's serving half: the trained tables, restored from the checkpoint,
 * exported in HugeCTR's `key` / `emb_vector` layout, loaded into HPS (L1 cache per
 * table, in-process L2, RocksDB L3) and served through `hps.LookupLayer`.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as hps from '@embedstack/hps';
import type { TableConfig, TPUEmbedding } from '@embedstack/tpu-embedding';
import { type ClickBatch, sliceBatch } from './data.js';

export interface ServeOptions {
  /** Working folder: model files, ps.json and the RocksDB database go under it. */
  dir: string;
  /** L1 cache per table as a fraction of its rows (HugeCTR's gpucacheper). */
  cacheFraction: number;
  /** Examples per request. */
  requestSize: number;
}

export interface Served {
  /** Activations [n, features * dim], features in the layer's order. */
  activations: Float32Array;
  /** Milliseconds per request (all of its features). */
  latencies: number[];
  /** Keys looked up per second over the whole run. */
  keysPerSecond: number;
  /** L1 hit rate over every table, and where the misses were found. */
  l1HitRate: number;
  levels: { l1Hits: number; l1Misses: number; l2Hits: number; l3Hits: number };
}

const MODEL = 'ctr';

/** Exports the tables of `embedding` (configs in feature order) as an HPS model. @returns the ps.json path */
export async function exportForServing(embedding: TPUEmbedding, configs: readonly TableConfig[], o: ServeOptions, maxBatch: number): Promise<string> {
  const psConfigFile = join(o.dir, 'ps.json');
  const dense = embedding.embeddingTables;
  await hps.exportModel({
    model: MODEL,
    dir: join(o.dir, 'model'),
    psConfigFile,
    tables: configs.map((c) => ({ table: dense.get(c)!, name: c.name })),
    modelOptions: {
      max_batch_size: maxBatch,
      maxnum_catfeature_query_per_table_per_sample: configs.map(() => 1),
      gpucache: true,
      gpucacheper: o.cacheFraction,
      hit_rate_threshold: 1, // misses are fetched before answering (below 1, a hot batch answers misses with the default and fills L1 later)
    },
    globalOptions: { persistent_db: { type: 'rocks_db', path: join(o.dir, 'rocksdb') } },
  });
  return psConfigFile;
}

/** Serves `b` through one LookupLayer per table, `requestSize` examples per request. */
export async function serve(psConfigFile: string, b: ClickBatch, dim: number, o: ServeOptions): Promise<Served> {
  const features = b.ids.length;
  const n = b.labels.length;
  const server = await hps.init({ globalBatchSize: o.requestSize, psConfigFile });
  try {
    const layers = b.ids.map((_, f) => new hps.LookupLayer({ modelName: MODEL, tableId: f, embVecSize: dim }));
    const activations = new Float32Array(n * features * dim);
    const latencies: number[] = [];
    const started = performance.now();
    for (let at = 0; at < n; at += o.requestSize) {
      const part = sliceBatch(b, at, Math.min(n, at + o.requestSize));
      const m = part.labels.length;
      const t0 = performance.now();
      const rows = await Promise.all(layers.map((layer, f) => layer.call(BigInt64Array.from(part.ids[f]!, BigInt))));
      latencies.push(performance.now() - t0);
      // Row i of the request: [feature 0's dim values, feature 1's, ...], as the layer concatenates them.
      for (let i = 0; i < m; i++) {
        for (let f = 0; f < features; f++) {
          activations.set((rows[f]!.data as Float32Array).subarray(i * dim, (i + 1) * dim), ((at + i) * features + f) * dim);
        }
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const levels = { l1Hits: 0, l1Misses: 0, l2Hits: 0, l3Hits: 0 };
    for (let f = 0; f < features; f++) {
      const s = server.stats(MODEL, f);
      levels.l1Hits += s.l1.hits;
      levels.l1Misses += s.l1.misses;
      levels.l2Hits += s.l2.hits;
      levels.l3Hits += s.l3.hits;
    }
    return {
      activations,
      latencies,
      keysPerSecond: (n * features) / seconds,
      l1HitRate: levels.l1Hits / Math.max(1, levels.l1Hits + levels.l1Misses),
      levels,
    };
  } finally {
    await hps.shutdown();
  }
}
