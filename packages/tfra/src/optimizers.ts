import {
  checkBoolean,
  checkOptions,
  createOptimizer,
  FailedPreconditionError,
  InvalidArgumentError,
  UnsupportedError,
  InvalidTypeError,
  invalidParameter,
  type OptimizerKind,
  type OptimizerOptions,
  type OptimizerSpec,
  validateValues,
} from '@embedstack/core';
import { currentRecord, getModelMode, holdRecord, type RecordLease, ShadowVariable } from './shadow.js';
import { bind, checkBindable, trainStep } from './training.js';
import type { VariableValues } from './values.js';
import { stateOf } from './variableState.js';

/** A number, or a Keras schedule: a function of the 0-based iteration count. */
export type LearningRateInput = number | ((iteration: number) => number);

/** One `[gradient, trainable]` pair; the gradient has the trainable's last lookup shape (ids.shape + [dim]). */
export type GradAndVar = readonly [VariableValues, ShadowVariable];

/** Options every tfra optimizer takes. */
export interface CommonOptions {
  /** Learning rate (Keras `learning_rate`): a number >= 0, or a function of the 0-based iteration. Default per optimizer (0.01 SGD/Momentum, 0.001 the others). */
  learningRate?: LearningRateInput;
  /** Keras gradient clipping to [-clipvalue, clipvalue] before the update. */
  clipvalue?: number | null;
  /** Optimizer name (slot variables are named `<variable>/<name>/<slot>`). */
  name?: string;
}

function num(v: unknown, argument: string, fallback: number): number {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number') throw invalidParameter(argument, 'a finite number', v, InvalidTypeError);
  if (!Number.isFinite(v)) throw invalidParameter(argument, 'a finite number', v);
  return v;
}

/** Marks an optimizer as wrapped by DynamicEmbeddingOptimizer (set by Optimizer's static block; module-private). */
let wrap: (o: Optimizer, bpV2: boolean, synchronous: boolean) => void;

/**
 * Base of `de.optimizers.*`: Keras optimizers whose sparse updates run in core
 * (one fused update per touched row; slots beside the rows). Train dynamic
 * embeddings only after wrapping with `DynamicEmbeddingOptimizer(opt)`.
 */
export abstract class Optimizer {
  /** Optimizer name (`options.name`, else the Keras class name). */
  readonly name: string;
  /** Learning rate as given: a number, or a function of the 0-based iteration. */
  readonly learningRate: LearningRateInput;
  /** Gradient clipping bound, or null when not clipping. */
  readonly clipvalue: number | null;
  /** Steps applied so far (Keras `iterations`). */
  iterations = 0;
  #wrapped = false;
  #bpV2 = false;
  #synchronous = false;
  #spec: OptimizerSpec | null = null;

  protected constructor(options: CommonOptions, defaults: { learningRate: number; name: string }) {
    if (new.target === Optimizer) throw new UnsupportedError('Optimizer is abstract: construct one of de.optimizers (SGD, Adam, ...)');
    const lr = options.learningRate ?? defaults.learningRate;
    if (typeof lr !== 'function' && (typeof lr !== 'number' || !Number.isFinite(lr) || lr < 0)) {
      throw invalidParameter('learningRate', 'a number >= 0 or a function of the iteration', lr, typeof lr === 'number' ? undefined : InvalidTypeError);
    }
    this.learningRate = lr;
    const clip = options.clipvalue ?? null;
    if (clip !== null && (typeof clip !== 'number' || !Number.isFinite(clip) || clip < 0)) {
      throw invalidParameter('clipvalue', 'a number >= 0', clip, typeof clip === 'number' ? undefined : InvalidTypeError);
    }
    this.clipvalue = clip;
    const name = options.name ?? defaults.name;
    if (typeof name !== 'string' || name.length === 0) throw invalidParameter('name', 'a non-empty string', name, InvalidTypeError);
    this.name = name;
  }

  /** Keras slot names, in the order of the slots beside each row. */
  abstract get slotNames(): readonly string[];

  /** The core optimizer for this Keras optimizer (built once). */
  protected abstract buildSpec(): OptimizerSpec;

