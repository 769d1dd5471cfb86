import {
  createTable,
  type EmbeddingTable,
  formatShape,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  ShapeMismatchError,
  Tensor,
} from '@embedstack/core';
import { resolveBackend } from './backend.js';
import { type FeatureConfig, isFeatureConfig, type TableConfig } from './config.js';
import { normalizeFeature } from './inputs.js';
import type { FeatureInput, FeatureWeight, PerFeature } from './tpuEmbedding.js';
import { flattenStructure, flattenUpTo, type Nest, packSequenceAs } from './nest.js';

/**
 * Backend tables holding the parameters of serving tensors, built on a tensor's first
 * use and kept while the tensor lives (Tensors are treated as immutable, as TF's are).
 */
const served = new WeakMap<Tensor, EmbeddingTable>();

function servingTable(table: Tensor<Float32Array>, cfg: TableConfig, name: string): EmbeddingTable {
  let t = served.get(table);
  if (!t || t.disposed) {
    t = createTable(
      {
        kind: 'static',
        name: `serving/${name}`,
        dim: cfg.dim,
        vocabularySize: cfg.vocabularySize,
        keyDtype: cfg.vocabularySize <= 2147483647 ? 'int32' : 'int64',
        initializer: { kind: 'array', values: table.data },
      },
      { backend: resolveBackend() },
    );
    served.set(table, t);
  }
  return t;
}

/**
 * Serving-time lookup (TF's `tpu_embedding_for_serving` / `cpu_embedding_lookup`):
 * the same features as `TPUEmbedding.enqueue`, over the `Map<TableConfig, Tensor>` of
 * `embeddingTables`, pooled by core's ops in the backend's native code (the same
 * arithmetic as `dequeue`, so serving and training agree bit for bit).
 *
 * - dense ids -> gather: ids.shape + [dim]
 * - SparseTensor -> TF's safe_embedding_lookup_sparse with the table's combiner: ids < 0
 *   are dropped, and so are weights <= 0 unless the combiner is 'sum'; rows left empty
 *   give zeros; ids of rank n > 2 give [d0, ..., d(n-2), dim]
 * - RaggedTensor -> the same weighted reduce (mean / sqrtn with div-no-nan), no dropping
 * - sequence features (maxSequenceLength L > 0) -> [batch, L, dim]: position t of
 *   example b is the (combined) row at (b, t); positions >= L are dropped, missing
 *   ones are zero
 *
 * `weights` follows the structure (or is undefined/null); `outputShape` is ignored.
 * Results are fresh host tensors. Memory: each table Tensor is copied once into a
 * static table of the default backend (loadDefaultBackend), reused for as long as the
 * Tensor object lives; pass the same Map again to serve without copying.
 *
 * @throws InvalidTypeError / InvalidArgumentError / ShapeMismatchError for bad
 *   inputs, weights or tables; OutOfRangeError for ids >= vocabularySize (and for
 *   negative dense or ragged ids)
 */
export async function servingEmbeddingLookup<F extends Nest<FeatureConfig>>(
  inputs: PerFeature<F, FeatureInput>,
  weights: PerFeature<F, FeatureWeight> | null | undefined,
  tables: Map<TableConfig, Tensor>,
  featureConfig: F,
): Promise<PerFeature<F, Tensor<Float32Array>>> {
  const flat = flattenStructure(featureConfig, isFeatureConfig, 'featureConfig', 'FeatureConfig');
  if (!(tables instanceof Map)) throw invalidParameter('tables', 'a Map<TableConfig, Tensor> (TPUEmbedding.embeddingTables)', tables, InvalidTypeError);
  const ins = flattenUpTo(featureConfig, isFeatureConfig, inputs as unknown, 'inputs');
  const ws = flattenUpTo(featureConfig, isFeatureConfig, weights as unknown, 'weights', true);
  const order = new Map<TableConfig, number>();
  for (const { leaf } of flat) if (!order.has(leaf.table)) order.set(leaf.table, order.size);
  const outputs = flat.map(({ path, leaf }, i) => {
    const cfg = leaf.table;
    const name = cfg.name ?? `table_${order.get(cfg)}`;
    const sub = path.slice('featureConfig'.length);
    const table = tables.get(cfg);
    if (table === undefined) {
      throw new InvalidArgumentError(`Expected tables to hold the table "${name}" of ${path} (keyed by its TableConfig) but it is missing`, {
        argument: 'tables',
      });
    }
    if (!(table instanceof Tensor) || !(table.data instanceof Float32Array)) {
      throw invalidParameter(`tables.get(${name})`, 'a float32 Tensor', table, InvalidTypeError);
    }
    const dim = cfg.dim;
    if (table.shape.length !== 2 || table.shape[0] !== cfg.vocabularySize || table.shape[1] !== dim) {
      throw new ShapeMismatchError(
        `Expected tables.get(${name}) to have shape ${formatShape([cfg.vocabularySize, dim])} but received shape ${formatShape(table.shape)}`,
        { argument: 'tables' },
      );
    }
    const b = normalizeFeature(
      ins[i],
      ws[i],
      {
        path: `inputs${sub}`,
        weightPath: `weights${sub}`,
        tableName: name,
        vocabularySize: cfg.vocabularySize,
        dim,
        combiner: cfg.combiner,
        maxSequenceLength: leaf.maxSequenceLength,
        outputShape: undefined,
        numReplicas: 1,
        keyDtype: cfg.vocabularySize <= 2147483647 ? 'int32' : 'int64',
      },
      'serve',
    );
    return { b, core: servingTable(table as Tensor<Float32Array>, cfg, name), combiner: cfg.combiner };
  });
  const tensors = await Promise.all(
    outputs.map(async ({ b, core, combiner }) => {
      const out = new Float32Array(b.shape.reduce((a, d) => a * d, 1));
      if (b.gather) await core.find(b.bag.keys, { out: { values: out } });
      else await core.lookupCombined(b.bag, { combiner, out });
      return new Tensor(out, b.shape);
    }),
  );
  const packed: unknown = packSequenceAs(featureConfig, isFeatureConfig, tensors);
  return packed as PerFeature<F, Tensor<Float32Array>>;
}

/** Alias of {@link servingEmbeddingLookup} (TF's `cpu_embedding_lookup`). */
export const cpuEmbeddingLookup = servingEmbeddingLookup;
