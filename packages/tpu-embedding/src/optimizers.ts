import {
  checkOptions,
  createOptimizer,
  InvalidTypeError,
  invalidParameter,
  type OptimizerHyper,
  type OptimizerKind,
  type OptimizerSpec,
  type Tensor,
  UnsupportedError,
} from '@embedstack/core';
import type { TableConfig } from './config.js';

/**
 * The optimizers of TF's `tf.tpu.experimental.embedding` (`SGD`, `Adagrad`,
 * `AdagradMomentum`, `Adam`, `FTRL`). Each validates its options in its constructor
 * (errors name the option: InvalidArgumentError for TF's ValueError,
 * InvalidTypeError for TypeError) and maps them onto a core optimizer spec
 * (`createOptimizer`), whose fused per-row update the backend runs. Instances are
 * immutable and may be shared by several tables.
 *
 * Update order per touched row (core): g = clip(g, clipvalue); g += weightDecay * w
 * (weightDecay = weightDecayFactor, times the learning rate when
 * `multiplyWeightDecayFactorByLearningRate`); the optimizer's update of slots and w;
 * w = clip(w, clipWeightMin, clipWeightMax).
 */

/** A number, or a function called with no arguments once per step (TF's callable learning rate). */
export type LearningRateInput = number | (() => number);

/** Gradient clip: `c` -> [-c, c], or `[min, max]` where `null` leaves that side open. */
export type ClipValue = number | readonly [number | null, number | null];

/**
 * What `slotVariableCreationFn` returns for one slot: a constant (every row starts
 * at it) or the whole slot table, `vocabularySize * dim` floats row-major (a
 * `Float32Array`, `number[]` or float32 `Tensor` of shape `[vocabularySize, dim]`).
 */
export type SlotValue = number | Float32Array | readonly number[] | Tensor;

/** The table a `slotVariableCreationFn` creates slots for. */
export interface SlotCreationTable {
  /** The table's resolved name (`table_{i}` when unnamed). */
  readonly name: string;
  /** Rows of the table. */
  readonly vocabularySize: number;
  /** Floats per row. */
  readonly dim: number;
  /** The user's TableConfig. */
  readonly config: TableConfig;
}

/**
 * TF's `slot_variable_creation_fn(table, slot_names, slot_initializers)`: called once
 * per table at build time with the optimizer's slot names (in order) and their
 * default initial values; returns an object with one {@link SlotValue} per slot name.
 */
export type SlotVariableCreationFn = (
  table: SlotCreationTable,
  slotNames: readonly string[],
  slotInitialValues: readonly number[],
) => Record<string, SlotValue>;

/** Options every optimizer takes (TF's `_Optimizer` arguments, camelCase). */
export interface CommonOptimizerOptions {
  /** TF `learning_rate`: a number >= 0, or a function called once per step. Default per optimizer (SGD 0.01, the others 0.001). */
  learningRate?: LearningRateInput | null;
  /** Default true. Updates are always accumulated over the global batch here; `clipvalue` needs it true (as TF). */
  useGradientAccumulation?: boolean | null;
  /** TF `clip_weight_min`: lower bound of the updated weights. Default none. */
  clipWeightMin?: number | null;
  /** TF `clip_weight_max`: upper bound of the updated weights. Default none. */
  clipWeightMax?: number | null;
  /** TF `weight_decay_factor`: `g += weightDecayFactor * w` before the update. Default none. */
  weightDecayFactor?: number | null;
  /** TF `multiply_weight_decay_factor_by_learning_rate`: scale the weight decay by the learning rate. Default false. */
  multiplyWeightDecayFactorByLearningRate?: boolean | null;
  /** TF `clipvalue`: gradient clip, see {@link ClipValue}. Default none. */
  clipvalue?: ClipValue | null;
  /** TF `slot_variable_creation_fn`: initial slot values per table, see {@link SlotVariableCreationFn}. Default: each slot at its initial value. */
  slotVariableCreationFn?: SlotVariableCreationFn | null;
}

