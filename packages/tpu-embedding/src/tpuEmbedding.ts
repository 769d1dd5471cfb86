import {
  type Bag,
  type RaggedTensor,
  type SparseTensor,
  checkOptions,
  DisposedError,
  type EmbeddingBackend,
  FailedPreconditionError,
  formatShape,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  type Keys,
  ShapeMismatchError,
  Tensor,
} from '@embedstack/core';
import { resolveBackend } from './backend.js';
import { restoreTables, saveTables } from './checkpoint.js';
import { type FeatureConfig, isFeatureConfig, type TableConfig } from './config.js';
import { CopyPool } from './copyPool.js';
import { checkInputKinds, type FeatureBatch, normalizeFeature, ownBatch } from './inputs.js';
import { type FlatEntry, flattenStructure, flattenUpTo, type Nest, packSequenceAs, type StructureOf } from './nest.js';
import { EmbeddingOptimizer } from './optimizers.js';
import { settleAll, ShardedTable, type TableSetup } from './shardedTable.js';
import { ReplicaStrategy } from './strategy.js';

/** Ids of one feature: dense ids (a Tensor or typed array of int32 / int64 ids, or nested arrays), a SparseTensor or a RaggedTensor. */
export type FeatureInput =
  | Tensor<Int32Array>
  | Tensor<BigInt64Array>
  | Int32Array
  | BigInt64Array
  | readonly (number | bigint)[]
  | readonly (readonly (number | bigint)[])[]
  | SparseTensor<Int32Array>
  | SparseTensor<BigInt64Array>
  | RaggedTensor<Int32Array>
  | RaggedTensor<BigInt64Array>;

/** Weights of one feature: float32, with the layout of its SparseTensor / RaggedTensor ids; null / undefined: all 1. */
export type FeatureWeight = SparseTensor<Float32Array> | RaggedTensor<Float32Array> | null | undefined;

/** The gradient of one feature's activations: a float32 Tensor of their shape, a Float32Array of their size, or null (zero). */
export type FeatureGradient = Tensor<Float32Array> | Float32Array | null | undefined;

/** Per-feature values in the structure of a feature config F (what enqueue, dequeue and applyGradients take or return). */
export type PerFeature<F, Leaf> = StructureOf<F, Leaf, FeatureConfig>;

/** Options of {@link TPUEmbedding} (TF's `TPUEmbedding(feature_config, optimizer, pipeline_execution_with_tensor_core)`; the strategy is TF's ambient `TPUStrategy`). */
export interface TPUEmbeddingOptions<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> {
  /** Any nesting of objects and arrays whose leaves are FeatureConfigs. */
  featureConfig: F;
  /** Optimizer of every table without its own. Optional for inference-only use. */
  optimizer?: EmbeddingOptimizer | null;
  /** Replicas and hosts. Default: one of each. */
  strategy?: ReplicaStrategy | null;
  /** Apply each step's update one step late (see the class doc). Default false. */
  pipelineExecutionWithTensorCore?: boolean | null;
  /** Backend name or object. Default: core's registry (loads @embedstack/cpu-backend when none is registered). */
  backend?: string | EmbeddingBackend | null;
}

/** Ids per feature, in the feature config's structure. */
export type FeatureInputs<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> = PerFeature<F, FeatureInput>;

/** Options of {@link TPUEmbedding.dequeue}. */
export interface DequeueOptions<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> {
  /** Arrays to write the activations to (feature config structure; null leaves: fresh arrays). Default: fresh arrays. */
  out?: PerFeature<F, Float32Array | null> | null;
}

/** Options of {@link TPUEmbedding.enqueue} (TF's `enqueue(features, weights, training)`). */
export interface EnqueueOptions<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> {
  /** Same structure as the features; `SparseTensor`/`RaggedTensor` float weights or null per feature. Default: all 1. */
  weights?: PerFeature<F, FeatureWeight> | null;
  /** Default true. false: forward only, `applyGradients` is then an error. */
  training?: boolean | null;
}

interface FeatureState {
  path: string;
  name: string;
  config: FeatureConfig;
  /** index into #tables */
  table: number;
}

