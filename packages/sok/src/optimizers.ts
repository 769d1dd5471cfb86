import { checkBoolean, checkNumber, checkOptions, createOptimizer, type LearningRate, type OptimizerSpec } from '@embedstack/core';

/**
 * The optimizers `OptimizerWrapper` takes (TF/Keras names and defaults). Each maps
 * onto one of core's optimizer kinds, whose update runs fused in the backend; the
 * classes only translate options. `learningRate` may be a function of the step.
 */
export abstract class SokOptimizer {
  /** The class name ('SGD', 'Adam', ...): the `<Opt>` of dump file names. */
  abstract readonly name: string;
  /** The core optimizer spec (kind, hyper-parameters, slot layout). */
  abstract readonly spec: OptimizerSpec;
}

/** The option every SOK optimizer takes. */
export interface LrOption {
  /** number >= 0, or a function of the step (1, 2, ...). */
  learningRate?: LearningRate;
}

/** SGD: w -= lr*g. `momentum` > 0 makes it Momentum (TF's MomentumOptimizer update). Defaults: lr 0.01, momentum 0. */
export class SGD extends SokOptimizer {
  readonly name = 'SGD';
  readonly spec: OptimizerSpec;
  constructor(options: LrOption & { momentum?: number; nesterov?: boolean } = {}) {
    super();
    const o = checkOptions<LrOption & { momentum?: number; nesterov?: boolean }>(options, ['learningRate', 'momentum', 'nesterov']);
    const lr = o.learningRate ?? 0.01;
    // checked here under its own name (core's option is useNesterov)
    const nesterov = checkBoolean(o.nesterov, 'nesterov', false);
    this.spec = (o.momentum ?? 0) === 0 && !nesterov ? createOptimizer('sgd', { learningRate: lr }) : createOptimizer('momentum', { learningRate: lr, momentum: o.momentum ?? 0, useNesterov: nesterov });
  }
}

/** Momentum: m = mu*m + g; w -= lr*(nesterov ? g + mu*m : m). Slot 'momenta'. Defaults: lr 0.01, momentum 0.9, useNesterov false. */
export class Momentum extends SokOptimizer {
  readonly name = 'Momentum';
  readonly spec: OptimizerSpec;
  constructor(options: LrOption & { momentum?: number; useNesterov?: boolean } = {}) {
    super();
    const o = checkOptions<LrOption & { momentum?: number; useNesterov?: boolean }>(options, ['learningRate', 'momentum', 'useNesterov']);
    this.spec = createOptimizer('momentum', { learningRate: o.learningRate ?? 0.01, momentum: o.momentum ?? 0.9, useNesterov: o.useNesterov ?? false });
  }
}

/** Adagrad: acc += g²; w -= lr*g/sqrt(acc). Slot 'accumulators'. Defaults: lr 0.001, initialAccumulatorValue 0.1 (core's update has no epsilon). */
export class Adagrad extends SokOptimizer {
  readonly name = 'Adagrad';
  readonly spec: OptimizerSpec;
  constructor(options: LrOption & { initialAccumulatorValue?: number } = {}) {
    super();
    const o = checkOptions<LrOption & { initialAccumulatorValue?: number }>(options, ['learningRate', 'initialAccumulatorValue']);
    this.spec = createOptimizer('adagrad', { learningRate: o.learningRate ?? 0.001, initialAccumulatorValue: o.initialAccumulatorValue ?? 0.1 });
  }
}

/** Adam's options (lr, beta1, beta2, epsilon). */
export interface AdamOptions extends LrOption {
  /** Decay of the first moment (Keras `beta_1`). Default 0.9. */
  beta1?: number;
  /** Decay of the second moment / norm (Keras `beta_2`). Default 0.999. */
  beta2?: number;
  /** Added to the denominator (Keras `epsilon`). Default 1e-7. */
  epsilon?: number;
}

/**
 * Lazy Adam (only the rows in the batch move, their slots too), Keras's update:
 * m = b1*m+(1-b1)*g; v = b2*v+(1-b2)*g²; w -= lr_t*m/(sqrt(v)+eps) with
 * lr_t = lr*sqrt(1-b2^t)/(1-b1^t), t the wrapper's step (core adam with
 * sumInsideSqrt false; the bias correction is core's per-step learning rate).
 * Slots 'momenta', 'velocities'. Defaults: lr 0.001, beta1 0.9, beta2 0.999, epsilon 1e-7.
 */
export class Adam extends SokOptimizer {
  readonly name = 'Adam';
  readonly spec: OptimizerSpec;
  constructor(options: AdamOptions = {}) {
    super();
    const o = checkOptions<AdamOptions>(options, ['learningRate', 'beta1', 'beta2', 'epsilon']);
    const lr = o.learningRate ?? 0.001;
    const b1 = o.beta1 ?? 0.9;
    const b2 = o.beta2 ?? 0.999;
    // Validate the hyper-parameters first (createOptimizer names them), then add the bias correction.
    createOptimizer('adam', { learningRate: lr, beta1: b1, beta2: b2, epsilon: o.epsilon ?? 1e-7 });
    const base = (t: number) => (typeof lr === 'function' ? lr(t) : lr);
    this.spec = createOptimizer('adam', {
      learningRate: (t: number) => (base(t) * Math.sqrt(1 - Math.pow(b2, t))) / (1 - Math.pow(b1, t)),
      beta1: b1,
      beta2: b2,
      epsilon: o.epsilon ?? 1e-7,
      sumInsideSqrt: false,
      lazyAdam: true,
    });
  }
}