const COMMON_KEYS = [
  'learningRate',
  'useGradientAccumulation',
  'clipWeightMin',
  'clipWeightMax',
  'weightDecayFactor',
  'multiplyWeightDecayFactorByLearningRate',
  'clipvalue',
  'slotVariableCreationFn',
] as const;

/** An optimizer's checked options, `undefined`/`null` values dropped (what subclasses hand to the base constructor). */
export type RawOptimizerOptions = Record<string, unknown>;

/** Checks the options object and its keys; drops `undefined`/`null` values (= defaults). */
function readOptions(options: unknown, className: string, extraKeys: readonly string[]): RawOptimizerOptions {
  const o = checkOptions<RawOptimizerOptions>(options, [...COMMON_KEYS, ...extraKeys], 'options', { expected: `an options object for ${className}` });
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
}

/**
 * Base class of this package's optimizers (TF's `_Optimizer`). Only instances of its
 * subclasses are accepted by `TPUEmbedding`.
 */
export abstract class EmbeddingOptimizer {
  /** The core optimizer kind this maps to. */
  abstract readonly kind: OptimizerKind;
  /** The learning rate as given (a number or a function), else the optimizer's default. */
  readonly learningRate: LearningRateInput;
  /** TF `use_gradient_accumulation` as resolved. */
  readonly useGradientAccumulation: boolean;
  /** Lower bound of the updated weights; null when unset. */
  readonly clipWeightMin: number | null;
  /** Upper bound of the updated weights; null when unset. */
  readonly clipWeightMax: number | null;
  /** Weight decay factor; null when unset. */
  readonly weightDecayFactor: number | null;
  /** Whether the weight decay is scaled by the learning rate. */
  readonly multiplyWeightDecayFactorByLearningRate: boolean;
  /** Gradient clip as given (a frozen pair for `[min, max]`); null when unset. */
  readonly clipvalue: ClipValue | null;
  /** The slot creation function; null when unset. */
  readonly slotVariableCreationFn: SlotVariableCreationFn | null;
  /** The validated core spec (`createOptimizer`) handed to `EmbeddingTable.applyGradients`. */
  readonly spec: OptimizerSpec;
  #lrStep = 0;
  #lrValue = 0;

  protected constructor(kind: OptimizerKind, o: RawOptimizerOptions, hyper: Partial<OptimizerHyper>) {
    if (new.target === EmbeddingOptimizer) throw new UnsupportedError('EmbeddingOptimizer is abstract: construct SGD, Adagrad, AdagradMomentum, Adam or FTRL');
    const lr = o.learningRate;
    if (lr !== undefined && typeof lr !== 'number' && typeof lr !== 'function') {
      throw invalidParameter('learningRate', 'a number or a function () => number', lr, InvalidTypeError);
    }
    const fn = o.slotVariableCreationFn;
    if (fn !== undefined && typeof fn !== 'function') {
      throw invalidParameter('slotVariableCreationFn', 'a function, undefined or null', fn, InvalidTypeError);
    }
    this.spec = createOptimizer(kind, {
      learningRate: typeof lr === 'function' ? (step: number) => this.learningRateAt(step) : (lr as number | undefined),
      useGradientAccumulation: o.useGradientAccumulation as boolean | undefined,
      clipWeightMin: o.clipWeightMin as number | undefined,
      clipWeightMax: o.clipWeightMax as number | undefined,
      weightDecayFactor: o.weightDecayFactor as number | undefined,
      multiplyWeightDecayFactorByLearningRate: o.multiplyWeightDecayFactorByLearningRate as boolean | undefined,
      clipvalue: o.clipvalue as ClipValue | undefined,
      ...hyper,
    });
    this.learningRate = (lr as LearningRateInput | undefined) ?? (this.spec.learningRate as number);
    this.useGradientAccumulation = this.spec.useGradientAccumulation;
    this.clipWeightMin = (o.clipWeightMin as number | undefined) ?? null;
    this.clipWeightMax = (o.clipWeightMax as number | undefined) ?? null;
    this.weightDecayFactor = (o.weightDecayFactor as number | undefined) ?? null;
    this.multiplyWeightDecayFactorByLearningRate = this.spec.multiplyWeightDecayFactorByLearningRate;
    const cv = o.clipvalue as ClipValue | undefined;
    this.clipvalue = cv === undefined ? null : typeof cv === 'number' ? cv : Object.freeze([cv[0], cv[1]] as const);
    this.slotVariableCreationFn = (fn as SlotVariableCreationFn | undefined) ?? null;
  }