interface QueuedBatch {
  batches: FeatureBatch[];
  training: boolean;
  /** The buffers of its copies of the caller's arrays (from the TPUEmbedding's CopyPool), returned once the batch is spent. */
  copies: ArrayBuffer[];
}

/** One table's share of a training step: every feature's bag rows (concatenated) and their pooled gradients. */
interface TableUpdate {
  table: ShardedTable;
  bag: Bag<Keys>;
  grads: Float32Array;
  /** Per shard of the table: whether this update was applied to it (a failed step keeps them, so a retry skips those shards). */
  done: boolean[];
}

interface Update {
  step: number;
  /** The batch whose gradients these are (its bags may be the tables' bags). */
  batch: QueuedBatch;
  tables: TableUpdate[];
}

const OPTION_KEYS = ['featureConfig', 'optimizer', 'strategy', 'pipelineExecutionWithTensorCore', 'backend'];
const OPTIMIZER_NAMES = 'an instance of SGD, Adagrad, AdagradMomentum, Adam or FTRL (from @embedstack/tpu-embedding)';

function warn(message: string): void {
  if (typeof process !== 'undefined' && typeof process.emitWarning === 'function') {
    process.emitWarning(message, { type: 'EmbeddingWarning', code: 'EMBEDSTACK_ZERO_GRADIENT' });
  } else console.warn(message);
}

/**
 * TF's TPU embedding mid-level API (`tf.tpu.experimental.embedding.TPUEmbedding`)
 * on an embedstack backend. Declare every table and feature up front, then train
 * with `enqueue` -> `dequeue` -> `applyGradients`, checkpoint with `save`/`restore`
 * and read the parameters with `embeddingTables`.
 *
 * Memory: each table lives in the backend as `numHosts` static row shards with
 * their optimizer slots; activations and snapshots are fresh host arrays owned by
 * the caller. Calls on one instance run one after another in call order (each
 * async method waits for the previous ones); the object is not meant to be shared
 * between workers.
 *
 * `pipelineExecutionWithTensorCore: true` reproduces TF's pipelined numerics: the
 * update computed by `applyGradients` at step t is applied right after the lookups
 * of step t+1 (inside that step's `dequeue`), so step t+1's activations are one
 * update old. Reading `embeddingTables`, `save` and `restore` first apply (or, for
 * restore, drop) a pending update. On a CPU backend this buys no speed; it keeps a
 * model trained this way numerically the same as on a TPU.
 */
export class TPUEmbedding<F extends Nest<FeatureConfig> = Nest<FeatureConfig>> {
  /** The feature config as given (not modified: unnamed tables are `table_{i}` in {@link tableNames} only). */
  readonly featureConfig: F;
  /** The default optimizer; undefined when not given. */
  readonly optimizer: EmbeddingOptimizer | undefined;
  /** Replicas and hosts in use. */
  readonly strategy: ReplicaStrategy;
  /** Whether updates are applied one step late (see the class doc). */
  readonly pipelineExecutionWithTensorCore: boolean;
  readonly #backendOption: string | EmbeddingBackend | undefined;
  readonly #features: FeatureState[];
  readonly #setups: TableSetup[];
  #tables: ShardedTable[] | null = null;
  #perReplicaBatch: number | undefined;
  #queue: QueuedBatch[] = [];
  /** The dequeued batch; `partial`: its update after an applyGradients that failed in the backend (which shards took it). */
  #current: { batch: QueuedBatch; applied: boolean; partial: Update | null } | null = null;
  #pending: Update | null = null;
  /** Activations of a pipelined dequeue whose pending update failed to apply: the retry returns them (the lookups preceded the update). */
  #stash: { batch: QueuedBatch; acts: Tensor<Float32Array>[] } | null = null;
  #step = 0;
  /** Buffers of the queued batches' copies, reused once a batch is spent (see #reclaim). */
  readonly #copies = new CopyPool();
  /** The batches holding buffers of #copies, oldest first. */
  #lent: QueuedBatch[] = [];
  #tail: Promise<unknown> = Promise.resolve();
  #disposed = false;

