/**
 * The demo's synthetic click log, with a planted signal: 26 categorical features
 * (Criteo's C1..C26 shape) whose ids are Zipf-distributed over a vocabulary, and a
 * label drawn from a hidden logistic model over hidden embeddings:
 *
 *   P(click) = sigmoid(bias + sum_f  w_f . H_f[id_f])
 *
 * with H_f[id] ~ N(0, 1)^hiddenDim and w_f ~ N(0, strength^2 / (features * hiddenDim)),
 * so the logit has a standard deviation near `strength`. Everything is seeded: the same
 * options give the same log, bit for bit.
 */
import { scatterRank, uniformSource, ZipfSampler } from '../rng.js';

export interface ClickLogOptions {
  /** Categorical features per example. Default 26. */
  features?: number;
  /** Ids per feature (the table's rows). Default 10_000. */
  vocab?: number;
  /** Zipf exponent of the ids. Default 1.1. */
  zipf?: number;
  /** Width of the hidden embeddings. Default 4. */
  hiddenDim?: number;
  /** Standard deviation of the hidden logit. Default 2. */
  strength?: number;
  /** Hidden bias (sets the click rate). Default -1. */
  bias?: number;
  /** Seed of the hidden model and of the ids. Default 1. */
  seed?: number;
}

/** A block of examples: `ids[f][i]` the id of feature f in example i; `labels[i]` 0 or 1. */
export interface ClickBatch {
  ids: Int32Array[];
  labels: Float32Array;
  /** The hidden model's click probability of each example (the best any model can do). */
  truth: Float64Array;
}

/** Box-Muller normal draws from a uniform source. */
function normalSource(uniform: () => number): () => number {
  return () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
}

export class ClickLog {
  readonly features: number;
  readonly vocab: number;
  readonly #samplers: ZipfSampler[];
  readonly #effect: Float64Array[];
  readonly #labelRng: () => number;
  readonly #bias: number;

  constructor(options: ClickLogOptions = {}) {
    this.features = options.features ?? 26;
    this.vocab = options.vocab ?? 10_000;
    const hiddenDim = options.hiddenDim ?? 4;
    const strength = options.strength ?? 2;
    const seed = options.seed ?? 1;
    this.#bias = options.bias ?? -1;
    const normal = normalSource(uniformSource(seed * 7919 + 1));
    const scale = strength / Math.sqrt(this.features * hiddenDim);
    // Each (feature, id) contributes w_f . H_f[id] to the logit: precomputed per id.
    this.#effect = Array.from({ length: this.features }, () => {
      const w = Float64Array.from({ length: hiddenDim }, () => normal() * scale);
      const effect = new Float64Array(this.vocab);
      for (let id = 0; id < this.vocab; id++) {
        let dot = 0;
        for (let j = 0; j < hiddenDim; j++) dot += w[j]! * normal();
        effect[id] = dot;
      }
      return effect;
    });
    this.#samplers = Array.from({ length: this.features }, (_, f) => new ZipfSampler(this.vocab, options.zipf ?? 1.1, seed * 1000 + f + 1));
    this.#labelRng = uniformSource(seed * 31 + 17);
  }

  /** The next `n` examples of the log. */
  next(n: number): ClickBatch {
    const ids = this.#samplers.map((z) => {
      const col = new Int32Array(n);
      for (let i = 0; i < n; i++) col[i] = scatterRank(z.next(), this.vocab);
      return col;
    });
    const labels = new Float32Array(n);
    const truth = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let logit = this.#bias;
      for (let f = 0; f < this.features; f++) logit += this.#effect[f]![ids[f]![i]!]!;
      truth[i] = 1 / (1 + Math.exp(-logit));
      labels[i] = this.#labelRng() < truth[i]! ? 1 : 0;
    }
    return { ids, labels, truth };
  }
}

/** Examples [start, end) of a batch (views, no copy). */
export function sliceBatch(b: ClickBatch, start: number, end: number): ClickBatch {
  return { ids: b.ids.map((c) => c.subarray(start, end)), labels: b.labels.subarray(start, end), truth: b.truth.subarray(start, end) };
}