/** Adamax (Keras): m = b1*m+(1-b1)*g; u = max(b2*u, |g|); w -= lr/(1-b1^t)*m/(u+eps). Slots 'momenta', 'norms'. Defaults: lr 0.001, 0.9, 0.999, 1e-7. */
export class Adamax extends SokOptimizer {
  readonly name = 'Adamax';
  readonly spec: OptimizerSpec;
  constructor(options: AdamOptions = {}) {
    super();
    const o = checkOptions<AdamOptions>(options, ['learningRate', 'beta1', 'beta2', 'epsilon']);
    this.spec = createOptimizer('adamax', { learningRate: o.learningRate ?? 0.001, beta1: o.beta1 ?? 0.9, beta2: o.beta2 ?? 0.999, epsilon: o.epsilon ?? 1e-7 });
  }
}

/** Adadelta (TF): a = rho*a+(1-rho)*g²; d = sqrt(au+eps)/sqrt(a+eps)*g; au = rho*au+(1-rho)*d²; w -= lr*d. Slots 'accumulators', 'accumulatorUpdates'. Defaults: lr 0.001, rho 0.95, epsilon 1e-7. */
export class Adadelta extends SokOptimizer {
  readonly name = 'Adadelta';
  readonly spec: OptimizerSpec;
  constructor(options: LrOption & { rho?: number; epsilon?: number } = {}) {
    super();
    const o = checkOptions<LrOption & { rho?: number; epsilon?: number }>(options, ['learningRate', 'rho', 'epsilon']);
    this.spec = createOptimizer('adadelta', { learningRate: o.learningRate ?? 0.001, rho: o.rho ?? 0.95, epsilon: o.epsilon ?? 1e-7 });
  }
}

/** Ftrl's options (TF's FtrlOptimizer arguments, camelCase). */
export interface FtrlOptions extends LrOption {
  /** TF `learning_rate_power` (`p`). Default -0.5. */
  learningRatePower?: number;
  /** Starting value of the 'accumulators' slot. Default 0.1. */
  initialAccumulatorValue?: number;
  /** L1 strength. Default 0. */
  l1RegularizationStrength?: number;
  /** L2 strength. Default 0. */
  l2RegularizationStrength?: number;
  /** TF `beta`. Default 0. */
  beta?: number;
}

/**
 * FTRL-proximal (TF's Ftrl): acc' = acc+g²; sigma = (acc'^(-p) - acc^(-p))/lr;
 * linear += g - sigma*w; w = |linear| <= l1 ? 0 : -(linear - sign(linear)*l1)/(acc'^(-p)/lr + beta/lr + 2*l2).
 * Slots 'accumulators', 'linears'. Defaults: lr 0.001, learningRatePower -0.5,
 * initialAccumulatorValue 0.1, l1/l2RegularizationStrength 0, beta 0.
 */
export class Ftrl extends SokOptimizer {
  readonly name = 'Ftrl';
  readonly spec: OptimizerSpec;
  constructor(options: FtrlOptions = {}) {
    super();
    const o = checkOptions<FtrlOptions>(options, ['learningRate', 'learningRatePower', 'initialAccumulatorValue', 'l1RegularizationStrength', 'l2RegularizationStrength', 'beta']);
    this.spec = createOptimizer('ftrl', {
      learningRate: o.learningRate ?? 0.001,
      learningRatePower: o.learningRatePower ?? -0.5,
      initialAccumulatorValue: o.initialAccumulatorValue ?? 0.1,
      // checked here under their own names (core's options are l1 and l2)
      l1: checkNumber(o.l1RegularizationStrength, 'l1RegularizationStrength', { min: 0, fallback: 0 }),
      l2: checkNumber(o.l2RegularizationStrength, 'l2RegularizationStrength', { min: 0, fallback: 0 }),
      beta: o.beta ?? 0,
    });
  }
}

/** `sok.optimizers`: the seven optimizers (FTRL is also exported under Keras's name Ftrl). */
export const optimizers = {
  /** {@link SGD} */
  SGD,
  /** {@link Momentum} */
  Momentum,
  /** {@link Adagrad} */
  Adagrad,
  /** {@link Adam} */
  Adam,
  /** {@link Adamax} */
  Adamax,
  /** {@link Adadelta} */
  Adadelta,
  /** {@link Ftrl} */
  Ftrl,
  /** {@link Ftrl}, under Keras's name. */
  FTRL: Ftrl,
} as const;