  /**
   * @throws InvalidTypeError: options not an object, featureConfig leaves not
   *   FeatureConfig, strategy not a ReplicaStrategy, an optimizer (global or a table's)
   *   that is not one of this package's classes
   * @throws InvalidArgumentError: "Multiple tables with name ..."
   */
  constructor(options: TPUEmbeddingOptions<F>) {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw invalidParameter('options', 'an options object ({ featureConfig, optimizer, ... })', options, InvalidTypeError);
    }
    for (const k of Object.keys(options)) {
      if (!OPTION_KEYS.includes(k)) throw invalidParameter(`options.${k}`, `one of ${OPTION_KEYS.join(', ')}`, k);
    }
    const flat: FlatEntry<FeatureConfig>[] = flattenStructure(options.featureConfig, isFeatureConfig, 'featureConfig', 'FeatureConfig');
    const global = options.optimizer ?? undefined;
    if (global !== undefined && !(global instanceof EmbeddingOptimizer)) {
      throw invalidParameter('optimizer', OPTIMIZER_NAMES, global, InvalidTypeError);
    }
    const strategy = options.strategy ?? new ReplicaStrategy();
    if (!(strategy instanceof ReplicaStrategy)) throw invalidParameter('strategy', 'a ReplicaStrategy', strategy, InvalidTypeError);
    const pipeline = options.pipelineExecutionWithTensorCore ?? false;
    if (typeof pipeline !== 'boolean') throw invalidParameter('pipelineExecutionWithTensorCore', 'a boolean', pipeline, InvalidTypeError);
    const backend = options.backend ?? undefined;
    if (backend !== undefined && typeof backend !== 'string' && (typeof backend !== 'object' || typeof backend.createTable !== 'function')) {
      throw invalidParameter('backend', 'a backend name or an EmbeddingBackend', backend, InvalidTypeError);
    }

