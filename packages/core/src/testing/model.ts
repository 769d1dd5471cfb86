/**
 * Independent float64 model of the optimizers (core.md's formulas written out
 * plainly), used by the conformance suite to compute expected numbers. It does not
 * share code with any backend or with core's reference kernels.
 */

export interface ModelOptimizer {
  /** Which update rule (core's optimizer kinds). */
  kind: 'sgd' | 'adagrad' | 'adagradMomentum' | 'adam' | 'ftrl' | 'rowWiseAdagrad' | 'momentum' | 'adamax' | 'adadelta';
  /** Learning rate, or a function of the 1-based step. */
  lr: number | ((step: number) => number);
  /** Adam / Adamax first-moment decay. */
  beta1?: number;
  /** Adam / Adamax second-moment decay. */
  beta2?: number;
  /** Added to denominators for stability. */
  epsilon?: number;
  /** Momentum coefficient (momentum, adagradMomentum). */
  momentum?: number;
  /** Nesterov momentum. */
  nesterov?: boolean;
  /** adagradMomentum's exponent of the accumulator. */
  exponent?: number;
  /** Adam: epsilon inside the square root. */
  sumInsideSqrt?: boolean;
  /** FTRL L1 regularization strength. */
  l1?: number;
  /** FTRL L2 regularization strength. */
  l2?: number;
  /** FTRL beta. */
  beta?: number;
  /** FTRL learning-rate power. */
  lrPower?: number;
  /** Adadelta decay. */
  rho?: number;
  /** Gradient clip range [min, max]. */
  clipGrad?: [number, number];
  /** Weight decay. */
  weightDecay?: number;
  /** Whether the weight decay is multiplied by the learning rate. */
  decayTimesLr?: boolean;
  /** Weight clip range [min, max]. */
  clipWeight?: [number, number];
}

/** One row's state: weights and slots (each a plain array). */
export interface ModelRow {
  /** The row's weights. */
  w: number[];
  /** The row's optimizer slots, in the optimizer's slot order. */
  slots: number[][];
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/** Applies one step to `row` in place, `g` being the row's summed gradient. */
export function modelStep(o: ModelOptimizer, row: ModelRow, gIn: number[], step: number): void {
  const lr = typeof o.lr === 'function' ? o.lr(step) : o.lr;
  const w = row.w;
  const s = row.slots;
  const n = w.length;
  const wd = (o.weightDecay ?? 0) * (o.decayTimesLr ? lr : 1);
  const g = gIn.map((x, i) => {
    const c = o.clipGrad ? clamp(x, o.clipGrad[0], o.clipGrad[1]) : x;
    return c + wd * w[i]!;
  });
  for (let i = 0; i < n; i++) {
    const gi = g[i]!;
    switch (o.kind) {
      case 'sgd':
        w[i] = w[i]! - lr * gi;
        break;
      case 'adagrad':
        s[0]![i] = s[0]![i]! + gi * gi;
        w[i] = w[i]! - (lr * gi) / Math.sqrt(s[0]![i]!);
        break;
      case 'adagradMomentum': {
        const b2 = o.beta2 ?? 1;
        const acc = b2 === 1 ? s[0]![i]! + gi * gi : b2 * s[0]![i]! + (1 - b2) * gi * gi;
        s[0]![i] = acc;
        const scaled = gi * Math.pow(acc + (o.epsilon ?? 1e-10), -1 / (o.exponent ?? 2));
        const mu = o.momentum ?? 0;
        s[1]![i] = mu * s[1]![i]! + scaled;
        const upd = o.nesterov ? mu * s[1]![i]! + scaled : s[1]![i]!;
        w[i] = w[i]! - lr * upd;
        break;
      }
      case 'adam': {
        const b1 = o.beta1 ?? 0.9;
        const b2 = o.beta2 ?? 0.999;
        const eps = o.epsilon ?? 1e-7;
        s[0]![i] = b1 * s[0]![i]! + (1 - b1) * gi;
        s[1]![i] = b2 * s[1]![i]! + (1 - b2) * gi * gi;
        const m = s[0]![i]!;
        const v = s[1]![i]!;
        w[i] = (o.sumInsideSqrt ?? true) ? w[i]! - (lr * m) / Math.sqrt(v + eps * eps) : w[i]! - (lr * m) / (Math.sqrt(v) + eps);
        break;
      }
      case 'ftrl': {
        const p = o.lrPower ?? -0.5;
        const acc = s[0]![i]!;
        const accNew = acc + gi * gi;
        const sigma = (Math.pow(accNew, -p) - Math.pow(acc, -p)) / lr;
        s[1]![i] = s[1]![i]! + gi - sigma * w[i]!;
        const lin = s[1]![i]!;
        const quad = Math.pow(accNew, -p) / lr + (o.beta ?? 0) / lr + 2 * (o.l2 ?? 0);
        const l1 = o.l1 ?? 0;
        w[i] = Math.abs(lin) <= l1 ? 0 : -(lin - Math.sign(lin) * l1) / quad;
        s[0]![i] = accNew;
        break;
      }
      case 'rowWiseAdagrad':
        break; // whole-row update below
      case 'momentum': {
        const mu = o.momentum ?? 0;
        s[0]![i] = mu * s[0]![i]! + gi;
        w[i] = w[i]! - lr * (o.nesterov ? gi + mu * s[0]![i]! : s[0]![i]!);
        break;
      }
      case 'adamax': {
        const b1 = o.beta1 ?? 0.9;
        const b2 = o.beta2 ?? 0.999;
        s[0]![i] = b1 * s[0]![i]! + (1 - b1) * gi;
        s[1]![i] = Math.max(b2 * s[1]![i]!, Math.abs(gi));
        w[i] = w[i]! - (lr / (1 - Math.pow(b1, step))) * (s[0]![i]! / (s[1]![i]! + (o.epsilon ?? 1e-7)));
        break;
      }
      case 'adadelta': {
        const rho = o.rho ?? 0.95;
        const eps = o.epsilon ?? 1e-7;
        s[0]![i] = rho * s[0]![i]! + (1 - rho) * gi * gi;
        const d = (Math.sqrt(s[1]![i]! + eps) / Math.sqrt(s[0]![i]! + eps)) * gi;
        s[1]![i] = rho * s[1]![i]! + (1 - rho) * d * d;
        w[i] = w[i]! - lr * d;
        break;
      }
    }
  }
  if (o.kind === 'rowWiseAdagrad') {
    const meanSq = g.reduce((a, x) => a + x * x, 0) / n;
    s[0]![0] = s[0]![0]! + meanSq;
    for (let i = 0; i < n; i++) w[i] = w[i]! - (lr * g[i]!) / (Math.sqrt(s[0]![0]!) + (o.epsilon ?? 1e-8));
  }
  if (o.clipWeight) for (let i = 0; i < n; i++) w[i] = clamp(w[i]!, o.clipWeight[0], o.clipWeight[1]);
}
