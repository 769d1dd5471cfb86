import { InvalidArgumentError, InvalidTypeError, invalidParameter } from './errors.js';
import { errorClassFor } from './validation.js';

/**
 * Sparse optimizers as validated, immutable spec objects. Formulas (core.md):
 * `g` is a row's gradient summed over its occurrences in the step. Per touched row,
 * in this order: g = clip(g, clipGradMin, clipGradMax); g += wd * w (wd =
 * weightDecayFactor, times lr when multiplyWeightDecayFactorByLearningRate);
 * the kind's update of slots and w; w = clip(w, clipWeightMin, clipWeightMax).
 *
 * | kind            | slots (initial)                         |
 * | sgd             | -                                       |
 * | adagrad         | accumulators (initialAccumulatorValue)  |
 * | adagradMomentum | accumulators (0), momenta (0)           |
 * | adam            | momenta (0), velocities (0)             |
 * | ftrl            | accumulators (initialAccumulatorValue), linears (0) |
 * | rowWiseAdagrad  | accumulators (width 1, 0)               |
 * | momentum        | momenta (0)                             |
 * | adamax          | momenta (0), norms (0)                  |
 * | adadelta        | accumulators (0), accumulatorUpdates (0)|
 *
 * momentum: m = mu*m + g; w -= lr*(nesterov ? g + mu*m : m)            (TF)
 * adamax:   m = b1*m+(1-b1)*g; u = max(b2*u, |g|); w -= lr/(1-b1^step) * m/(u+eps)   (TF/Keras)
 * adadelta: a = rho*a+(1-rho)*g²; d = sqrt(au+eps)/sqrt(a+eps)*g; au = rho*au+(1-rho)*d²; w -= lr*d
 * ftrl: quad = acc'^(-p)/lr + beta/lr + 2*l2 (beta as in TF's TPU FTRL).
 */
export type OptimizerKind =
  | 'sgd'
  | 'adagrad'
  | 'adagradMomentum'
  | 'adam'
  | 'ftrl'
  | 'rowWiseAdagrad'
  | 'momentum'
  | 'adamax'
  | 'adadelta';

/** A learning rate: a number, or a function of the 1-based step evaluated once per step (it must return a finite number). */
export type LearningRate = number | ((step: number) => number);

/** Options every optimizer takes (TPU embedding's common options). */
export interface CommonOptimizerOptions {
  /** number, or a function of the step evaluated once per step. */
  learningRate?: LearningRate;
  /** Clip weights after the update. Default: none. */
  clipWeightMin?: number | null;
  /** Clip weights to at most this after the update. Default: none. */
  clipWeightMax?: number | null;
  /** g += weightDecayFactor * w before the update. Default 0. */
  weightDecayFactor?: number | null;
  /** weight decay factor is multiplied by the step's learning rate. Default false. */
  multiplyWeightDecayFactorByLearningRate?: boolean;
  /** Gradient clip to [-c, c] or [min, max] (nulls = open). Needs useGradientAccumulation. */
  clipvalue?: number | readonly [number | null, number | null] | null;
  /** Default true (as TPU embedding). */
  useGradientAccumulation?: boolean;
}

/** Hyper-parameters of the optimizers (TPU embedding's names). Each optimizer reads only its own; defaults are in each field. */
export interface OptimizerHyper {
  /** Initial accumulator of adagrad, ftrl (> 0) and rowWiseAdagrad (>= 0). Default 0.1 (rowWiseAdagrad 0). */
  initialAccumulatorValue: number;
  /** adam / adamax first-moment decay, in [0, 1). Default 0.9. */
  beta1: number;
  /** adam / adamax second-moment decay, in [0, 1). Default 0.999. adagradMomentum's accumulator decay, in (0, 1]: default 1 (a plain sum). */
  beta2: number;
  /** Denominator guard of adam, adamax, adagradMomentum, adadelta, rowWiseAdagrad. Default 1e-7 (adagradMomentum 1e-10, rowWiseAdagrad 1e-8). */
  epsilon: number;
  /** Momentum of momentum and adagradMomentum, >= 0. Default 0. */
  momentum: number;
  /** Nesterov momentum for momentum and adagradMomentum. Default false. */
  useNesterov: boolean;
  /** adagradMomentum's root: the gradient is scaled by (accumulator + epsilon)^(-1/exponent). Default 2. */
  exponent: number;
  /** ftrl's L1 regularisation strength, >= 0. Default 0. */
  l1: number;
  /** ftrl's L2 regularisation strength, >= 0. Default 0. */
  l2: number;
  /** ftrl's beta (added to the denominator as beta / lr), >= 0. Default 0. */
  beta: number;
  /** ftrl's learning-rate power, <= 0. Default -0.5. */
  learningRatePower: number;
  /** adam's denominator: sqrt(v + epsilon^2) when true, sqrt(v) + epsilon when false. Default true. */
  sumInsideSqrt: boolean;
  /** Accepted for TPU embedding's API; updates are always lazy (only the rows of the batch change) whatever its value. Default true. */
  lazyAdam: boolean;
  /** adadelta's decay, in [0, 1]. Default 0.95. */
  rho: number;
}