  /** Core's validated optimizer spec (learning rate already bias-corrected where Keras does it). */
  get spec(): OptimizerSpec {
    return (this.#spec ??= this.buildSpec());
  }

  /**
   * Builds the core spec now, so that hyperparameters core refuses (beta1 outside
   * [0, 1), a non-positive initialAccumulatorValue, ...) are reported by the
   * constructor, not by the first `applyGradients`. Every concrete optimizer calls it last.
   * @throws InvalidArgumentError naming the hyperparameter
   */
  protected validate(): void {
    void this.spec;
  }

  /** Is this optimizer wrapped by DynamicEmbeddingOptimizer (able to train dynamic embeddings)? */
  get dynamicEmbedding(): boolean {
    return this.#wrapped;
  }

  /** Set by DynamicEmbeddingOptimizer's `bpV2`: rows are updated by adding deltas. */
  get bpV2(): boolean {
    return this.#bpV2;
  }

  /** Set by DynamicEmbeddingOptimizer's `synchronous`: a step's shards are applied one after another. */
  get synchronous(): boolean {
    return this.#synchronous;
  }

  /** Keras `get_slot_names()`: a copy of {@link Optimizer.slotNames}. */
  getSlotNames(): string[] {
    return this.slotNames.slice();
  }

  /** Core learning rate: a constant, or a function of core's 1-based step. */
  protected coreLearningRate(): number | ((step: number) => number) {
    const lr = this.learningRate;
    return typeof lr === 'function' ? (step: number) => lr(step - 1) : lr;
  }

  /** Core options every optimizer shares (`clipvalue` when set). */
  protected common(): OptimizerOptions {
    return this.clipvalue === null ? {} : { clipvalue: this.clipvalue };
  }

  /**
   * One training step: for each `[grad, trainable]`, updates exactly the rows of
   * the trainable's last lookup (ids first seen are inserted with their initial
   * value, then updated), and their slots; then `iterations` += 1. Every pair is
   * validated before any row is written.
   * @throws FailedPreconditionError (not wrapped, inference mode, no lookup recorded, second optimizer on a variable);
   *   InvalidArgumentError for an empty list (Keras: "No gradients provided for any variable");
   *   InvalidTypeError / ShapeMismatchError for bad pairs
   */
  async applyGradients(gradsAndVars: readonly GradAndVar[]): Promise<void> {
    if (!this.#wrapped) {
      throw new FailedPreconditionError(
        `Optimizer ${this.name} cannot train dynamic embeddings: wrap it first with de.DynamicEmbeddingOptimizer(optimizer)`,
      );
    }
    if (getModelMode() !== 'train') {
      throw new FailedPreconditionError('Expected train mode to apply gradients but the model is in inference mode (call de.enableTrainMode())');
    }
    if (!Array.isArray(gradsAndVars)) throw invalidParameter('gradsAndVars', 'an array of [grad, trainable] pairs', gradsAndVars, InvalidTypeError);
    // Keras's "No gradients provided for any variable" (a ValueError): no step is counted.
    if (gradsAndVars.length === 0) throw new InvalidArgumentError('No gradients provided for any variable: gradsAndVars is empty (no step is applied or counted)', { argument: 'gradsAndVars' });
    // Each pair's record is held from here: the step trains the lookup current now, even if
    // a lookup of the same trainable records while earlier pairs train (a pipelined next batch).
    const leases: RecordLease[] = [];
    try {
      const work = gradsAndVars.map((pair, i) => {
        if (!Array.isArray(pair) || pair.length !== 2) throw invalidParameter(`gradsAndVars[${i}]`, 'a [grad, trainable] pair', pair, InvalidTypeError);
        const [grad, t] = pair as [unknown, unknown];
        if (!(t instanceof ShadowVariable)) {
          throw invalidParameter(`gradsAndVars[${i}][1]`, 'a trainable from embeddingLookup (getTrainableByName)', t, InvalidTypeError);
        }
        if (currentRecord(t) === null) {
          throw new FailedPreconditionError(`Trainable "${t.name}" has no recorded lookup: look ids up with embeddingLookup in train mode first`, {
            argument: `gradsAndVars[${i}][1]`,
          });
        }
        const g = validateValues(grad, currentRecord(t)!.shape, t.dim, `gradsAndVars[${i}][0]`);
        const lease = holdRecord(t)!;
        leases.push(lease);
        return { t, g, lease, state: stateOf(t.params)! };
      });
      // Every variable must be trainable by this optimizer before any row is written.
      for (const { t, state } of work) if (t.params.trainable) checkBindable(state, this);
      const spec = this.spec;
      const step = this.iterations + 1;
      for (const { t, g, lease, state } of work) {
        if (!t.params.trainable) continue;
        const b = await bind(state, this, spec, this.slotNames, this.name, t.params.bpV2 || this.#bpV2);
        await trainStep(state, b, t, lease, g, step, this.#synchronous);
      }
      this.iterations = step;
    } finally {
      for (const lease of leases) lease.release();
    }
  }

  static {
    wrap = (o, bpV2, synchronous) => {
      o.#wrapped = true;
      o.#bpV2 = bpV2;
      o.#synchronous = synchronous;
    };
  }
}

function build(kind: OptimizerKind, options: OptimizerOptions): OptimizerSpec {
  return createOptimizer(kind, options);
}

/** Options of {@link SGD} (Keras `SGD`). */
export interface SGDOptions extends CommonOptions {
  /** Keras momentum; > 0 keeps a 'momentum' slot. Default 0. */
  momentum?: number;
  /** Nesterov momentum (Keras `nesterov`). Default false. */
  nesterov?: boolean;
}

/** Keras SGD (learningRate 0.01, momentum 0): w -= lr*g; with momentum m = mu*m + g, w -= lr*m (nesterov: lr*(g + mu*m)). */
export class SGD extends Optimizer {
  /** Momentum factor (0: plain SGD, no slot). */
  readonly momentum: number;
  /** Nesterov momentum. */
  readonly nesterov: boolean;
  constructor(options: SGDOptions = {}) {
    const o = checkOptions(options, ['learningRate', 'clipvalue', 'name', 'momentum', 'nesterov']) as SGDOptions;
    super(o, { learningRate: 0.01, name: 'SGD' });
    this.momentum = num(o.momentum, 'momentum', 0);
    if (this.momentum < 0) throw invalidParameter('momentum', 'a number >= 0', this.momentum);
    this.nesterov = checkBoolean(o.nesterov, 'nesterov', false);
    this.validate();
  }
  get slotNames(): readonly string[] {
    return this.momentum > 0 ? ['momentum'] : [];
  }
  protected buildSpec(): OptimizerSpec {
    const lr = this.coreLearningRate();
    return this.momentum > 0
      ? build('momentum', { ...this.common(), learningRate: lr, momentum: this.momentum, useNesterov: this.nesterov })
      : build('sgd', { ...this.common(), learningRate: lr });
  }
}

/** Options of {@link Momentum} (TF `MomentumOptimizer`). */
export interface MomentumOptions extends CommonOptions {
  /** Default 0 (Keras SGD's). */
  momentum?: number;
  /** Nesterov momentum (TF `use_nesterov`). Default false. */
  useNesterov?: boolean;
}

/** TF's Momentum (learningRate 0.01): m = mu*m + g; w -= lr*m (nesterov: lr*(g + mu*m)). Slot 'momentum'. */
export class Momentum extends Optimizer {
  /** Momentum factor `mu`. */
  readonly momentum: number;
  /** Nesterov momentum. */
  readonly useNesterov: boolean;
  constructor(options: MomentumOptions = {}) {
    const o = checkOptions(options, ['learningRate', 'clipvalue', 'name', 'momentum', 'useNesterov']) as MomentumOptions;
    super(o, { learningRate: 0.01, name: 'Momentum' });
    this.momentum = num(o.momentum, 'momentum', 0);
    if (this.momentum < 0) throw invalidParameter('momentum', 'a number >= 0', this.momentum);
    this.useNesterov = checkBoolean(o.useNesterov, 'useNesterov', false);
    this.validate();
  }
  get slotNames(): readonly string[] {
    return ['momentum'];
  }
  protected buildSpec(): OptimizerSpec {
    return build('momentum', { ...this.common(), learningRate: this.coreLearningRate(), momentum: this.momentum, useNesterov: this.useNesterov });
  }
}

/** Options of {@link Adagrad} (Keras `Adagrad`). */
export interface AdagradOptions extends CommonOptions {
  /** Starting value of the 'accumulator' slot (Keras `initial_accumulator_value`). Default 0.1. */
  initialAccumulatorValue?: number;
  /** Keras `epsilon`; accepted, not used by core's Adagrad. Default 1e-7. */
  epsilon?: number;
}

/**
 * Keras Adagrad (learningRate 0.001, initialAccumulatorValue 0.1): acc += g²;
 * w -= lr*g/sqrt(acc). `epsilon` (1e-7) is accepted but core's Adagrad adds none
 * (a relative difference below 1e-6 for acc >= 0.1).
 */
export class Adagrad extends Optimizer {
  /** Starting value of the 'accumulator' slot. */
  readonly initialAccumulatorValue: number;
  /** Keras `epsilon` (accepted, not used by core's Adagrad). */
  readonly epsilon: number;
  constructor(options: AdagradOptions = {}) {
    const o = checkOptions(options, ['learningRate', 'clipvalue', 'name', 'initialAccumulatorValue', 'epsilon']) as AdagradOptions;
    super(o, { learningRate: 0.001, name: 'Adagrad' });
    this.initialAccumulatorValue = num(o.initialAccumulatorValue, 'initialAccumulatorValue', 0.1);
    this.epsilon = num(o.epsilon, 'epsilon', 1e-7);
    this.validate();
  }
  get slotNames(): readonly string[] {
    return ['accumulator'];
  }
  protected buildSpec(): OptimizerSpec {
    return build('adagrad', { ...this.common(), learningRate: this.coreLearningRate(), initialAccumulatorValue: this.initialAccumulatorValue });
  }
}

/** Options of {@link Adamax} (Keras `Adamax`); {@link AdamOptions} extend them. */
export interface AdamaxOptions extends CommonOptions {
  /** Decay of the first moment 'm' (Keras `beta_1`). Default 0.9. */
  beta1?: number;
  /** Decay of the second moment 'v' (Keras `beta_2`). Default 0.999. */
  beta2?: number;
  /** Added to the denominator (Keras `epsilon`). Default 1e-7. */
  epsilon?: number;
}

/** Options of {@link Adam} (Keras `Adam`). */
export interface AdamOptions extends AdamaxOptions {
  /** Not supported (Keras default false). */
  amsgrad?: boolean;
}

/** Options and slots shared by Adam and Adamax (Keras defaults 0.001, 0.9, 0.999, 1e-7; slots 'm', 'v'). */
abstract class MomentsOptimizer extends Optimizer {
  /** Decay of the first moment 'm'. */
  readonly beta1: number;
  /** Decay of the second moment 'v'. */
  readonly beta2: number;
  /** Added to the denominator. */
  readonly epsilon: number;
  protected constructor(options: AdamOptions, name: string, extra: readonly string[]) {
    const o = checkOptions(options, ['learningRate', 'clipvalue', 'name', 'beta1', 'beta2', 'epsilon', ...extra]) as AdamOptions;
    super(o, { learningRate: 0.001, name });
    this.beta1 = num(o.beta1, 'beta1', 0.9);
    this.beta2 = num(o.beta2, 'beta2', 0.999);
    this.epsilon = num(o.epsilon, 'epsilon', 1e-7);
  }
  get slotNames(): readonly string[] {
    return ['m', 'v'];
  }
}

/**
 * Keras Adam (learningRate 0.001, beta1 0.9, beta2 0.999, epsilon 1e-7), sparse
 * (only touched rows' slots decay): m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g²;
 * w -= lr_t * m / (sqrt(v) + eps) with lr_t = lr * sqrt(1-b2^t) / (1-b1^t), t the step.
 * Slots 'm', 'v'.
 */
export class Adam extends MomentsOptimizer {
  constructor(options: AdamOptions = {}) {
    super(options, 'Adam', ['amsgrad']);
    if (checkBoolean(options?.amsgrad, 'amsgrad', false)) throw invalidParameter('amsgrad', 'false (AMSGrad is not supported)', true);
    this.validate();
  }
  protected buildSpec(): OptimizerSpec {
    const base = this.coreLearningRate();
    const { beta1: b1, beta2: b2 } = this;
    const lr = (step: number) => (typeof base === 'function' ? base(step) : base) * (Math.sqrt(1 - b2 ** step) / (1 - b1 ** step));
    return build('adam', { ...this.common(), learningRate: lr, beta1: b1, beta2: b2, epsilon: this.epsilon, sumInsideSqrt: false, lazyAdam: true });
  }
}

/** Options of {@link FTRL} (Keras `Ftrl`). */
export interface FTRLOptions extends CommonOptions {
  /** Keras `learning_rate_power`. Default -0.5. */
  learningRatePower?: number;
  /** Starting value of the 'accumulator' slot (Keras `initial_accumulator_value`). Default 0.1. */
  initialAccumulatorValue?: number;
  /** L1 regularization (Keras `l1_regularization_strength`). Default 0. */
  l1RegularizationStrength?: number;
  /** L2 regularization (Keras `l2_regularization_strength`). Default 0. */
  l2RegularizationStrength?: number;
  /** Keras `beta`. Default 0. */
  beta?: number;
  /** Only 0 is supported (Keras default). */
  l2ShrinkageRegularizationStrength?: number;
}

/** Keras Ftrl (learningRate 0.001, learningRatePower -0.5, initialAccumulatorValue 0.1, l1 = l2 = beta = 0). Slots 'accumulator', 'linear'. */
export class FTRL extends Optimizer {
  /** Keras `learning_rate_power`. */
  readonly learningRatePower: number;
  /** Starting value of the 'accumulator' slot. */
  readonly initialAccumulatorValue: number;
  /** L1 regularization strength. */
  readonly l1RegularizationStrength: number;
  /** L2 regularization strength. */
  readonly l2RegularizationStrength: number;
  /** Keras `beta`. */
  readonly beta: number;
  constructor(options: FTRLOptions = {}) {
    const o = checkOptions(options, [
      'learningRate',
      'clipvalue',
      'name',
      'learningRatePower',
      'initialAccumulatorValue',
      'l1RegularizationStrength',
      'l2RegularizationStrength',
      'beta',
      'l2ShrinkageRegularizationStrength',
    ]) as FTRLOptions;
    super(o, { learningRate: 0.001, name: 'Ftrl' });
    this.learningRatePower = num(o.learningRatePower, 'learningRatePower', -0.5);
    this.initialAccumulatorValue = num(o.initialAccumulatorValue, 'initialAccumulatorValue', 0.1);
    this.l1RegularizationStrength = num(o.l1RegularizationStrength, 'l1RegularizationStrength', 0);
    this.l2RegularizationStrength = num(o.l2RegularizationStrength, 'l2RegularizationStrength', 0);
    // checked here, under the user's names (core's spec calls them l1 / l2)
    if (this.l1RegularizationStrength < 0) throw invalidParameter('l1RegularizationStrength', 'a number >= 0', this.l1RegularizationStrength);
    if (this.l2RegularizationStrength < 0) throw invalidParameter('l2RegularizationStrength', 'a number >= 0', this.l2RegularizationStrength);
    this.beta = num(o.beta, 'beta', 0);
    if (num(o.l2ShrinkageRegularizationStrength, 'l2ShrinkageRegularizationStrength', 0) !== 0) {
      throw invalidParameter('l2ShrinkageRegularizationStrength', '0 (shrinkage is not supported)', o.l2ShrinkageRegularizationStrength);
    }
    this.validate();
  }
  get slotNames(): readonly string[] {
    return ['accumulator', 'linear'];
  }
  protected buildSpec(): OptimizerSpec {
    return build('ftrl', {
      ...this.common(),
      learningRate: this.coreLearningRate(),
      learningRatePower: this.learningRatePower,
      initialAccumulatorValue: this.initialAccumulatorValue,
      l1: this.l1RegularizationStrength,
      l2: this.l2RegularizationStrength,
      beta: this.beta,
    });
  }
}

/** Keras Adamax (learningRate 0.001, beta1 0.9, beta2 0.999, epsilon 1e-7): m = b1*m+(1-b1)*g; u = max(b2*u, |g|); w -= lr/(1-b1^t)*m/(u+eps). Slots 'm', 'v'. */
export class Adamax extends MomentsOptimizer {
  constructor(options: AdamaxOptions = {}) {
    super(options, 'Adamax', []);
    this.validate();
  }
  protected buildSpec(): OptimizerSpec {
    return build('adamax', { ...this.common(), learningRate: this.coreLearningRate(), beta1: this.beta1, beta2: this.beta2, epsilon: this.epsilon });
  }
}

/** Options of {@link Adadelta} (Keras `Adadelta`). */
export interface AdadeltaOptions extends CommonOptions {
  /** Decay of the accumulators (Keras `rho`). Default 0.95. */
  rho?: number;
  /** Added for numerical stability (Keras `epsilon`). Default 1e-7. */
  epsilon?: number;
}

/** Keras Adadelta (learningRate 0.001, rho 0.95, epsilon 1e-7). Slots 'accum_grad', 'accum_var'. */
export class Adadelta extends Optimizer {
  /** Decay of the accumulators. */
  readonly rho: number;
  /** Keras `epsilon`. */
  readonly epsilon: number;
  constructor(options: AdadeltaOptions = {}) {
    const o = checkOptions(options, ['learningRate', 'clipvalue', 'name', 'rho', 'epsilon']) as AdadeltaOptions;
    super(o, { learningRate: 0.001, name: 'Adadelta' });
    this.rho = num(o.rho, 'rho', 0.95);
    this.epsilon = num(o.epsilon, 'epsilon', 1e-7);
    this.validate();
  }
  get slotNames(): readonly string[] {
    return ['accum_grad', 'accum_var'];
  }
  protected buildSpec(): OptimizerSpec {
    return build('adadelta', { ...this.common(), learningRate: this.coreLearningRate(), rho: this.rho, epsilon: this.epsilon });
  }
}

/** `de.optimizers`: the Keras optimizers, constructed with `new`. */
export const optimizers = {
  /** {@link SGD} */
  SGD,
  /** {@link Momentum} */
  Momentum,
  /** {@link Adagrad} */
  Adagrad,
  /** {@link Adam} */
  Adam,
  /** {@link FTRL} */
  FTRL,
  /** {@link Adamax} */
  Adamax,
  /** {@link Adadelta} */
  Adadelta,
} as const;

/** Options of {@link DynamicEmbeddingOptimizer} (TFRA's `DynamicEmbeddingOptimizer(bp_v2, synchronous)`). */
export interface DynamicEmbeddingOptimizerOptions {
  /** Update rows by adding deltas (accum) instead of setting them, for every variable this optimizer trains. Default false. */
  bpV2?: boolean | null;
  /**
   * TFRA: all-reduce dense gradients over Horovod workers. Here (one process) it
   * applies the shards of a step one after another instead of concurrently. Default false.
   */
  synchronous?: boolean | null;
}

/**
 * TFRA's wrapper that makes an optimizer able to train dynamic embeddings.
 * Returns the optimizer itself (as TFRA does), now trainable with
 * `applyGradients([[grad, trainable], ...])`.
 * @throws InvalidTypeError when `optimizer` is not one of de.optimizers
 */
export function DynamicEmbeddingOptimizer<O extends Optimizer>(optimizer: O, options: DynamicEmbeddingOptimizerOptions = {}): O {
  if (!(optimizer instanceof Optimizer)) {
    throw invalidParameter('optimizer', 'an optimizer from de.optimizers (SGD, Momentum, Adagrad, Adam, FTRL, Adamax, Adadelta)', optimizer, InvalidTypeError);
  }
  const o = checkOptions(options, ['bpV2', 'synchronous']);
  const bpV2 = checkBoolean(o.bpV2, 'bpV2', false);
  const synchronous = checkBoolean(o.synchronous, 'synchronous', false);
  wrap(optimizer, bpV2, synchronous);
  return optimizer;
}
