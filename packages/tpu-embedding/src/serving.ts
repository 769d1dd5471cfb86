import { formatShape, InvalidArgumentError, InvalidTypeError, invalidParameter, ShapeMismatchError, Tensor } from '@embedstack/core';
import { type FeatureConfig, isFeatureConfig, type TableConfig } from './config.js';
import { normalizeFeature, reduceBags } from './inputs.js';
import { flattenStructure, flattenUpTo, type Nest, packSequenceAs } from './nest.js';

/**
 * Serving-time lookup on the host (TF's `tpu_embedding_for_serving` /
 * `cpu_embedding_lookup`): the same features as `TPUEmbedding.enqueue`, computed in
 * plain TypeScript over the `Map<TableConfig, Tensor>` of `embeddingTables`.
 *
 * - dense ids -> gather: ids.shape + [dim]
 * - SparseTensor -> safe lookup with the table's combiner: ids < 0 and entries with
 *   weight <= 0 are dropped, rows left empty give zeros
 * - RaggedTensor -> the same weighted reduce (mean / sqrtn with div-no-nan), no dropping
 * - sequence features (maxSequenceLength L > 0) -> [batch, L, dim]: position t of
 *   example b is the (combined) row at (b, t); positions >= L are dropped, missing
 *   ones are zero
 *
 * `weights` follows the structure (or is undefined/null); `outputShape` is ignored.
 * Results are fresh host tensors. Pure computation, no backend.
 *
 * @throws InvalidTypeError / InvalidArgumentError / ShapeMismatchError for bad
 *   inputs, weights or tables; OutOfRangeError for ids >= vocabularySize (and for
 *   negative dense or ragged ids)
 */
export async function servingEmbeddingLookup(
  inputs: Nest<unknown>,
  weights: Nest<unknown> | null | undefined,
  tables: Map<TableConfig, Tensor>,
  featureConfig: Nest<FeatureConfig>,
): Promise<Nest<Tensor>> {
  const flat = flattenStructure(featureConfig, isFeatureConfig, 'featureConfig', 'FeatureConfig');
  if (!(tables instanceof Map)) throw invalidParameter('tables', 'a Map<TableConfig, Tensor> (TPUEmbedding.embeddingTables)', tables, InvalidTypeError);
  const ins = flattenUpTo(featureConfig, isFeatureConfig, inputs, 'inputs');
  const ws = flattenUpTo(featureConfig, isFeatureConfig, weights, 'weights', true);
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
      },
      'serve',
    );
    const out = reduceBags(b.splits, b.scale, 0, b.splits.length - 1, dim, table.data, (j) => b.ids[j]! * dim);
    return new Tensor(out, b.shape);
  });
  return packSequenceAs(featureConfig, isFeatureConfig, outputs);
}

/** Alias of {@link servingEmbeddingLookup} (TF's `cpu_embedding_lookup`). */
export const cpuEmbeddingLookup = servingEmbeddingLookup;