  /** Slot names in order (`accumulators`, `momenta`, ...). */
  get slotNames(): readonly string[] {
    return this.spec.slots.names;
  }

  /** Default initial value of each slot. */
  get slotInitialValues(): readonly number[] {
    return this.spec.slots.initial;
  }

  /**
   * The learning rate of `step`: a number as is; a function is called once per step
   * (later calls for the same step return the cached value).
   * @throws InvalidArgumentError when the function does not return a finite number >= 0
   */
  learningRateAt(step: number): number {
    const lr = this.learningRate;
    if (typeof lr === 'number') return lr;
    if (this.#lrStep !== step) {
      const v = lr();
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
        throw invalidParameter('the value returned by learningRate()', 'a finite number >= 0', v);
      }
      this.#lrValue = v;
      this.#lrStep = step;
    }
    return this.#lrValue;
  }
}

function bool(o: RawOptimizerOptions, key: string, fallback: boolean): boolean {
  const v = o[key] ?? fallback;
  if (typeof v !== 'boolean') throw invalidParameter(key, 'a boolean', v, InvalidTypeError);
  return v;
}

/** Plain SGD: `w -= lr * g`. Default learningRate 0.01. No slots. */
export class SGD extends EmbeddingOptimizer {
  readonly kind = 'sgd' as const;
  constructor(options?: CommonOptimizerOptions | null) {
    super('sgd', readOptions(options, 'SGD', []), {});
  }
}

export interface AdagradOptions extends CommonOptimizerOptions {
  /** Initial value of the `accumulators` slot. Default 0.1; must be > 0. */
  initialAccumulatorValue?: number | null;
}

/** Adagrad: `acc += g²; w -= lr * g / sqrt(acc)`. Default learningRate 0.001. Slot `accumulators`. */
export class Adagrad extends EmbeddingOptimizer {
  readonly kind = 'adagrad' as const;
  /** Initial value of the `accumulators` slot. */
  readonly initialAccumulatorValue: number;
  constructor(options?: AdagradOptions | null) {
    const o = readOptions(options, 'Adagrad', ['initialAccumulatorValue']);
    super('adagrad', o, { initialAccumulatorValue: o.initialAccumulatorValue as number | undefined });
    this.initialAccumulatorValue = this.spec.hyper.initialAccumulatorValue;
  }
}

export interface AdagradMomentumOptions extends CommonOptimizerOptions {
  /** Default 0. */
  momentum?: number | null;
  /** Default false. */
  useNesterov?: boolean | null;
  /** Preconditioner exponent, > 0. Default 2. */
  exponent?: number | null;
  /** Accumulator decay in (0, 1]; 1 = plain sum. Default 1. */
  beta2?: number | null;
  /** > 0. Default 1e-10. */
  epsilon?: number | null;
}

/**
 * Adagrad with momentum (TF's `AdagradMomentum`): `acc = beta2 == 1 ? acc + g² :
 * beta2*acc + (1-beta2)*g²; m = momentum*m + g*(acc+eps)^(-1/exponent);
 * w -= lr * (useNesterov ? momentum*m + g*(acc+eps)^(-1/exponent) : m)`.
 * Default learningRate 0.001. Slots `accumulators`, `momenta` (both 0).
 */
