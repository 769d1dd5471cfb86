import {
  checkOptions,
  createTable,
  InvalidArgumentError,
  invalidParameter,
  InvalidTypeError,
  normalizeKeys,
  SparseTensor,
  Tensor,
  validateCombiner,
  validateMaxNorm,
  type Combiner,
  type KeyInput,
  layoutDifference,
  ShapeMismatchError,
} from '@embedstack/core';
import { dedupe } from './keyOps.js';
import { type InitOptions, withServer } from './init.js';
import type { HPS } from './server.js';

/** Constructor options of {@link LookupLayer} and {@link SparseLookupLayer} (HugeCTR's hps layers). */
export interface LookupLayerOptions {
  /** Model name in the ps config. Required. */
  modelName: string;
  /** Table index in the model. Required. */
  tableId: number;
  /** Vector size; must equal the config's `embedding_vecsize_per_table[tableId]`. Required. */
  embVecSize: number;
  /** Only 'float32'. Default 'float32'. */
  embVecDtype?: 'float32';
  /**
   * ps.json used to start the server when `hps.init` was not called (by the first call). The server
   * stays once a call on it succeeds; when every call on it was rejected it is closed again.
   */
  psConfigFile?: string;
  /** The same as an object. */
  psConfig?: Record<string, unknown>;
  /** Passed to the implicit `hps.init`. Default 1024. */
  globalBatchSize?: number;
  /** Layer name (Keras). Default the class name. */
  name?: string;
}

const LAYER_KEYS = ['modelName', 'tableId', 'embVecSize', 'embVecDtype', 'psConfigFile', 'psConfig', 'globalBatchSize', 'name'] as const;

function resolveLayerOptions(options: unknown, cls: string): Required<Pick<LookupLayerOptions, 'modelName' | 'tableId' | 'embVecSize'>> & LookupLayerOptions {
  const o = checkOptions<LookupLayerOptions>(options, LAYER_KEYS, 'options', { required: true });
  if (typeof o.modelName !== 'string' || o.modelName.length === 0) throw invalidParameter('options.modelName', 'a model name', o.modelName, InvalidTypeError);
  if (typeof o.tableId !== 'number' || !Number.isSafeInteger(o.tableId) || o.tableId < 0) throw invalidParameter('options.tableId', 'an integer >= 0', o.tableId, typeof o.tableId === 'number' ? InvalidArgumentError : InvalidTypeError);
  if (typeof o.embVecSize !== 'number' || !Number.isSafeInteger(o.embVecSize) || o.embVecSize < 1) {
    throw invalidParameter('options.embVecSize', 'an integer >= 1', o.embVecSize, typeof o.embVecSize === 'number' ? InvalidArgumentError : InvalidTypeError);
  }
  if (o.embVecDtype !== undefined && o.embVecDtype !== null && o.embVecDtype !== 'float32') throw invalidParameter('options.embVecDtype', "'float32'", o.embVecDtype, InvalidTypeError);
  if (o.name !== undefined && o.name !== null && typeof o.name !== 'string') throw invalidParameter('options.name', 'a string', o.name, InvalidTypeError);
  // the implicit hps.init's options, checked here rather than at the first call
  if (o.psConfigFile != null && (typeof o.psConfigFile !== 'string' || o.psConfigFile.length === 0)) throw invalidParameter('options.psConfigFile', 'a ps.json path', o.psConfigFile, InvalidTypeError);
  if (o.psConfig != null && (typeof o.psConfig !== 'object' || Array.isArray(o.psConfig))) throw invalidParameter('options.psConfig', 'a ps config object', o.psConfig, InvalidTypeError);
  if (o.psConfigFile != null && o.psConfig != null) throw invalidParameter('options.psConfig', 'absent when options.psConfigFile is given (one of the two)', o.psConfig);
  if (o.globalBatchSize != null && (typeof o.globalBatchSize !== 'number' || !Number.isSafeInteger(o.globalBatchSize) || o.globalBatchSize < 1)) {
    throw invalidParameter('options.globalBatchSize', 'an integer >= 1', o.globalBatchSize, typeof o.globalBatchSize === 'number' ? InvalidArgumentError : InvalidTypeError);
  }
  return { ...o, modelName: o.modelName, tableId: o.tableId, embVecSize: o.embVecSize, name: o.name ?? cls };
}