/** The optimizer slots stored beside each row: parallel arrays, one entry per slot. */
export interface SlotLayout {
  /** Slot names, e.g. `['accumulators']` for adagrad. */
  names: readonly string[];
  /** per slot: 'dim' (a full row) or 1 (one float per row) */
  widths: readonly ('dim' | 1)[];
  /** Initial value of each slot for a new row. */
  initial: readonly number[];
}

/** A validated optimizer: kind, hyper-parameters and common options. Immutable. */
export interface OptimizerSpec {
  /** Which optimizer. */
  readonly kind: OptimizerKind;
  /** Learning rate: a number, or a function of the step. */
  readonly learningRate: LearningRate;
  /** Every hyper-parameter, defaults filled in. */
  readonly hyper: Readonly<OptimizerHyper>;
  /** Weights are clipped to at least this after the update (-Infinity: none). */
  readonly clipWeightMin: number;
  /** Weights are clipped to at most this after the update (Infinity: none). */
  readonly clipWeightMax: number;
  /** g += weightDecayFactor * w before the update (0: none). */
  readonly weightDecayFactor: number;
  /** Whether weightDecayFactor is multiplied by the step's learning rate. */
  readonly multiplyWeightDecayFactorByLearningRate: boolean;
  /** Gradients are clipped to at least this (-Infinity: none; from clipvalue). */
  readonly clipGradMin: number;
  /** Gradients are clipped to at most this (Infinity: none; from clipvalue). */
  readonly clipGradMax: number;
  /** TPU embedding's gradient accumulation flag (clipvalue needs it). */
  readonly useGradientAccumulation: boolean;
  /** The slots this optimizer keeps beside each row. */
  readonly slots: SlotLayout;
}

/** What a backend receives for one step: all numbers, lr already evaluated. */
export interface ResolvedOptimizer extends OptimizerHyper {
  /** Which optimizer. */
  kind: OptimizerKind;
  /** The learning rate of this step. */
  lr: number;
  /** The step, integer >= 1. */
  step: number;
  /** Weight clip after the update (-Infinity: none). */
  clipWeightMin: number;
  /** Weight clip after the update (Infinity: none). */
  clipWeightMax: number;
  /** weightDecayFactor, already multiplied by lr when asked. */
  weightDecay: number;
  /** Gradient clip (-Infinity: none). */
  clipGradMin: number;
  /** Gradient clip (Infinity: none). */
  clipGradMax: number;
}

const DEFAULT_HYPER: OptimizerHyper = {
  initialAccumulatorValue: 0.1,
  beta1: 0.9,
  beta2: 0.999,
  epsilon: 1e-7,
  momentum: 0,
  useNesterov: false,
  exponent: 2,
  l1: 0,
  l2: 0,
  beta: 0,
  learningRatePower: -0.5,
  sumInsideSqrt: true,
  lazyAdam: true,
  rho: 0.95,
};

/** The options every kind takes (CommonOptimizerOptions); the others are DEFAULT_HYPER's. */
const COMMON_OPTIONS: readonly string[] = [
  'learningRate',
  'clipWeightMin',
  'clipWeightMax',
  'weightDecayFactor',
  'multiplyWeightDecayFactorByLearningRate',
  'clipvalue',
  'useGradientAccumulation',
];

const DEFAULT_LR: Record<OptimizerKind, number> = {
  sgd: 0.01,
  adagrad: 0.001,
  adagradMomentum: 0.001,
  adam: 0.001,
  ftrl: 0.001,
  rowWiseAdagrad: 0.01,
  momentum: 0.01,
  adamax: 0.001,
  adadelta: 0.001,
};

