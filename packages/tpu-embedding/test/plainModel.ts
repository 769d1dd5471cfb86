// Test oracle (not exported): a plain, float64 re-implementation of the TPU embedding
// training step of the spec (combiners, backprop through combiner and weights, the
// optimizer formulas of core.md), written independently of the package's code.

export interface PlainOptimizer {
  kind: 'sgd' | 'adagrad' | 'adagradMomentum' | 'adam' | 'ftrl';
  lr: number;
  /** initial slot values, in the optimizer's slot order */
  slots: number[];
  clip?: [number, number];
  weightDecay?: number;
  multiplyWeightDecayByLr?: boolean;
  clipWeight?: [number, number];
  momentum?: number;
  nesterov?: boolean;
  exponent?: number;
  beta1?: number;
  beta2?: number;
  epsilon?: number;
  sumInsideSqrt?: boolean;
  nonLazy?: boolean;
  lrPower?: number;
  l1?: number;
  l2?: number;
  beta?: number;
}

export interface PlainTable {
  dim: number;
  combiner: 'sum' | 'mean' | 'sqrtn';
  w: number[][];
  /** s[slot][row][c] */
  s: number[][][];
  opt: PlainOptimizer;
}

export interface PlainFeature {
  table: string;
  ids: number[][];
  weights: number[][] | null;
}

export function plainTable(rows: number, dim: number, combiner: PlainTable['combiner'], init: Float32Array, opt: PlainOptimizer): PlainTable {
  const w = Array.from({ length: rows }, (_, r) => Array.from(init.subarray(r * dim, (r + 1) * dim)));
  const s = opt.slots.map((v) => Array.from({ length: rows }, () => new Array<number>(dim).fill(v)));
  return { dim, combiner, w, s, opt };
}

function scales(t: PlainTable, ids: number[], weights: number[] | null): number[] {
  const w = ids.map((_, j) => (weights ? weights[j]! : 1));
  let denom = 1;
  if (t.combiner === 'mean') denom = w.reduce((a, b) => a + b, 0);
  if (t.combiner === 'sqrtn') denom = Math.sqrt(w.reduce((a, b) => a + b * b, 0));
  return w.map((x) => (denom === 0 ? 0 : x / denom));
}

export function plainForward(tables: Record<string, PlainTable>, features: PlainFeature[]): number[][][] {
  return features.map((f) => {
    const t = tables[f.table]!;
    return f.ids.map((row, b) => {
      const sc = scales(t, row, f.weights ? f.weights[b]! : null);
      const out = new Array<number>(t.dim).fill(0);
      row.forEach((id, j) => t.w[id]!.forEach((v, c) => (out[c]! += sc[j]! * v)));
      return out;
    });
  });
}

function optimizerRow(o: PlainOptimizer, w: number[], slots: number[][], g0: number[]): void {
  const wd = (o.weightDecay ?? 0) * (o.multiplyWeightDecayByLr ? o.lr : 1);
  const g = g0.map((x, c) => {
    let v = x;
    if (o.clip) v = Math.min(o.clip[1], Math.max(o.clip[0], v));
    return v + wd * w[c]!;
  });
  for (let c = 0; c < w.length; c++) {
    const gi = g[c]!;
    let next: number;
    switch (o.kind) {
      case 'sgd':
        next = w[c]! - o.lr * gi;
        break;
      case 'adagrad':
        slots[0]![c]! += gi * gi;
        next = w[c]! - (o.lr * gi) / Math.sqrt(slots[0]![c]!);
        break;
      case 'adagradMomentum': {
        const b2 = o.beta2 ?? 1;
        slots[0]![c] = b2 === 1 ? slots[0]![c]! + gi * gi : b2 * slots[0]![c]! + (1 - b2) * gi * gi;
        const scaled = gi * Math.pow(slots[0]![c]! + (o.epsilon ?? 1e-10), -1 / (o.exponent ?? 2));
        slots[1]![c] = (o.momentum ?? 0) * slots[1]![c]! + scaled;
        const upd = o.nesterov ? (o.momentum ?? 0) * slots[1]![c]! + scaled : slots[1]![c]!;
        next = w[c]! - o.lr * upd;
        break;
      }
      case 'adam': {
        const b1 = o.beta1 ?? 0.9;
        const b2 = o.beta2 ?? 0.999;
        const eps = o.epsilon ?? 1e-7;
        slots[0]![c] = b1 * slots[0]![c]! + (1 - b1) * gi;
        slots[1]![c] = b2 * slots[1]![c]! + (1 - b2) * gi * gi;
        const denom = o.sumInsideSqrt === false ? Math.sqrt(slots[1]![c]!) + eps : Math.sqrt(slots[1]![c]! + eps * eps);
        next = w[c]! - (o.lr * slots[0]![c]!) / denom;
        break;
      }
      case 'ftrl': {
        const p = o.lrPower ?? -0.5;
        const acc = slots[0]![c]!;
        const accNew = acc + gi * gi;
        const sigma = (Math.pow(accNew, -p) - Math.pow(acc, -p)) / o.lr;
        slots[1]![c]! += gi - sigma * w[c]!;
        const lin = slots[1]![c]!;
        const quad = Math.pow(accNew, -p) / o.lr + (o.beta ?? 0) / o.lr + 2 * (o.l2 ?? 0);
        const l1 = o.l1 ?? 0;
        next = Math.abs(lin) <= l1 ? 0 : -(lin - Math.sign(lin) * l1) / quad;
        slots[0]![c] = accNew;
        break;
      }
    }
    if (o.clipWeight) next = Math.min(o.clipWeight[1], Math.max(o.clipWeight[0], next));
    w[c] = next;
  }
}

/**
 * One training step: per-row gradients summed over every feature and example
 * (grad(id_j) += scale_j * g[b]), then one optimizer update per touched row (every
 * row for non-lazy Adam). `grads[f][b]` is feature f's gradient for example b.
 */
export function plainStep(tables: Record<string, PlainTable>, features: PlainFeature[], grads: number[][][]): void {
  const sums = new Map<string, Map<number, number[]>>();
  features.forEach((f, i) => {
    const t = tables[f.table]!;
    const m = sums.get(f.table) ?? new Map<number, number[]>();
    sums.set(f.table, m);
    f.ids.forEach((row, b) => {
      const sc = scales(t, row, f.weights ? f.weights[b]! : null);
      row.forEach((id, j) => {
        const acc = m.get(id) ?? new Array<number>(t.dim).fill(0);
        grads[i]![b]!.forEach((g, c) => (acc[c]! += sc[j]! * g));
        m.set(id, acc);
      });
    });
  });
  for (const [name, t] of Object.entries(tables)) {
    const m = sums.get(name) ?? new Map<number, number[]>();
    for (let r = 0; r < t.w.length; r++) {
      const g = m.get(r) ?? (t.opt.nonLazy ? new Array<number>(t.dim).fill(0) : null);
      if (g) optimizerRow(t.opt, t.w[r]!, t.s.map((s) => s[r]!), g);
    }
  }
}

/** The spec's loss: Σ_features mean_b ||act_b||²; its gradient is 2 * act / batch. */
export function lossGradient(acts: number[][]): number[][] {
  return acts.map((row) => row.map((v) => (2 * v) / acts.length));
}