/** Shared by both layers: the server and the table's checked vector size. */
abstract class HpsLayer {
  /** Model name in the ps config. */
  readonly modelName: string;
  /** Table index in the model. */
  readonly tableId: number;
  /** Floats per row. */
  readonly embVecSize: number;
  /** Always 'float32'. */
  readonly embVecDtype = 'float32' as const;
  /** Layer name. Default the class name. */
  readonly name: string;

  constructor(options: LookupLayerOptions, cls: string) {
    const o = resolveLayerOptions(options, cls);
    this.modelName = o.modelName;
    this.tableId = o.tableId;
    this.embVecSize = o.embVecSize;
    this.name = o.name ?? cls;
    INIT.set(
      this,
      o.psConfigFile != null || o.psConfig != null
        ? { globalBatchSize: o.globalBatchSize ?? 1024, ...(o.psConfigFile != null ? { psConfigFile: o.psConfigFile } : { psConfig: o.psConfig! }) }
        : null,
    );
  }
}

/** Each layer's implicit `hps.init` options (kept off the instance: not a callable surface). */
const INIT = new WeakMap<HpsLayer, InitOptions | null>();

/**
 * Runs `use` with the server of `hps.init` (started from the layer's config when none runs, and
 * closed again when the calls that started it are all rejected: withServer), embVecSize checked.
 */
function withLayerServer<T>(layer: HpsLayer, use: (server: HPS) => Promise<T>): Promise<T> {
  return withServer(INIT.get(layer) ?? null, (server) => {
    const dim = server.modelInfo(layer.modelName).tables[layer.tableId]?.dim;
    if (dim !== undefined && dim !== layer.embVecSize) {
      throw new InvalidArgumentError(`Expected embVecSize to equal embedding_vecsize_per_table[${layer.tableId}] = ${dim} of model ${JSON.stringify(layer.modelName)} but received ${layer.embVecSize}`, { argument: 'embVecSize' });
    }
    return use(server);
  });
}

/** Rows of unique ids gathered from HPS, then combined by a core table op (native code). */
async function pool(layer: HpsLayer, server: HPS, ids: SparseTensor, weights: SparseTensor | null, combiner: Combiner, maxNorm: number | null): Promise<Float32Array> {
  const keys = normalizeKeys(ids.values, 'int64', 'spIds.values') as BigInt64Array;
  const { unique, inverse } = dedupe(keys);
  const nrows = ids.denseShape[0] ?? 0;
  if (unique.length === 0) return new Float32Array(nrows * layer.embVecSize);
  const rows = await server.lookup(unique, layer.modelName, layer.tableId);
  const table = createTable({ kind: 'static', keyDtype: 'int32', vocabularySize: unique.length, dim: layer.embVecSize, initializer: { kind: 'array', values: rows.data as Float32Array } });
  try {
    const local = new SparseTensor(ids.indices, inverse, ids.denseShape);
    return await table.lookupCombined(local, { weights, combiner, maxNorm });
  } finally {
    table.dispose();
  }
}

/** Each of the `n` rows [n * dim] clipped to L2 norm `maxNorm` (core's lookupCombined over one-row bags, native code). */
async function clipRows(rows: Float32Array, n: number, dim: number, maxNorm: number): Promise<Float32Array> {
  if (n === 0) return rows;
  const table = createTable({ kind: 'static', keyDtype: 'int32', vocabularySize: n, dim, initializer: { kind: 'array', values: rows } });
  try {
    const own = new SparseTensor(Int32Array.from({ length: n * 2 }, (_, j) => (j % 2 === 0 ? j >> 1 : 0)), Int32Array.from({ length: n }, (_, i) => i), [n, 1]);
    return await table.lookupCombined(own, { combiner: 'sum', maxNorm });
  } finally {
    table.dispose();
  }
}

/**
 * HugeCTR's `hps.LookupLayer`: rows of int32/int64 ids of any shape, `ids.shape + [embVecSize]`.
 * As in HugeCTR, every id is one key of the lookup (duplicates count): more than
 * `max_batch_size * maxnum_catfeature_query_per_table_per_sample` ids is an error, with or
 * without `maxNorm`. (`SparseLookupLayer` counts the distinct ids: HugeCTR's looks up `unique(ids)`.)
 */
export class LookupLayer extends HpsLayer {
  constructor(options: LookupLayerOptions) {
    super(options, 'LookupLayer');
  }