/** The slot layout of optimizer `kind` (sgd none; adagrad accumulators; adam momenta and velocities; ftrl accumulators and linears; rowWiseAdagrad one float per row; ...), with initial accumulators from `hyper`. */
export function slotLayoutOf(kind: OptimizerKind, hyper: OptimizerHyper): SlotLayout {
  switch (kind) {
    case 'sgd':
      return { names: [], widths: [], initial: [] };
    case 'adagrad':
      return { names: ['accumulators'], widths: ['dim'], initial: [hyper.initialAccumulatorValue] };
    case 'adagradMomentum':
      return { names: ['accumulators', 'momenta'], widths: ['dim', 'dim'], initial: [0, 0] };
    case 'adam':
      return { names: ['momenta', 'velocities'], widths: ['dim', 'dim'], initial: [0, 0] };
    case 'ftrl':
      return { names: ['accumulators', 'linears'], widths: ['dim', 'dim'], initial: [hyper.initialAccumulatorValue, 0] };
    case 'rowWiseAdagrad':
      return { names: ['accumulators'], widths: [1], initial: [hyper.initialAccumulatorValue] };
    case 'momentum':
      return { names: ['momenta'], widths: ['dim'], initial: [0] };
    case 'adamax':
      return { names: ['momenta', 'norms'], widths: ['dim', 'dim'], initial: [0, 0] };
    case 'adadelta':
      return { names: ['accumulators', 'accumulatorUpdates'], widths: ['dim', 'dim'], initial: [0, 0] };
  }
}

/** Floats of slot storage per row for a table of width `dim`. */
export function slotFloatsPerRow(slots: SlotLayout, dim: number): number {
  return slots.widths.reduce<number>((acc, w) => acc + (w === 'dim' ? dim : 1), 0);
}

function num(value: unknown, argument: string, test: (v: number) => boolean, expected: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || !test(value)) {
    throw invalidParameter(argument, expected, value, errorClassFor(value, 'number'));
  }
  return value;
}

/** Options of an optimizer builder: the common options plus any of its {@link OptimizerHyper} fields (null / undefined = default). */
export type OptimizerOptions = CommonOptimizerOptions & Partial<OptimizerHyper>;

/**
 * Builds a validated optimizer spec. Defaults: TPU embedding's for sgd, adagrad,
 * adagradMomentum, adam, ftrl; TF/Keras's for momentum, adamax, adadelta;
 * FBGEMM's spirit for rowWiseAdagrad (lr 0.01, eps 1e-8, accumulator 0).
 *
 * @throws InvalidTypeError (another JS type) / InvalidArgumentError (a bad value, an unknown option) naming the option
 */
