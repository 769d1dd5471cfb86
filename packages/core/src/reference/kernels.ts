import type { Bag, LookupCombiner } from '../combiners.js';
import type { Keys } from '../dtypes.js';
import type { ResolvedOptimizer } from '../optimizers.js';

/**
 * Pure per-row kernels of the reference backend, reused by other table
 * implementations (store-redis, ...). No state, no validation: inputs are trusted.
 *
 * Precision rule (the native backends follow it too, so results agree to ~1e-6
 * relative): weights and slots are stored as float32; every formula is evaluated in
 * double (JS numbers) reading the stored float32 values, and its result is rounded
 * to float32 when it is stored. A slot updated earlier in the same row update is
 * read back as its stored (rounded) float32 value by later formulas. Values that
 * are never stored (the clipped and decayed gradient, Adadelta's `d`, FTRL's
 * `sigma`/`quad`) stay in double.
 */

const f32 = Math.fround;

/**
 * One row's fused optimizer update, in place. `w` [dim] is the row, `slots[i]` the
 * row's i-th slot ([dim] or [1] per the layout of `opt.kind`), `g` [dim] the row's
 * gradient already summed over its occurrences in the step.
 *
 * Order (optimizers.ts): g = clip(g, clipGradMin, clipGradMax); g += weightDecay * w;
 * the kind's update of slots and w; w = clip(w, clipWeightMin, clipWeightMax) (the
 * clip is applied in double before the float32 store).
 */
export function applyOptimizerRow(opt: ResolvedOptimizer, w: Float32Array, slots: Float32Array[], g: Float32Array): void {
  const dim = w.length;
  const lr = opt.lr;
  const grad = new Float64Array(dim);
  for (let i = 0; i < dim; i++) {
    let x = g[i]!;
    if (x < opt.clipGradMin) x = opt.clipGradMin;
    if (x > opt.clipGradMax) x = opt.clipGradMax;
    grad[i] = x + opt.weightDecay * w[i]!;
  }
  const store = (i: number, v: number): void => {
    if (v < opt.clipWeightMin) v = opt.clipWeightMin;
    if (v > opt.clipWeightMax) v = opt.clipWeightMax;
    w[i] = v;
  };
  switch (opt.kind) {
    case 'sgd':
      for (let i = 0; i < dim; i++) store(i, w[i]! - lr * grad[i]!);
      return;
    case 'adagrad': {
      const acc = slots[0]!;
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        acc[i] = acc[i]! + gi * gi;
        store(i, w[i]! - (lr * gi) / Math.sqrt(acc[i]!));
      }
      return;
    }
    case 'adagradMomentum': {
      const [acc, mom] = slots as [Float32Array, Float32Array];
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        acc[i] = opt.beta2 === 1 ? acc[i]! + gi * gi : opt.beta2 * acc[i]! + (1 - opt.beta2) * gi * gi;
        const scaled = gi * Math.pow(acc[i]! + opt.epsilon, -1 / opt.exponent);
        mom[i] = opt.momentum * mom[i]! + scaled;
        const upd = opt.useNesterov ? opt.momentum * mom[i]! + scaled : mom[i]!;
        store(i, w[i]! - lr * upd);
      }
      return;
    }
    case 'adam': {
      const [m, v] = slots as [Float32Array, Float32Array];
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        m[i] = opt.beta1 * m[i]! + (1 - opt.beta1) * gi;
        v[i] = opt.beta2 * v[i]! + (1 - opt.beta2) * gi * gi;
        const denom = opt.sumInsideSqrt ? Math.sqrt(v[i]! + opt.epsilon * opt.epsilon) : Math.sqrt(v[i]!) + opt.epsilon;
        store(i, w[i]! - (lr * m[i]!) / denom);
      }
      return;
    }
    case 'ftrl': {
      const [acc, lin] = slots as [Float32Array, Float32Array];
      const p = opt.learningRatePower;
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        const accOld = acc[i]!;
        const accNew = f32(accOld + gi * gi);
        const sigma = (Math.pow(accNew, -p) - Math.pow(accOld, -p)) / lr;
        lin[i] = lin[i]! + gi - sigma * w[i]!;
        const l = lin[i]!;
        const quad = Math.pow(accNew, -p) / lr + opt.beta / lr + 2 * opt.l2;
        store(i, Math.abs(l) <= opt.l1 ? 0 : -(l - Math.sign(l) * opt.l1) / quad);
        acc[i] = accNew;
      }
      return;
    }
    case 'rowWiseAdagrad': {
      const acc = slots[0]!;
      let sq = 0;
      for (let i = 0; i < dim; i++) sq += grad[i]! * grad[i]!;
      acc[0] = acc[0]! + sq / dim;
      const denom = Math.sqrt(acc[0]!) + opt.epsilon;
      for (let i = 0; i < dim; i++) store(i, w[i]! - (lr * grad[i]!) / denom);
      return;
    }
    case 'momentum': {
      const m = slots[0]!;
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        m[i] = opt.momentum * m[i]! + gi;
        store(i, w[i]! - lr * (opt.useNesterov ? gi + opt.momentum * m[i]! : m[i]!));
      }
      return;
    }
    case 'adamax': {
      const [m, u] = slots as [Float32Array, Float32Array];
      const scale = lr / (1 - Math.pow(opt.beta1, opt.step));
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        m[i] = opt.beta1 * m[i]! + (1 - opt.beta1) * gi;
        u[i] = Math.max(opt.beta2 * u[i]!, Math.abs(gi));
        store(i, w[i]! - (scale * m[i]!) / (u[i]! + opt.epsilon));
      }
      return;
    }
    case 'adadelta': {
      const [a, au] = slots as [Float32Array, Float32Array];
      for (let i = 0; i < dim; i++) {
        const gi = grad[i]!;
        a[i] = opt.rho * a[i]! + (1 - opt.rho) * gi * gi;
        const d = (Math.sqrt(au[i]! + opt.epsilon) / Math.sqrt(a[i]! + opt.epsilon)) * gi;
        au[i] = opt.rho * au[i]! + (1 - opt.rho) * d * d;
        store(i, w[i]! - lr * d);
      }
      return;
    }
  }
}