    // Table order: first occurrence in the flattened feature config.
    const order = new Map<TableConfig, number>();
    const setups: TableSetup[] = [];
    const features = flat.map(({ path, leaf }) => {
      let t = order.get(leaf.table);
      if (t === undefined) {
        t = setups.length;
        order.set(leaf.table, t);
        const own = leaf.table.optimizer;
        if (own !== undefined && !(own instanceof EmbeddingOptimizer)) {
          throw invalidParameter(`${path}.table.optimizer`, OPTIMIZER_NAMES, own, InvalidTypeError);
        }
        setups.push({ name: leaf.table.name ?? `table_${t}`, config: leaf.table, optimizer: (own as EmbeddingOptimizer | undefined) ?? global });
      }
      return { path, name: leaf.name ?? (path.replace(/^featureConfig\.?/, '') || 'feature'), config: leaf, table: t };
    });
    const names = new Set<string>();
    for (const s of setups) {
      if (names.has(s.name)) {
        throw new InvalidArgumentError(`Multiple tables with name "${s.name}" found in featureConfig; table names must be unique`, {
          argument: 'featureConfig',
        });
      }
      names.add(s.name);
    }
    // Unnamed tables are `table_{i}` here only (tableNames): TF writes the name onto the user's
    // TableConfig, which then clashes when the config is reused in another TPUEmbedding.
    this.featureConfig = options.featureConfig;
    this.optimizer = global;
    this.strategy = strategy;
    this.pipelineExecutionWithTensorCore = pipeline;
    this.#backendOption = backend;
    this.#features = features;
    this.#setups = setups;
  }

  /** True once the tables exist (after `build`, the first `enqueue`, `embeddingTables` or `restore`). */
  get built(): boolean {
    return this.#tables !== null;
  }

  /** Optimizer steps applied so far (the next `applyGradients` is step `step + 1`). */
  get step(): number {
    return this.#step;
  }

  /** The per-replica batch size, once known (from `build` or the first `enqueue`). */
  get perReplicaBatchSize(): number | undefined {
    return this.#perReplicaBatch;
  }

  /** Resolved table names in table order (`table_{i}` for unnamed tables). */
  get tableNames(): string[] {
    return this.#setups.map((s) => s.name);
  }

  #checkAlive(): void {
    if (this.#disposed) throw new DisposedError('This TPUEmbedding was disposed');
  }

  /** Runs `fn` after every earlier call on this object has settled. */
  #serial<T>(fn: () => Promise<T> | T): Promise<T> {
    const p = this.#tail.then(() => {
      this.#checkAlive();
      return fn();
    });
    this.#tail = p.catch(() => undefined);
    return p;
  }

  #ensureTables(): ShardedTable[] {
    this.#checkAlive();
    if (this.#tables) return this.#tables;
    const backend = resolveBackend(this.#backendOption);
    const tables: ShardedTable[] = [];
    try {
      for (const s of this.#setups) tables.push(new ShardedTable(s, this.strategy.numHosts, backend));
    } catch (e) {
      for (const t of tables) t.dispose();
      throw e;
    }
    this.#tables = tables;
    return tables;
  }

  /**
   * Creates the tables (TF's `build`). `perReplicaBatchSize` fixes the batch: every
   * `enqueue` must then take `numReplicas * perReplicaBatchSize` examples. When
   * omitted it comes from the features' `outputShape`, else from the first enqueue.
   * Calling it again is a no-op unless it names a different batch size (an error).
   * @throws InvalidArgumentError for a bad or conflicting batch size; the
   *   initializer's and slotVariableCreationFn's errors; BackendUnavailableError
   */
  build(perReplicaBatchSize?: number | null): void {
    this.#checkAlive();
    let b = perReplicaBatchSize ?? undefined;
    if (b !== undefined && (typeof b !== 'number' || !Number.isSafeInteger(b) || b < 1)) {
      throw invalidParameter('perReplicaBatchSize', 'an integer >= 1', b);
    }
    if (b === undefined) {
      const fromShapes = new Set(this.#features.filter((f) => f.config.outputShape).map((f) => f.config.outputShape![0]!));
      if (fromShapes.size > 1) {
        throw invalidParameter('featureConfig outputShape', 'one per-replica batch size for every feature', [...fromShapes]);
      }
      b = [...fromShapes][0];
    }
    if (b !== undefined && this.#perReplicaBatch !== undefined && b !== this.#perReplicaBatch) {
      throw invalidParameter('perReplicaBatchSize', `${this.#perReplicaBatch} (the batch size it was built with)`, b);
    }
    this.#ensureTables();
    if (b !== undefined) this.#perReplicaBatch = b;
  }

  /**
   * Queues one step's global batch (every replica's examples; replica r owns the
   * r-th contiguous slice). Builds the tables on first use. The queued batch keeps
   * its own copy of the ids and weights: the caller may refill its arrays right away.
   * @throws InvalidArgumentError (structure differs from the feature config, weights
   *   for dense ids, mixed SparseTensor and RaggedTensor, batch not divisible by
   *   numReplicas or not the built batch size), InvalidTypeError (input or weight of
   *   the wrong kind or dtype), ShapeMismatchError (weights layout, batch sizes
   *   differ between features), OutOfRangeError (an id outside [0, vocabularySize));
   *   a rejected call queues nothing
   */
  enqueue(features: FeatureInputs<F>, options?: EnqueueOptions<F> | null): Promise<void> {
    return this.#serial(() => {
      const o = (options ?? {}) as Record<string, unknown>;
      if (typeof o !== 'object' || Array.isArray(o)) throw invalidParameter('options', 'an object ({ weights, training })', options, InvalidTypeError);
      for (const k of Object.keys(o)) if (k !== 'weights' && k !== 'training') throw invalidParameter(`options.${k}`, 'one of weights, training', k);
      const training = o.training ?? true;
      if (typeof training !== 'boolean') throw invalidParameter('training', 'a boolean', training, InvalidTypeError);
      const inputs = flattenUpTo(this.featureConfig, isFeatureConfig, features as unknown, 'features');
      this.#reclaim();
      const copies: ArrayBuffer[] = [];
      const take = (bytes: number): ArrayBuffer => this.#copies.take(bytes);
      const weights = flattenUpTo(this.featureConfig, isFeatureConfig, o.weights as unknown, 'weights', true);
      // A rejected call queues nothing and returns the buffers its copies took.
      let batches: FeatureBatch[];
      try {
        const R = this.strategy.numReplicas;
        batches = this.#features.map((f, i) => {
          const s = this.#setups[f.table]!;
          const sub = f.path.slice('featureConfig'.length);
          const batch = normalizeFeature(
            inputs[i],
            weights[i],
            {
              path: `features${sub}`,
              weightPath: `weights${sub}`,
              tableName: s.name,
              vocabularySize: s.config.vocabularySize,
              dim: s.config.dim,
              combiner: s.config.combiner,
              maxSequenceLength: f.config.maxSequenceLength,
              outputShape: f.config.outputShape,
              numReplicas: R,
              keyDtype: s.config.vocabularySize <= 2147483647 ? 'int32' : 'int64',
            },
            'train',
          );
          return ownBatch(batch, inputs[i], weights[i], take, copies);
        });
        const paths = this.#features.map((f) => `features${f.path.slice('featureConfig'.length)}`);
        checkInputKinds(batches, paths);
        const B = batches[0]!.shape[0]!;
        batches.forEach((b, i) => {
          if (b.shape[0] !== B) {
            throw new ShapeMismatchError(`Expected ${paths[i]} to have the batch size ${B} of ${paths[0]} but received ${b.shape[0]}`, {
              argument: paths[i],
            });
          }
        });
        if (B < 1 || B % R !== 0) {
          throw invalidParameter('features batch size', `a positive multiple of numReplicas (${R}): the global batch is split evenly over the replicas`, B);
        }
        if (this.#perReplicaBatch !== undefined && B !== R * this.#perReplicaBatch) {
          throw invalidParameter(
            'features batch size',
            `${R * this.#perReplicaBatch} (numReplicas ${R} x per-replica batch ${this.#perReplicaBatch}, fixed by build or the first enqueue)`,
            B,
          );
        }
        this.#ensureTables();
        this.#perReplicaBatch = B / R;
      } catch (e) {
        this.#copies.give(copies);
        throw e;
      }
      const queued: QueuedBatch = { batches, training, copies };
      this.#queue.push(queued);
      if (copies.length > 0) this.#lent.push(queued);
    });
  }

  /**
   * The activations of the oldest queued batch, in the feature config's structure:
   * `Tensor` [batch, dim] per feature ([batch, ...outputShape.slice(1), dim] with an
   * outputShape; [batch, maxSequenceLength, dim] for sequence features, zero padded),
   * pooled by core in the backend (one call per feature and shard; results do not
   * depend on numReplicas or numHosts).
   * `options.out` (an embedstack extension): Float32Arrays in the feature config's
   * structure, one per feature of exactly its activation's size, that the activations
   * are written to (the Tensors are over them), so a training loop allocates none.
   * @throws FailedPreconditionError when nothing was enqueued; InvalidTypeError /
   *   ShapeMismatchError for a bad `out`; the batch stays queued when any lookup fails
   */
  dequeue(options?: DequeueOptions<F> | null): Promise<PerFeature<F, Tensor<Float32Array>>> {
    return this.#serial(async () => {
      const next = this.#queue[0];
      if (!next) throw new FailedPreconditionError('dequeue() was called before enqueue(): there is no batch to look up');
      const o = checkOptions<DequeueOptions>(options, ['out']);
      const given = flattenUpTo(this.featureConfig, isFeatureConfig, o.out as unknown, 'out', true);
      const outs = next.batches.map((b, i) => {
        const size = b.shape.reduce((a, d) => a * d, 1);
        const g = given[i];
        if (g === undefined || g === null) return null; // the backend's own result
        const path = `out${this.#features[i]!.path.slice('featureConfig'.length)}`;
        if (!(g instanceof Float32Array)) throw invalidParameter(path, 'a Float32Array', g, InvalidTypeError);
        if (g.length !== size) throw new ShapeMismatchError(`Expected ${path} to hold ${size} floats (activation shape ${formatShape(b.shape)}) but received ${g.length}`, { argument: path });
        return g;
      });
      // The batch leaves the queue only once its lookups resolved: a failed dequeue keeps it queued.
      const batch = next;
      const tables = this.#ensureTables();
      const stash = this.#stash?.batch === batch ? this.#stash : null;
      this.#stash = null;
      const acts = stash
        ? stash.acts.map((t, i) => {
            const out = outs[i];
            if (!out) return t;
            out.set(t.data);
            return new Tensor(out, t.shape);
          })
        : await Promise.all(
            batch.batches.map(async (b, i) => {
              const table = tables[this.#features[i]!.table]!;
              const out = outs[i] ?? null;
              const data = b.gather ? await table.gather(b.bag.keys, out) : await table.pool(b.bag, table.config.combiner, out);
              return new Tensor(data, b.shape);
            }),
          );
      if (this.#pending) {
        // Pipelined: the previous step's update follows this step's lookups. When it fails in the
        // backend, the batch stays queued with these activations, and the update stays pending with
        // the shards it reached marked, so a retried dequeue completes it without applying it twice.
        try {
          await this.#apply(this.#pending);
        } catch (e) {
          this.#stash = { batch, acts: acts.map((t) => new Tensor((t.data as Float32Array).slice(), t.shape)) };
          throw e;
        }
        this.#pending = null;
      }
      this.#queue.shift();
      this.#current = { batch, applied: false, partial: null };
      const packed: unknown = packSequenceAs(this.featureConfig, isFeatureConfig, acts);
      return packed as PerFeature<F, Tensor<Float32Array>>;
    });
  }

  /**
   * Backpropagates `gradients` (the feature config's structure; per feature a float32
   * `Tensor` of the activation's shape, a `Float32Array` of its size, or `null` for a
   * zero gradient, with a process warning) through each feature's combiner and
   * weights, sums them per table row over the global batch and applies one fused
   * optimizer update per table (step counter starting at 1).
   * @throws FailedPreconditionError (no dequeued training batch, already applied, a
   *   table without optimizer), InvalidArgumentError (structure), InvalidTypeError /
   *   ShapeMismatchError (a gradient's type or shape); a rejected call changes nothing.
   *   Everything is checked before the first table is touched; only a failure inside the
   *   backend itself (say, out of memory) can stop the update after some tables were
   *   updated: every table shard's update is then awaited, the shards whose backend call
   *   succeeded keep the update, the others are untouched, and the first error is thrown.
   *   The step counter and the batch stay as they were and the call may be retried: the
   *   retry updates only the shards the failed call did not (with the retry's gradients),
   *   so retrying with the same gradients ends exactly where one successful call would.
   */
  applyGradients(gradients: PerFeature<F, FeatureGradient>): Promise<void> {
    return this.#serial(async () => {
      const cur = this.#current;
      if (!cur) throw new FailedPreconditionError('applyGradients() was called before dequeue(): there are no activations to differentiate');
      if (!cur.batch.training) throw new FailedPreconditionError('applyGradients() was called for a batch enqueued with training: false');
      if (cur.applied) throw new FailedPreconditionError('applyGradients() was already called for this batch; enqueue and dequeue the next one first');
      const leaves = flattenUpTo(this.featureConfig, isFeatureConfig, gradients as unknown, 'gradients');
      const zero: string[] = [];
      const grads = this.#features.map((f, i) => {
        const path = `gradients${f.path.slice('featureConfig'.length)}`;
        const shape = cur.batch.batches[i]!.shape;
        const size = shape.reduce((a, b) => a * b, 1);
        const g = leaves[i];
        if (g === undefined || g === null) {
          zero.push(f.name);
          return new Float32Array(size);
        }
        let data: Float32Array;
        if (g instanceof Tensor) {
          if (!(g.data instanceof Float32Array)) throw invalidParameter(path, 'a float32 Tensor', `a ${g.dtype} Tensor`, InvalidTypeError);
          if (g.shape.length !== shape.length || g.shape.some((d, k) => d !== shape[k])) {
            throw new ShapeMismatchError(`Expected ${path} to have the activation shape ${formatShape(shape)} but received shape ${formatShape(g.shape)}`, {
              argument: path,
            });
          }
          data = g.data;
        } else if (g instanceof Float32Array) {
          if (g.length !== size) {
            throw new ShapeMismatchError(`Expected ${path} to hold ${size} floats (activation shape ${formatShape(shape)}) but received ${g.length}`, {
              argument: path,
            });
          }
          data = g;
        } else throw invalidParameter(path, 'a float32 Tensor, a Float32Array or null', g, InvalidTypeError);
        return data;
      });
      const tables = this.#ensureTables();
      for (const [t, table] of tables.entries()) {
        if (!table.optimizer && this.#features.some((f) => f.table === t)) {
          throw new FailedPreconditionError(
            `Table "${table.name}" has no optimizer: pass one to TPUEmbedding({ optimizer }) or its TableConfig to train it`,
            { argument: 'optimizer' },
          );
        }
      }
      const step = this.#step + 1;
      for (const table of tables) table.optimizer!.learningRateAt(step);
      const pipelined = this.pipelineExecutionWithTensorCore;
      const update: Update = {
        step,
        batch: cur.batch,
        tables: tables.flatMap((table, t) => (this.#features.some((f) => f.table === t) ? [this.#tableUpdate(table, t, cur.batch, grads, pipelined)] : [])),
      };
      for (const name of zero) {
        warn(`No gradient passed for feature ${name}, sending a zero gradient. This may not be correct behavior for optimizers like Adam.`);
      }
      // A retry after a backend failure skips the shards the failed call already updated.
      if (cur.partial) update.tables.forEach((p, i) => (p.done = cur.partial!.tables[i]!.done));
      // The step counts, and the batch is spent, only once every table's update succeeded
      // (pipelined: once it is pending; dequeue applies it).
      if (!this.pipelineExecutionWithTensorCore) {
        try {
          await this.#apply(update);
        } catch (e) {
          cur.partial = update;
          throw e;
        }
        cur.partial = null;
      } else this.#pending = update;
      this.#step = step;
      cur.applied = true;
    });
  }

  /**
   * Table t's share of a step: the bags of every feature of the table, one after the
   * other (so duplicates are summed in feature then entry order), with their pooled
   * gradients. A table read by one feature passes that feature's arrays through. Non-lazy
   * Adam adds one row holding every row id with a zero gradient, so every row is updated.
   */
  #tableUpdate(table: ShardedTable, t: number, batch: QueuedBatch, grads: Float32Array[], copy: boolean): TableUpdate {
    const feats = this.#features.map((_, i) => i).filter((i) => this.#features[i]!.table === t);
    const opt = table.optimizer!;
    const allRows = opt.kind === 'adam' && !(opt as { lazyAdam?: boolean }).lazyAdam;
    const parts = feats.map((i) => ({ bag: batch.batches[i]!.bag, grads: grads[i]! }));
    if (allRows) {
      const keys = table.allRows();
      parts.push({ bag: { rowSplits: Int32Array.of(0, keys.length), keys, weights: null }, grads: new Float32Array(table.dim) });
    }
    const done = table.shards.map(() => false);
    if (parts.length === 1) {
      const p = parts[0]!;
      return { table, bag: p.bag, grads: copy ? p.grads.slice() : p.grads, done };
    }
    return { table, ...concatBags(parts, table.keyDtype === 'int32', table.dim), done };
  }

  /**
   * Applies `u` to every table shard not yet marked done, concurrently; each success is
   * marked. Every call settles before the first failure is thrown, so calling again with
   * the same `u` completes it without updating any shard twice.
   */
  async #apply(u: Update): Promise<void> {
    await settleAll(u.tables.map((p) => p.table.train(p.bag, p.grads, p.table.config.combiner, p.table.optimizer!.spec, u.step, p.done)));
  }

  /**
   * Returns to #copies the buffers of every lent batch that is spent: no longer queued,
   * current, stashed or waiting in a pending update. Runs in enqueue, inside #serial: no
   * other call of this object is running, so no backend call still reads a spent batch.
   */
  #reclaim(): void {
    if (this.#lent.length === 0) return;
    const kept: QueuedBatch[] = [];
    for (const b of this.#lent) {
      if (this.#current?.batch === b || this.#stash?.batch === b || this.#pending?.batch === b || this.#queue.includes(b)) kept.push(b);
      else this.#copies.give(b.copies);
    }
    this.#lent = kept;
  }

  #flushSync(): void {
    const u = this.#pending;
    if (!u) return;
    for (const p of u.tables) p.table.trainSync(p.bag, p.grads, p.table.config.combiner, p.table.optimizer!.spec, u.step, p.done);
    this.#pending = null;
  }

  /**
   * A snapshot of every table's parameters: `Map<TableConfig, Tensor [vocabularySize, dim]>`
   * keyed by the user's own TableConfig objects (fresh host copies). Builds the
   * tables if needed and first applies a pending pipelined update. Reads the backend
   * synchronously: await earlier calls on this object first.
   * @throws UnsupportedError on a backend without synchronous operations
   */
  get embeddingTables(): Map<TableConfig, Tensor<Float32Array>> {
    const tables = this.#ensureTables();
    this.#flushSync();
    return new Map(tables.map((t) => [t.config, new Tensor(t.snapshotSync(), [t.vocabularySize, t.dim])]));
  }

  /**
   * Saves parameters, optimizer slots and the step counter into `dir` (created, or
   * an existing empty directory): one core table checkpoint per table plus
   * `tpu_embedding.json`. A pending pipelined update is applied first.
   * @throws AlreadyExistsError when dir is not empty; IOError
   */
  save(dir: string): Promise<void> {
    return this.#serial(async () => {
      const tables = this.#ensureTables();
      if (this.#pending) {
        await this.#apply(this.#pending); // a failure keeps it pending (the shards it reached marked)
        this.#pending = null;
      }
      await saveTables(dir, tables, this.#step);
    });
  }

  /**
   * Loads parameters, slots and the step counter saved by `save` (with any numHosts)
   * into this TPUEmbedding, whose tables must have the same names, shapes, combiners
   * and optimizers. Drops a pending pipelined update and the current step's
   * activations (queued batches stay queued). Checks every table before loading any,
   * and loads into new tables that replace the current ones only once all loaded (for
   * that while, the tables take twice their memory), so a failed restore changes nothing.
   * @throws NotFoundError, CheckpointCorruptError, InvalidArgumentError (mismatch), IOError
   */
  restore(dir: string): Promise<void> {
    return this.#serial(async () => {
      const tables = this.#ensureTables();
      const { step, loaded } = await restoreTables(dir, tables);
      this.#tables = loaded;
      for (const t of tables) t.dispose();
      this.#step = step;
      this.#pending = null;
      this.#stash = null;
      this.#current = null;
    });
  }

  /** Frees every table. Idempotent; later calls throw DISPOSED. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const t of this.#tables ?? []) t.dispose();
    this.#tables = null;
    this.#queue = [];
    this.#current = null;
    this.#pending = null;
    this.#stash = null;
    this.#lent = [];
    this.#copies.clear();
  }

  /** Same as `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Bags one after the other (rows concatenated) with their gradients; weights 1 where a bag has none. */
function concatBags(parts: { bag: Bag<Keys>; grads: Float32Array }[], int32: boolean, dim: number): { bag: Bag<Keys>; grads: Float32Array } {
  const rows = parts.reduce((a, p) => a + p.bag.rowSplits.length - 1, 0);
  const nnz = parts.reduce((a, p) => a + p.bag.keys.length, 0);
  const weighted = parts.some((p) => p.bag.weights !== null);
  const rowSplits = new Int32Array(rows + 1);
  const keys = int32 ? new Int32Array(nnz) : new BigInt64Array(nnz);
  const weights = weighted ? new Float32Array(nnz).fill(1) : null;
  const grads = new Float32Array(rows * dim);
  let r = 0;
  let e = 0;
  for (const { bag, grads: g } of parts) {
    const n = bag.rowSplits.length - 1;
    for (let i = 1; i <= n; i++) rowSplits[r + i] = e + bag.rowSplits[i]!;
    (keys as Int32Array).set(bag.keys as Int32Array, e);
    if (weights && bag.weights) weights.set(bag.weights, e);
    grads.set(g, r * dim);
    r += n;
    e += bag.keys.length;
  }
  return { bag: { rowSplits, keys, weights }, grads };
}