  /**
   * @param ids int32 / int64 ids: a Tensor (any rank), typed array, or number[] / bigint[] (shape [n])
   * @param options `maxNorm`: clip each row to this L2 norm (default none)
   * @returns Tensor `ids.shape + [embVecSize]`
   * @throws InvalidTypeError (float ids), the server's lookup errors
   */
  async call(ids: KeyInput | Tensor, options?: { maxNorm?: number | null } | null): Promise<Tensor> {
    const o = checkOptions<{ maxNorm?: number | null }>(options, ['maxNorm'], 'options');
    const maxNorm = o.maxNorm === undefined || o.maxNorm === null ? null : validateMaxNorm(o.maxNorm, 'options.maxNorm');
    if (ids instanceof Tensor && ids.dtype === 'float32') throw invalidParameter('ids', 'int32 or int64 ids', 'a float32 Tensor', InvalidTypeError);
    const shape = ids instanceof Tensor ? [...ids.shape] : null;
    const keys = normalizeKeys(ids, 'int64', 'ids') as BigInt64Array;
    const outShape = [...(shape ?? [keys.length]), this.embVecSize];
    return withLayerServer(this, async (server) => {
      // every id is a key of the lookup, duplicates included (HugeCTR's LookupLayer looks up `inputs` as they are)
      const rows = (await server.lookup(keys, this.modelName, this.tableId)).data as Float32Array;
      if (maxNorm === null) return new Tensor(rows, outShape);
      return new Tensor(await clipRows(rows, keys.length, this.embVecSize, maxNorm), outShape);
    });
  }
}

/**
 * HugeCTR's `hps.SparseLookupLayer`: pooled rows `[d0, embVecSize]` of a rank-2
 * SparseTensor of ids, with optional weights (a SparseTensor of the same layout).
 * As in HugeCTR (which looks up `unique(sp_ids.values)`), the distinct ids are the keys
 * of the lookup: more than `max_batch_size * maxnum_catfeature_query_per_table_per_sample`
 * distinct ids is an error, repeats of an id do not count.
 */
export class SparseLookupLayer extends HpsLayer {
  constructor(options: LookupLayerOptions) {
    super(options, 'SparseLookupLayer');
  }

  /**
   * @param spIds SparseTensor of int ids, rank 2
   * @param spWeights undefined / null (all 1) or a SparseTensor of float weights like spIds
   * @param options `combiner` 'mean' (default) | 'sum' | 'sqrtn'; `maxNorm` clips rows first
   * @returns Tensor `[d0, embVecSize]`; a weighted mean divides by the weight sum, sqrtn by
   *   sqrt of the summed squared weights, a zero denominator gives zeros (div-no-nan)
   * @throws InvalidTypeError (spIds not a SparseTensor, spWeights neither undefined nor a SparseTensor of float32 weights),
   *   InvalidArgumentError (combiner, maxNorm), the server's lookup errors
   */
  async call(spIds: SparseTensor, spWeights?: SparseTensor | null, options?: { combiner?: Combiner; maxNorm?: number | null } | null): Promise<Tensor> {
    if (!(spIds instanceof SparseTensor)) throw invalidParameter('spIds', 'a SparseTensor', spIds, InvalidTypeError);
    if (spWeights !== undefined && spWeights !== null && !(spWeights instanceof SparseTensor)) throw invalidParameter('spWeights', 'undefined or a SparseTensor', spWeights, InvalidTypeError);
    const o = checkOptions<{ combiner?: Combiner; maxNorm?: number | null }>(options, ['combiner', 'maxNorm'], 'options');
    const combiner = o.combiner === undefined || o.combiner === null ? 'mean' : validateCombiner(o.combiner, 'options.combiner');
    const maxNorm = o.maxNorm === undefined || o.maxNorm === null ? null : validateMaxNorm(o.maxNorm, 'options.maxNorm');
    if (spIds.dtype === 'float32') throw invalidParameter('spIds', 'a SparseTensor of int32 or int64 ids', 'float32 values', InvalidTypeError);
    if (spWeights && spWeights.dtype !== 'float32') throw invalidParameter('spWeights', 'a SparseTensor of float32 weights', `${spWeights.dtype} values`, InvalidTypeError);
    if (spIds.denseShape.length !== 2) throw invalidParameter('spIds', 'a rank-2 SparseTensor', `rank ${spIds.denseShape.length}`);
    const difference = spWeights ? layoutDifference(spIds, spWeights) : null;
    if (difference !== null) throw new ShapeMismatchError(`Expected spWeights to have the indices and dense shape of spIds but received ${difference}`, { argument: 'spWeights' });
    return withLayerServer(this, async (server) => new Tensor(await pool(this, server, spIds, spWeights ?? null, combiner, maxNorm), [spIds.denseShape[0]!, this.embVecSize]));
  }
}