export class AdagradMomentum extends EmbeddingOptimizer {
  readonly kind = 'adagradMomentum' as const;
  /** Momentum factor. */
  readonly momentum: number;
  /** Nesterov momentum. */
  readonly useNesterov: boolean;
  /** Preconditioner exponent. */
  readonly exponent: number;
  /** Accumulator decay (1 = plain sum). */
  readonly beta2: number;
  /** Added to the accumulator in the preconditioner. */
  readonly epsilon: number;
  constructor(options?: AdagradMomentumOptions | null) {
    const o = readOptions(options, 'AdagradMomentum', ['momentum', 'useNesterov', 'exponent', 'beta2', 'epsilon']);
    const eps = o.epsilon ?? 1e-10;
    if (typeof eps !== 'number' || !Number.isFinite(eps) || eps <= 0) throw invalidParameter('epsilon', 'a number > 0', eps);
    super('adagradMomentum', o, {
      momentum: o.momentum as number | undefined,
      useNesterov: bool(o, 'useNesterov', false),
      exponent: o.exponent as number | undefined,
      beta2: o.beta2 as number | undefined,
      epsilon: eps,
    });
    const h = this.spec.hyper;
    this.momentum = h.momentum;
    this.useNesterov = h.useNesterov;
    this.exponent = h.exponent;
    this.beta2 = h.beta2;
    this.epsilon = h.epsilon;
  }
}

export interface AdamOptions extends CommonOptimizerOptions {
  /** In [0, 1). Default 0.9. */
  beta1?: number | null;
  /** In [0, 1). Default 0.999. */
  beta2?: number | null;
  /** > 0. Default 1e-7. */
  epsilon?: number | null;
  /** Default true: only touched rows are updated. false: every row is updated every step (needs useGradientAccumulation). */
  lazyAdam?: boolean | null;
  /** Default true: `w -= lr*m/sqrt(v + eps²)`; false: `w -= lr*m/(sqrt(v) + eps)`. */
  sumInsideSqrt?: boolean | null;
}

/**
 * Adam without bias correction (as TF's TPU Adam): `m = b1*m + (1-b1)*g;
 * v = b2*v + (1-b2)*g²; w -= lr*m/sqrt(v + eps²)` (see `sumInsideSqrt`).
 * Default learningRate 0.001. Slots `momenta`, `velocities` (both 0).
 */
export class Adam extends EmbeddingOptimizer {
  readonly kind = 'adam' as const;
  /** Decay of `momenta`. */
  readonly beta1: number;
  /** Decay of `velocities`. */
  readonly beta2: number;
  /** Epsilon of the denominator (see `sumInsideSqrt`). */
  readonly epsilon: number;
  /** Only touched rows are updated. */
  readonly lazyAdam: boolean;
  /** `w -= lr*m/sqrt(v + eps²)` when true, `lr*m/(sqrt(v) + eps)` when false. */
  readonly sumInsideSqrt: boolean;
  constructor(options?: AdamOptions | null) {
    const o = readOptions(options, 'Adam', ['beta1', 'beta2', 'epsilon', 'lazyAdam', 'sumInsideSqrt']);
    const lazy = bool(o, 'lazyAdam', true);
    const acc = bool(o, 'useGradientAccumulation', true);
    super('adam', o, {
      beta1: o.beta1 as number | undefined,
      beta2: o.beta2 as number | undefined,
      epsilon: o.epsilon as number | undefined,
      lazyAdam: lazy,
      sumInsideSqrt: bool(o, 'sumInsideSqrt', true),
    });
    if (!lazy && !acc) {
      throw invalidParameter('lazyAdam', 'true when useGradientAccumulation is false (non-lazy Adam needs gradient accumulation)', lazy);
    }
    const h = this.spec.hyper;
    this.beta1 = h.beta1;
    this.beta2 = h.beta2;
    this.epsilon = h.epsilon;
    this.lazyAdam = h.lazyAdam;
    this.sumInsideSqrt = h.sumInsideSqrt;
  }
}