export function createOptimizer(kind: OptimizerKind, options: OptimizerOptions | null = {}): OptimizerSpec {
  if (typeof kind !== 'string' || !Object.prototype.hasOwnProperty.call(DEFAULT_LR, kind)) throw invalidParameter('kind', `one of ${Object.keys(DEFAULT_LR).join(', ')}`, kind, errorClassFor(kind, 'string'));
  options ??= {}; // null: the defaults (spec: optional arguments may be null)
  if (typeof options !== 'object') {
    throw invalidParameter('options', 'an object', options, InvalidTypeError);
  }
  const o = options;
  for (const k of Object.keys(o)) {
    // a misspelt option (learning_rate, lr) would otherwise be its default, silently
    if (!COMMON_OPTIONS.includes(k) && !(k in DEFAULT_HYPER)) {
      throw invalidParameter(`options.${k}`, `one of the known options (${[...COMMON_OPTIONS, ...Object.keys(DEFAULT_HYPER)].join(', ')})`, k);
    }
  }
  const lr = o.learningRate ?? DEFAULT_LR[kind];
  if (typeof lr !== 'function') {
    // FTRL divides by the learning rate, so 0 is refused there.
    if (kind === 'ftrl') num(lr, 'learningRate', (v) => v > 0, 'a number > 0 or a function');
    else num(lr, 'learningRate', (v) => v >= 0, 'a number >= 0 or a function');
  }
  const hyper: OptimizerHyper = { ...DEFAULT_HYPER };
  if (kind === 'adagradMomentum') hyper.epsilon = 1e-10;
  if (kind === 'adagradMomentum') hyper.beta2 = 1;
  if (kind === 'rowWiseAdagrad') {
    hyper.epsilon = 1e-8;
    hyper.initialAccumulatorValue = 0;
  }
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined || v === null || !(k in DEFAULT_HYPER)) continue;
    Object.assign(hyper, { [k]: v }); // a known hyperparameter (checked by DEFAULT_HYPER); its value is checked below
  }
  const h = hyper;
  if (typeof h.useNesterov !== 'boolean') throw invalidParameter('useNesterov', 'a boolean', h.useNesterov, InvalidTypeError);
  if (typeof h.sumInsideSqrt !== 'boolean') throw invalidParameter('sumInsideSqrt', 'a boolean', h.sumInsideSqrt, InvalidTypeError);
  if (typeof h.lazyAdam !== 'boolean') throw invalidParameter('lazyAdam', 'a boolean', h.lazyAdam, InvalidTypeError);
  switch (kind) {
    case 'adagrad':
    case 'ftrl':
      num(h.initialAccumulatorValue, 'initialAccumulatorValue', (v) => v > 0, 'a number > 0');
      break;
    case 'rowWiseAdagrad':
      num(h.initialAccumulatorValue, 'initialAccumulatorValue', (v) => v >= 0, 'a number >= 0');
      num(h.epsilon, 'epsilon', (v) => v > 0, 'a number > 0');
      break;
    case 'adam':
    case 'adamax':
      num(h.beta1, 'beta1', (v) => v >= 0 && v < 1, 'a number in [0, 1)');
      num(h.beta2, 'beta2', (v) => v >= 0 && v < 1, 'a number in [0, 1)');
      num(h.epsilon, 'epsilon', (v) => v > 0, 'a number > 0');
      break;
    case 'adagradMomentum':
      num(h.momentum, 'momentum', (v) => v >= 0, 'a number >= 0');
      num(h.exponent, 'exponent', (v) => v > 0, 'a number > 0');
      num(h.beta2, 'beta2', (v) => v > 0 && v <= 1, 'a number in (0, 1]');
      num(h.epsilon, 'epsilon', (v) => v >= 0, 'a number >= 0');
      break;
    case 'momentum':
      num(h.momentum, 'momentum', (v) => v >= 0, 'a number >= 0');
      break;
    case 'adadelta':
      num(h.rho, 'rho', (v) => v >= 0 && v <= 1, 'a number in [0, 1]');
      num(h.epsilon, 'epsilon', (v) => v > 0, 'a number > 0');
      break;
    default:
      break;
  }
  if (kind === 'ftrl') {
    num(h.l1, 'l1', (v) => v >= 0, 'a number >= 0');
    num(h.l2, 'l2', (v) => v >= 0, 'a number >= 0');
    num(h.beta, 'beta', (v) => v >= 0, 'a number >= 0');
    num(h.learningRatePower, 'learningRatePower', (v) => v <= 0, 'a number <= 0');
  }
  const useAcc = o.useGradientAccumulation ?? true;
  if (typeof useAcc !== 'boolean') throw invalidParameter('useGradientAccumulation', 'a boolean', useAcc, InvalidTypeError);
  let clipGradMin = -Infinity;
  let clipGradMax = Infinity;
  if (o.clipvalue !== undefined && o.clipvalue !== null) {
    if (!useAcc) {
      throw invalidParameter('clipvalue', 'unset when useGradientAccumulation is false (clipping needs accumulation)', o.clipvalue);
    }
    if (typeof o.clipvalue === 'number') {
      num(o.clipvalue, 'clipvalue', (v) => v >= 0, 'a number >= 0 or a [min, max] pair');
      clipGradMin = -o.clipvalue;
      clipGradMax = o.clipvalue;
    } else if (Array.isArray(o.clipvalue) && o.clipvalue.length === 2) {
      const [lo, hi] = o.clipvalue;
      if (lo !== null) clipGradMin = num(lo, 'clipvalue[0]', () => true, 'a number or null');
      if (hi !== null) clipGradMax = num(hi, 'clipvalue[1]', () => true, 'a number or null');
      if (clipGradMin > clipGradMax) throw invalidParameter('clipvalue', 'min <= max', o.clipvalue);
    } else throw invalidParameter('clipvalue', 'a number or a [min, max] pair', o.clipvalue, Array.isArray(o.clipvalue) ? InvalidArgumentError : InvalidTypeError);
  }
  const cwMin = o.clipWeightMin ?? -Infinity;
  const cwMax = o.clipWeightMax ?? Infinity;
  if (typeof cwMin !== 'number' || Number.isNaN(cwMin)) throw invalidParameter('clipWeightMin', 'a number', cwMin, errorClassFor(cwMin, 'number'));
  if (typeof cwMax !== 'number' || Number.isNaN(cwMax)) throw invalidParameter('clipWeightMax', 'a number', cwMax, errorClassFor(cwMax, 'number'));
  if (cwMin > cwMax) throw invalidParameter('clipWeightMax', `>= clipWeightMin (${cwMin})`, cwMax);
  const wd = o.weightDecayFactor ?? 0;
  num(wd, 'weightDecayFactor', () => true, 'a finite number');
  const mult = o.multiplyWeightDecayFactorByLearningRate ?? false;
  if (typeof mult !== 'boolean') throw invalidParameter('multiplyWeightDecayFactorByLearningRate', 'a boolean', mult, InvalidTypeError);
  return Object.freeze({
    kind,
    learningRate: lr,
    hyper: Object.freeze(hyper),
    clipWeightMin: cwMin,
    clipWeightMax: cwMax,
    weightDecayFactor: wd,
    multiplyWeightDecayFactorByLearningRate: mult,
    clipGradMin,
    clipGradMax,
    useGradientAccumulation: useAcc,
    slots: Object.freeze(slotLayoutOf(kind, hyper)),
  });
}