/**
 * Embedding-bag reduction (core.md "Combiners"), one output row per bag row.
 * `getRow(j)` returns the embedding of bag entry j (the row of `bag.keys[j]`,
 * [dim]; a view is fine, it is only read).
 *
 * Arithmetic: per row, in double, entries in bag order: each row e_j is first
 * clipped when `maxNorm` > 0 and its L2 norm n exceeds it (e_j * maxNorm / n, as
 * TF's clip_by_norm); then sum = Σ w_j e_j, and `mean` divides by Σ w_j, `sqrtn`
 * by sqrt(Σ w_j²); a zero denominator gives zeros (div-no-nan), a row without
 * entries gives zeros. `max` / `min`: the element-wise maximum / minimum of the
 * (clipped) w_j e_j. The result is rounded to float32 once. Returns [nrows * dim].
 */
export function combineBag(
  getRow: (entry: number) => ArrayLike<number>,
  bag: Bag<Keys>,
  dim: number,
  combiner: LookupCombiner,
  maxNorm: number,
): Float32Array {
  const nrows = bag.rowSplits.length - 1;
  const out = new Float32Array(nrows * dim);
  const acc = new Float64Array(dim);
  // max / min keep the first entry's value unless a later one is strictly greater / smaller
  const extreme = combiner === 'max' ? 1 : combiner === 'min' ? -1 : 0;
  for (let r = 0; r < nrows; r++) {
    acc.fill(0);
    let wsum = 0;
    let wsq = 0;
    for (let j = bag.rowSplits[r]!; j < bag.rowSplits[r + 1]!; j++) {
      const e = getRow(j);
      const wj = bag.weights ? bag.weights[j]! : 1;
      wsum += wj;
      wsq += wj * wj;
      let scale = wj;
      if (maxNorm > 0) {
        let n2 = 0;
        for (let c = 0; c < dim; c++) n2 += e[c]! * e[c]!;
        const norm = Math.sqrt(n2);
        if (norm > maxNorm) scale = (wj * maxNorm) / norm;
      }
      if (extreme === 0) for (let c = 0; c < dim; c++) acc[c] = acc[c]! + scale * e[c]!;
      else if (j === bag.rowSplits[r]) for (let c = 0; c < dim; c++) acc[c] = scale * e[c]!;
      else {
        for (let c = 0; c < dim; c++) {
          const x = scale * e[c]!;
          if (extreme * x > extreme * acc[c]!) acc[c] = x;
        }
      }
    }
    let div = 1;
    if (combiner === 'mean') div = wsum;
    else if (combiner === 'sqrtn') div = Math.sqrt(wsq);
    if (div === 0) continue;
    for (let c = 0; c < dim; c++) out[r * dim + c] = acc[c]! / div;
  }
  return out;
}

/**
 * Sums duplicate keys' gradients: returns the unique keys in order of first
 * appearance and their summed gradients [u * dim], each sum accumulated in float32
 * in order of appearance (acc = fround(acc + g)).
 */
export function dedupeGradients(keys: Keys, grads: Float32Array, dim: number): {
  /** The distinct keys, in order of first appearance. */
  unique: (bigint | number)[];
  /** Their summed gradients, [unique.length * dim]. */
  sums: Float32Array;
} {
  const index = new Map<bigint | number, number>();
  const unique: (bigint | number)[] = [];
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    if (!index.has(k)) {
      index.set(k, unique.length);
      unique.push(k);
    }
  }
  const sums = new Float32Array(unique.length * dim);
  for (let i = 0; i < keys.length; i++) {
    const u = index.get(keys[i]!)!;
    for (let c = 0; c < dim; c++) sums[u * dim + c] = sums[u * dim + c]! + grads[i * dim + c]!;
  }
  return { unique, sums };
}