export interface FTRLOptions extends CommonOptimizerOptions {
  /** <= 0. Default -0.5. */
  learningRatePower?: number | null;
  /** L1 strength, >= 0. Default 0. Alias `l1`. */
  l1RegularizationStrength?: number | null;
  /** L2 strength, >= 0. Default 0. Alias `l2`. */
  l2RegularizationStrength?: number | null;
  /** Alias of `l1RegularizationStrength`. */
  l1?: number | null;
  /** Alias of `l2RegularizationStrength`. */
  l2?: number | null;
  /** >= 0. Default 0. */
  beta?: number | null;
  /** > 0. Default 0.1. */
  initialAccumulatorValue?: number | null;
  /** Only false is supported. */
  multiplyLinearByLearningRate?: boolean | null;
  /** Only false is supported. */
  allowZeroAccumulator?: boolean | null;
}

function alias(o: RawOptimizerOptions, long: string, short: string): number | undefined {
  const a = o[long];
  const b = o[short];
  if (a !== undefined && b !== undefined && a !== b) {
    throw invalidParameter(short, `unset or equal to ${long} (${String(a)}); they are the same option`, b);
  }
  const v = a ?? b;
  if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
    throw invalidParameter(a !== undefined ? long : short, 'a number >= 0', v);
  }
  return v as number | undefined;
}

/**
 * FTRL (TF's TPU FTRL, see core.md): `acc' = acc + g²; sigma = (acc'^(-p) - acc^(-p))/lr;
 * linear += g - sigma*w; quad = acc'^(-p)/lr + beta/lr + 2*l2;
 * w = |linear| <= l1 ? 0 : -(linear - sign(linear)*l1)/quad` with `p = learningRatePower`.
 * Default learningRate 0.001. Slots `accumulators` (initialAccumulatorValue), `linears` (0).
 */
export class FTRL extends EmbeddingOptimizer {
  readonly kind = 'ftrl' as const;
  /** TF `learning_rate_power` (`p`). */
  readonly learningRatePower: number;
  /** L1 strength. */
  readonly l1RegularizationStrength: number;
  /** L2 strength. */
  readonly l2RegularizationStrength: number;
  /** TF `beta`. */
  readonly beta: number;
  /** Initial value of the `accumulators` slot. */
  readonly initialAccumulatorValue: number;
  /** Always false (true is not supported). */
  readonly multiplyLinearByLearningRate = false;
  /** Always false (true is not supported). */
  readonly allowZeroAccumulator = false;
  constructor(options?: FTRLOptions | null) {
    const o = readOptions(options, 'FTRL', [
      'learningRatePower',
      'l1RegularizationStrength',
      'l2RegularizationStrength',
      'l1',
      'l2',
      'beta',
      'initialAccumulatorValue',
      'multiplyLinearByLearningRate',
      'allowZeroAccumulator',
    ]);
    for (const k of ['multiplyLinearByLearningRate', 'allowZeroAccumulator']) {
      if (bool(o, k, false)) throw new UnsupportedError(`Expected ${k} to be false (true is not supported) but received true`, { argument: k });
    }
    super('ftrl', o, {
      learningRatePower: o.learningRatePower as number | undefined,
      l1: alias(o, 'l1RegularizationStrength', 'l1'),
      l2: alias(o, 'l2RegularizationStrength', 'l2'),
      beta: o.beta as number | undefined,
      initialAccumulatorValue: o.initialAccumulatorValue as number | undefined,
    });
    const h = this.spec.hyper;
    this.learningRatePower = h.learningRatePower;
    this.l1RegularizationStrength = h.l1;
    this.l2RegularizationStrength = h.l2;
    this.beta = h.beta;
    this.initialAccumulatorValue = h.initialAccumulatorValue;
  }

  /** Alias of `l1RegularizationStrength`. */
  get l1(): number {
    return this.l1RegularizationStrength;
  }

  /** Alias of `l2RegularizationStrength`. */
  get l2(): number {
    return this.l2RegularizationStrength;
  }
}
