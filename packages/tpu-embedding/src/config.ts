import {
  checkInteger,
  checkName,
  checkOptions,
  type Combiner,
  initializers,
  type InitializerSpec,
  invalidParameter,
  InvalidTypeError,
  isCombiner,
  isInitializerSpec,
} from '@embedstack/core';
import type { EmbeddingOptimizer } from './optimizers.js';

/**
 * A table initializer: TF's callable, here `(shape: [vocabularySize, dim]) =>
 * Float32Array | number[]` (row-major, called once when the tables are built), or a
 * core initializer spec (`initializers.truncatedNormal(0, 0.1)`, `initializers.zeros()`,
 * ...). Random specs draw per (table name, row, column), so values never depend on
 * sharding.
 */
export type TableInitializer = ((shape: [number, number]) => Float32Array | ArrayLike<number>) | InitializerSpec;

/** Options of {@link TableConfig} (TF's `TableConfig(vocabulary_size, dim, initializer, optimizer, combiner, name)`). */
export interface TableConfigOptions {
  /** Number of rows, integer >= 1. */
  vocabularySize: number;
  /** Floats per row, integer >= 1. */
  dim: number;
  /** Default: truncated normal, mean 0, std 1/sqrt(dim). */
  initializer?: TableInitializer | null;
  /** This table's optimizer; default: the one passed to `TPUEmbedding`. Checked by the `TPUEmbedding` constructor. */
  optimizer?: EmbeddingOptimizer | null;
  /** 'mean' (default), 'sum' or 'sqrtn'. */
  combiner?: Combiner | null;
  /** Default: a `TPUEmbedding` calls the table `table_{i}` (i = its position in that TPUEmbedding's table order; `emb.tableNames`). */
  name?: string | null;
}

type Options = Record<string, unknown>;

function readOptions(options: unknown, className: string, known: readonly string[], required: readonly string[]): Options {
  return checkOptions<Options>(options, known, 'options', {
    expected: `an options object for ${className} ({ ${required.join(', ')}, ... })`,
    required: true,
  }) as Options;
}

function intAtLeast(value: unknown, argument: string, min: number): number {
  return checkInteger(value, argument, { min });
}

function optionalName(value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : checkName(value, 'name');
}

/**
 * One embedding table (TF's `TableConfig`): `vocabularySize` rows of `dim` floats.
 * Options are exposed as read-only properties with the same names.
 *
 * @throws InvalidArgumentError: vocabularySize or dim not an integer >= 1, initializer
 *   neither a function nor a known initializer spec, combiner not mean|sum|sqrtn
 * @throws InvalidTypeError: options not an object, name not a non-empty string
 */
export class TableConfig {
  /** Number of rows. */
  readonly vocabularySize: number;
  /** Floats per row. */
  readonly dim: number;
  /** The initializer in use (the default truncated normal when none was given). */
  readonly initializer: TableInitializer;
  /** As given (checked by the `TPUEmbedding` constructor: one of this package's optimizers); undefined when unset. */
  readonly optimizer: EmbeddingOptimizer | undefined;
  /** Reduction of a non-sequence feature's ids: 'mean', 'sum' or 'sqrtn'. */
  readonly combiner: Combiner;
  /**
   * As given; undefined when unset. A `TPUEmbedding` calls an unnamed table `table_{i}` (its
   * position in that TPUEmbedding's table order: `emb.tableNames`) without writing it here, so
   * one TableConfig can serve several TPUEmbeddings (TF writes the name onto the config).
   */
  readonly name: string | undefined;

  constructor(options: TableConfigOptions) {
    const o = readOptions(options, 'TableConfig', ['vocabularySize', 'dim', 'initializer', 'optimizer', 'combiner', 'name'], [
      'vocabularySize',
      'dim',
    ]);
    this.vocabularySize = intAtLeast(o.vocabularySize, 'vocabularySize', 1);
    this.dim = intAtLeast(o.dim, 'dim', 1);
    const init = o.initializer ?? null;
    if (init !== null && typeof init !== 'function' && !isInitializerSpec(init)) {
      throw invalidParameter('initializer', 'a function (shape) => values or a known initializer spec', init);
    }
    this.initializer = (init as TableInitializer | null) ?? initializers.truncatedNormal(0, 1 / Math.sqrt(this.dim));
    this.optimizer = (o.optimizer ?? undefined) as EmbeddingOptimizer | undefined;
    const combiner = o.combiner ?? 'mean';
    if (!isCombiner(combiner)) throw invalidParameter('combiner', "one of 'mean', 'sum', 'sqrtn'", combiner);
    this.combiner = combiner;
    this.name = optionalName(o.name);
    Object.freeze(this);
  }
}

/** Options of {@link FeatureConfig} (TF's `FeatureConfig(table, max_sequence_length, output_shape, name)`). */
export interface FeatureConfigOptions {
  /** The table this feature looks up. */
  table: TableConfig;
  /** 0 (default): one combined row per example. L > 0: a sequence feature, activations [batch, L, dim]. */
  maxSequenceLength?: number | null;
  /** Per-replica shape of the activations' leading dimensions (without L and dim). Default: inferred. */
  outputShape?: readonly number[] | null;
  /** Default: the feature's path in the feature config. */
  name?: string | null;
}

/**
 * One input feature (TF's `FeatureConfig`): which table it reads, and whether it is
 * a sequence feature. Options are read-only properties with the same names.
 *
 * @throws InvalidArgumentError: table not a TableConfig, maxSequenceLength not an
 *   integer >= 0, outputShape not an array of integers >= 1
 */
export class FeatureConfig {
  /** The table this feature looks up. */
  readonly table: TableConfig;
  /** 0: one combined row per example; L > 0: a sequence feature. */
  readonly maxSequenceLength: number;
  /** Per-replica leading shape of the activations as given; undefined when inferred. */
  readonly outputShape: readonly number[] | undefined;
  /** As given; undefined when unset (a `TPUEmbedding` then calls the feature by its path in the feature config, without writing it here). */
  readonly name: string | undefined;

  constructor(options: FeatureConfigOptions) {
    const o = readOptions(options, 'FeatureConfig', ['table', 'maxSequenceLength', 'outputShape', 'name'], ['table']);
    if (!(o.table instanceof TableConfig)) throw invalidParameter('table', 'a TableConfig', o.table, InvalidTypeError);
    this.table = o.table;
    this.maxSequenceLength = intAtLeast(o.maxSequenceLength ?? 0, 'maxSequenceLength', 0);
    const shape = o.outputShape ?? undefined;
    if (shape !== undefined) {
      if (!Array.isArray(shape) || shape.length === 0 || shape.some((d) => typeof d !== 'number' || !Number.isSafeInteger(d) || d < 1)) {
        throw invalidParameter('outputShape', 'a non-empty array of integers >= 1', shape);
      }
      if (this.maxSequenceLength > 0 && shape.length !== 1) {
        throw invalidParameter('outputShape', 'of rank 1 ([batch]) for a sequence feature', shape);
      }
    }
    this.outputShape = shape === undefined ? undefined : Object.freeze((shape as number[]).slice());
    this.name = optionalName(o.name);
    Object.freeze(this);
  }
}

export function isFeatureConfig(value: unknown): value is FeatureConfig {
  return value instanceof FeatureConfig;
}