/**
 * Builders of validated optimizer specs, one per kind: `optimizers.adagrad({ learningRate: 0.1 })`. Each is {@link createOptimizer} with its kind.
 * @throws InvalidArgumentError / InvalidTypeError naming the option
 */
export const optimizers = {
  /** Plain SGD: w -= lr * g. Default lr 0.01; no slots. */
  sgd: (o?: OptimizerOptions) => createOptimizer('sgd', o),
  /** Adagrad (slot: accumulators). Default lr 0.001, initialAccumulatorValue 0.1. */
  adagrad: (o?: OptimizerOptions) => createOptimizer('adagrad', o),
  /** Adagrad with momentum, TPU embedding's (slots: accumulators, momenta). Default lr 0.001, epsilon 1e-10, beta2 1. */
  adagradMomentum: (o?: OptimizerOptions) => createOptimizer('adagradMomentum', o),
  /** Adam, lazy (slots: momenta, velocities). Default lr 0.001, beta1 0.9, beta2 0.999, epsilon 1e-7. */
  adam: (o?: OptimizerOptions) => createOptimizer('adam', o),
  /** FTRL (slots: accumulators, linears). Default lr 0.001 (must be > 0), learningRatePower -0.5. */
  ftrl: (o?: OptimizerOptions) => createOptimizer('ftrl', o),
  /** Row-wise Adagrad, FBGEMM's (one accumulator float per row). Default lr 0.01, epsilon 1e-8, accumulator 0. */
  rowWiseAdagrad: (o?: OptimizerOptions) => createOptimizer('rowWiseAdagrad', o),
  /** SGD with momentum (slot: momenta). Default lr 0.01, momentum 0. */
  momentum: (o?: OptimizerOptions) => createOptimizer('momentum', o),
  /** Adamax (slots: momenta, norms). Default lr 0.001. */
  adamax: (o?: OptimizerOptions) => createOptimizer('adamax', o),
  /** Adadelta (slots: accumulators, accumulatorUpdates). Default lr 0.001, rho 0.95. */
  adadelta: (o?: OptimizerOptions) => createOptimizer('adadelta', o),
} as const;

/** Whether `value` looks like an optimizer spec (an object with a known `kind` and a `slots` layout), as the builders return. */
export function isOptimizerSpec(value: unknown): value is OptimizerSpec {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as OptimizerSpec).kind === 'string' &&
    (value as OptimizerSpec).kind in DEFAULT_LR &&
    typeof (value as OptimizerSpec).slots === 'object'
  );
}

/** Evaluates the learning rate for `step` (once per step) and flattens the spec. */
export function resolveOptimizer(spec: OptimizerSpec, step: number): ResolvedOptimizer {
  const lr = typeof spec.learningRate === 'function' ? spec.learningRate(step) : spec.learningRate;
  if (typeof lr !== 'number' || !Number.isFinite(lr)) {
    throw invalidParameter(`the result of learningRate(${step})`, 'a finite number', lr, errorClassFor(lr, 'number'));
  }
  return {
    ...spec.hyper,
    kind: spec.kind,
    lr,
    step,
    clipWeightMin: spec.clipWeightMin,
    clipWeightMax: spec.clipWeightMax,
    weightDecay: spec.multiplyWeightDecayFactorByLearningRate ? spec.weightDecayFactor * lr : spec.weightDecayFactor,
    clipGradMin: spec.clipGradMin,
    clipGradMax: spec.clipGradMax,
  };
}

/** Two layouts are compatible when they have the same slot names and widths. */
export function sameSlotLayout(a: SlotLayout, b: SlotLayout): boolean {
  return (
    a.names.length === b.names.length &&
    a.names.every((n, i) => n === b.names[i]) &&
    a.widths.every((w, i) => w === b.widths[i])
  );
}
