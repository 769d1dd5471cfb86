import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { DisposedError, FailedPreconditionError, InvalidTypeError, OutOfRangeError, ShapeMismatchError, checkOptions, invalidParameter } from '@embedstack/core';

/** One output of a facade lookup: a float32 activation `[batch, ...]` (host array owned by the layer). */
export interface LookupPart {
  /** The activation's values, row-major. */
  data: Float32Array;
  /** Its shape, `[batch, ...]`. */
  shape: number[];
}

/** What a facade layer's lookup hands the base class: the activations and how to train them. */
export interface PreparedBatch {
  /** The activations, in output order. */
  parts: LookupPart[];
  /** False for a forward-only batch (backward then throws FAILED_PRECONDITION). */
  training: boolean;
  /**
   * Hands the gradients of the loss with respect to each part (same layouts) to the
   * facade's sparse optimizer. Called once per batch, synchronously from the tfjs backward
   * once every use of the layer in its forward has its gradient (the uses' gradients
   * summed), else in a microtask right after that backward; the returned promise is
   * awaited by `flush()` and the next `lookup()`.
   */
  apply(grads: Float32Array[]): Promise<void>;
}

/** How a layer with several activations returns them. */
export type OutputMode = 'concat' | 'list';

/** Options every embedstack tfjs layer takes (besides its facade object). */
export interface SparseLayerOptions {
  /** The layer name (tfjs's unique default otherwise). */
  name?: string | null;
  /**
   * `'concat'` (default): one tensor; a single activation as it is, several (each of
   * rank 2) concatenated along the last axis in feature order, `[batch, Σ dims]`;
   * `'list'`: one tensor per activation, in feature order.
   */
  output?: OutputMode | null;
  /**
   * The positions' shape per example, `[]` or `[1]`, for a layer that starts a
   * `tf.sequential` model (tfjs's `inputShape`; `[1]` when model.predict / fit feed it).
   * Default none (functional models take `tfl.input(...)`).
   */
  inputShape?: [] | [1] | null;
}

interface Batch {
  prepared: PreparedBatch;
  batch: number;
  widths: number[];
  /** float32 [batch, Σ widths]: every activation flattened per example, side by side (kept). */
  combined: tf.Tensor2D;
  /** int32 [batch] positions 0..batch-1, the tensor `lookup` returns (kept). */
  handle: tf.Tensor1D;
  /** The batch's sparse step once a backward reached it, else null. */
  step: SparseStep | null;
  /** The tfjs tape of the last gradient computation whose forward applied the layer, and how often it did. */
  uses: { tape: unknown; count: number } | null;
}

/** The gradient of one batch, summed over the uses of the layer in one tfjs backward, until it is handed over. */
interface SparseStep {
  /** tfjs's tape of that backward (`engine().state.activeTape`: a new array per outermost gradient computation). */
  tape: unknown;
  /** d loss / d combined, [batch, Σ widths]; tfjs's own array until a second use is added (then a copy). */
  sum: Float32Array;
  owned: boolean;
  /** Uses whose gradient has arrived. */
  received: number;
  /** True once handed to the facade: a later backward is a second step. */
  sealed: boolean;
  /** Settles `flush()`'s wait for this step (given the facade's step when it is handed over). */
  settle: (facadeStep: Promise<void>) => void;
}

/** tfjs's tape while a gradient computation records its forward, else null. */
function activeTape(): unknown {
  const state = tf.engine().state;
  return state.gradientDepth > 0 ? state.activeTape : null;
}

const ANCHOR = 'sparse_anchor';

function sum(widths: readonly number[]): number {
  return widths.reduce((a, w) => a + w, 0);
}

/**
 * Rows narrower than this are copied element by element, wider ones with `subarray` + `set`: a view per
 * row costs more than copying a few floats (26 parts of width 8, batch 1024: 2.7x less CPU time for
 * interleave + deinterleave; at width 32 both ways cost the same, at 256 `set` is 4x cheaper).
 */
const ROW_COPY_MIN = 32;

/** Copies `batch` rows of `w` floats from `src` (row stride `srcStride`, from `srcAt`) to `dst` (stride `dstStride`, from `dstAt`). */
function copyRows(src: Float32Array, srcAt: number, srcStride: number, dst: Float32Array, dstAt: number, dstStride: number, w: number, batch: number): void {
  if (w >= ROW_COPY_MIN) {
    for (let r = 0; r < batch; r++) dst.set(src.subarray(srcAt + r * srcStride, srcAt + r * srcStride + w), dstAt + r * dstStride);
    return;
  }
  for (let r = 0; r < batch; r++) {
    const s = srcAt + r * srcStride;
    const d = dstAt + r * dstStride;
    for (let j = 0; j < w; j++) dst[d + j] = src[s + j]!;
  }
}

/**
 * Row-major parts [batch, w_i] side by side as one [batch, Σ w] array (a layout change, done here
 * with typed-array row copies: tfjs's cpu concat/split walk element by element and cost ~100x more).
 */
function interleave(parts: readonly Float32Array[], widths: readonly number[], batch: number): Float32Array {
  const total = sum(widths);
  const out = new Float32Array(batch * total);
  let col = 0;
  parts.forEach((p, i) => {
    copyRows(p, 0, widths[i]!, out, col, total, widths[i]!, batch);
    col += widths[i]!;
  });
  return out;
}

/** The inverse of `interleave`: [batch, Σ w] back to one [batch, w_i] array per part. */
function deinterleave(all: Float32Array, widths: readonly number[], batch: number): Float32Array[] {
  const total = sum(widths);
  let col = 0;
  return widths.map((w) => {
    const out = new Float32Array(batch * w);
    copyRows(all, col, total, out, 0, w, w, batch);
    col += w;
    return out;
  });
}

/** True when `x` is an object with a method `name` (how the layers recognise a facade's optimizer without importing it). */
export function hasMethod(x: unknown, name: string): boolean {
  return typeof x === 'object' && x !== null && typeof Reflect.get(x, name) === 'function';
}

/**
 * The base of embedstack's tfjs layers: a `tf.layers.Layer` whose activations come
 * from a facade lookup made before the tfjs graph runs, and whose backward hands the
 * output gradient to the facade's sparse optimizer.
 *
 * Why two phases: the facades' lookups and optimizer steps run in native code off the
 * JS thread (Promises), while a tfjs layer's `call` and a custom gradient are
 * synchronous. So each step is:
 *
 * 1. `const x = await layer.lookup(...)`: the facade looks the rows up and pools them
 *    (core ops); the layer keeps the activations as tfjs tensors and returns `x`, an
 *    int32 tensor `[batch]` of example positions (owned by the layer);
 * 2. `layer.apply(x)` inside `optimizer.minimize(...)` / `tf.variableGrads(...)`: the
 *    activations of those positions, through `tf.customGrad`. The backward hands the
 *    gradient of the loss with respect to the activations to the facade's sparse
 *    optimizer (one update per lookup: the uses of the layer in one backward add up;
 *    sliced or gathered positions give the other examples a zero gradient) and
 *    returns a zero gradient for the layer's only tfjs
 *    weight, a trainable scalar `sparse_anchor` that keeps the layer on tfjs's
 *    gradient tape (a tfjs optimizer leaves it at 0);
 * 3. the facade's step runs asynchronously; `await layer.flush()` (or the next
 *    `lookup`) waits for it and rethrows its error.
 *
 * Memory: per batch the layer keeps one float32 tensor `[batch, Σ widths]` and the
 * positions; the next `lookup`, `release()` and the last `dispose()` free them.
 */
export abstract class SparseEmbeddingLayer extends tfl.layers.Layer {
  /** tfjs's serialization name. */
  static className = 'EmbedstackSparseEmbedding';

  /** How several activations are returned ('concat' or 'list'); from the `output` option. */
  readonly outputMode: OutputMode;
  #batch: Batch | null = null;
  #pending: Promise<void> = Promise.resolve();
  #failure: { error: unknown } | null = null;
  #anchor: tfl.LayerVariable | null = null;
  #released = false;

  protected constructor(options: SparseLayerOptions) {
    const o = checkOptions<SparseLayerOptions>(options, ['name', 'output', 'inputShape']);
    const shape = o.inputShape ?? undefined;
    if (shape !== undefined && !(Array.isArray(shape) && (shape.length === 0 || (shape.length === 1 && shape[0] === 1)))) {
      throw invalidParameter('options.inputShape', '[] or [1]', shape);
    }
    const name = o.name ?? undefined;
    if (name !== undefined && (typeof name !== 'string' || name.length === 0)) throw invalidParameter('options.name', 'a non-empty string', name, InvalidTypeError);
    const output = o.output ?? 'concat';
    if (output !== 'concat' && output !== 'list') throw invalidParameter('options.output', "'concat' or 'list'", output);
    super({ name, trainable: true, dtype: 'float32', ...(shape ? { inputShape: [...shape] } : {}) });
    this.outputMode = output;
  }

  /** The symbolic shapes of the activations for a batch dimension (null when unknown). */
  protected abstract partShapes(batch: number | null): (number | null)[][];

  override build(inputShape: tfl.Shape | tfl.Shape[]): void {
    if (!this.#anchor) this.#anchor = this.addWeight(ANCHOR, [], 'float32', tfl.initializers.zeros(), undefined, true);
    super.build(inputShape);
  }

  override computeOutputShape(inputShape: tfl.Shape | tfl.Shape[]): tfl.Shape | tfl.Shape[] {
    const first: unknown = Array.isArray(inputShape) ? inputShape[0] : undefined;
    const s = Array.isArray(first) ? first : Array.isArray(inputShape) ? inputShape : [];
    const b = typeof s[0] === 'number' ? s[0] : null;
    const shapes = this.partShapes(b);
    if (this.outputMode === 'list') return shapes;
    if (shapes.length === 1) return shapes[0]!;
    return [b, shapes.reduce((a, p) => (a === null || p.length !== 2 || p[1] === null ? null : a + p[1]!), 0 as number | null)];
  }

  /** Waits for the sparse optimizer steps handed over so far; rethrows the first failure (once). */
  async flush(): Promise<void> {
    await this.#pending;
    const f = this.#failure;
    if (f) {
      this.#failure = null;
      throw f.error;
    }
  }

  /** Subclasses: awaits earlier steps, then installs a prepared batch and returns its positions. */
  protected async install(run: () => Promise<PreparedBatch>): Promise<tf.Tensor1D> {
    if (this.#released) throw new DisposedError(`Layer "${this.name}" was disposed`);
    await this.flush();
    const prepared = await run();
    // disposed while the facade looked up: keep nothing (no weight, no batch tensors)
    if (this.#released) throw new DisposedError(`Layer "${this.name}" was disposed during lookup()`);
    const parts = prepared.parts;
    const batch = parts[0]!.shape[0]!;
    if (this.outputMode === 'concat' && parts.length > 1) {
      const i = parts.findIndex((p) => p.shape.length !== 2);
      if (i >= 0) {
        // The facade has looked this batch up (a TPUEmbedding's next applyGradients is for it), so a
        // backward on the previous batch would train these rows: the previous batch goes too.
        this.release();
        throw new ShapeMismatchError(
          `Expected activation ${i} to have rank 2 ([batch, dim]) for output: 'concat' but received shape [${parts[i]!.shape.join(', ')}]; use output: 'list' ` +
            '(the previous batch is released: the facade has looked this one up)',
          { argument: 'output' },
        );
      }
    }
    // The anchor weight must exist before tfjs collects the trainable variables of a step.
    if (!this.built) this.build([null]);
    const widths = parts.map((p) => p.shape.slice(1).reduce((a, d) => a * d, 1)); // from shapes: an empty batch is fine
    const combined = tf.tensor2d(parts.length === 1 ? parts[0]!.data : interleave(parts.map((p) => p.data), widths, batch), [batch, sum(widths)]);
    this.release();
    this.#batch = { prepared, batch, widths, combined: tf.keep(combined), handle: tf.keep(tf.range(0, batch, 1, 'int32') as tf.Tensor1D), step: null, uses: null };
    return this.#batch.handle;
  }

  /** Frees the current batch's tensors (the layer's weight stays). */
  release(): void {
    const b = this.#batch;
    if (!b) return;
    this.#batch = null;
    b.combined.dispose();
    b.handle.dispose();
  }

  /** The positions of `x` into the current batch, or null for the whole batch in order. */
  #positions(x: tf.Tensor, b: Batch): Int32Array | null {
    if (x === b.handle) return null;
    if (!(x instanceof tf.Tensor) || x.isDisposed) throw invalidParameter('inputs', 'the positions tensor returned by lookup()', x, InvalidTypeError);
    // float32: tfjs casts a sequential model's inputs to the first layer's dtype; positions stay exact below 2^24.
    if ((x.dtype !== 'int32' && x.dtype !== 'float32') || !(x.rank === 1 || (x.rank === 2 && x.shape[1] === 1))) {
      throw invalidParameter('inputs', 'an int32 tensor [n] (or [n, 1]) of positions returned by lookup()', `a ${x.dtype} tensor of shape [${x.shape.join(', ')}]`, InvalidTypeError);
    }
    const raw = x.dataSync() as Int32Array | Float32Array;
    for (let i = 0; i < raw.length; i++) {
      if (!Number.isInteger(raw[i])) throw new OutOfRangeError(`Expected inputs[${i}] to be a position (an integer) of the looked-up batch but received ${raw[i]}`, { argument: 'inputs' });
    }
    const p = raw instanceof Int32Array ? raw : Int32Array.from(raw);
    let identity = p.length === b.batch;
    for (let i = 0; i < p.length; i++) {
      if (p[i]! < 0 || p[i]! >= b.batch) {
        throw new OutOfRangeError(`Expected inputs[${i}] to be a position in [0, ${b.batch}) of the looked-up batch but received ${p[i]}`, { argument: 'inputs' });
      }
      if (p[i] !== i) identity = false;
    }
    return identity ? null : p;
  }

  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor | tf.Tensor[] {
    const b = this.#batch;
    if (!b) {
      throw new FailedPreconditionError(`Layer "${this.name}" has no looked-up batch: inputs must be the positions returned by \`await layer.lookup(...)\``, {
        argument: 'inputs',
      });
    }
    const x = Array.isArray(inputs) ? inputs[0] : inputs;
    const positions = this.#positions(x as tf.Tensor, b);
    const anchor = this.#anchor!.read();
    // uses in one recorded forward: their gradients are summed, then handed over with the last one
    const tape = activeTape();
    if (tape !== null) b.uses = { tape, count: b.uses !== null && b.uses.tape === tape ? b.uses.count + 1 : 1 };
    return tf.tidy(() => {
      // the one input is `anchor`: its gradient is zeros; the sparse step runs in #backward
      const forward: Parameters<typeof tf.customGrad>[0] = () => ({
        value: tf.clone(b.combined),
        gradFunc: (dy) => {
          this.#backward(b, dy);
          return tf.zerosLike(anchor);
        },
      });
      const sparse = tf.customGrad(forward);
      let out: tf.Tensor = sparse(anchor);
      if (positions) out = tf.gather(out, tf.tensor1d(positions, 'int32'));
      const n = out.shape[0]!;
      const shaped = (t: tf.Tensor, i: number) => (b.prepared.parts[i]!.shape.length === 2 ? t : tf.reshape(t, [n, ...b.prepared.parts[i]!.shape.slice(1)]));
      if (b.widths.length === 1) return this.outputMode === 'concat' ? shaped(out, 0) : [shaped(out, 0)];
      if (this.outputMode === 'concat') return out;
      return tf.split(out, b.widths, 1).map(shaped);
    });
  }

  #backward(b: Batch, dy: tf.Tensor): void {
    if (b !== this.#batch) {
      throw new FailedPreconditionError(`Layer "${this.name}": the gradient is for a batch that was replaced by a later lookup()`, { argument: 'lookup' });
    }
    if (!b.prepared.training) {
      throw new FailedPreconditionError(`Layer "${this.name}": the batch was looked up with training: false, it cannot be trained`, { argument: 'training' });
    }
    // On the cpu backend dataSync returns the backend's own array (not reused after dispose); others return copies.
    const d = dy.dataSync() as Float32Array;
    // the tape being back-propagated (tfjs ends the recording before the backward, but keeps this array until after it)
    const tape: unknown = tf.engine().state.activeTape;
    let step = b.step;
    if (step) {
      if (step.sealed || step.tape !== tape) {
        throw new FailedPreconditionError(
          `Layer "${this.name}": the batch was already differentiated (one sparse step per lookup): look up the next batch first ` +
            `(model.fit: one epoch per lookup, with a batchSize of at least the lookup's ${b.batch} examples)`,
          {
            argument: 'lookup',
          },
        );
      }
      // another use of the layer in the same backward (two slices, a shared layer): its gradient adds up
      if (!step.owned) {
        step.sum = Float32Array.from(step.sum); // never write into tfjs's array
        step.owned = true;
      }
      for (let i = 0; i < d.length; i++) step.sum[i]! += d[i]!;
      step.received++;
    } else {
      let settle!: (facadeStep: Promise<void>) => void;
      // flush() waits for this step from now on, also while it is not handed over yet
      const handed = new Promise<void>((resolve) => {
        settle = resolve;
      });
      this.#pending = Promise.all([this.#pending, handed]).then(() => undefined);
      step = b.step = { tape, sum: d, owned: false, received: 1, sealed: false, settle };
      // A use whose gradient never comes (not connected to the loss) leaves the count short: the backward is
      // synchronous, so this microtask hands the sum over after it in that case.
      const fallback = step;
      queueMicrotask(() => this.#handOver(b, fallback));
    }
    // Every use recorded in the forward has its gradient: hand over now, in the backward (the facade's step
    // then starts before anything the caller does next, as with one use).
    if (b.uses !== null && b.uses.tape === tape && step.received >= b.uses.count) this.#handOver(b, step);
  }

  /** Hands the summed gradient of `step` to the facade's sparse optimizer, once. */
  #handOver(b: Batch, step: SparseStep): void {
    if (step.sealed) return;
    step.sealed = true;
    let started: Promise<void>;
    try {
      started = b.prepared.apply(b.widths.length === 1 ? [step.sum] : deinterleave(step.sum, b.widths, b.batch));
    } catch (e) {
      started = Promise.reject(e);
    }
    step.settle(
      started.then(
        () => undefined,
        (error: unknown) => {
          this.#failure ??= { error };
        },
      ),
    );
  }

  /**
   * Frees the current batch, then tfjs's Layer.dispose (one count per model the layer was applied in:
   * the anchor weight and the batch go with the last one). A call after that does nothing.
   */
  override dispose(): ReturnType<tfl.layers.Layer['dispose']> {
    if (this.#released) return { refCountAfterDispose: 0, numDisposedVariables: 0 }; // idempotent
    if (this.built && this._refCount !== null) {
      const result = super.dispose();
      if (result.refCountAfterDispose > 0) return result; // still used by another model
      this.release();
      this.#released = true;
      return result;
    }
    this.release();
    this.#released = true;
    if (!this.built) return { refCountAfterDispose: 0, numDisposedVariables: 0 };
    // Built by a lookup but never applied: tfjs's dispose refuses an unused layer, so free the weight here.
    this._refCount = 0;
    return { refCountAfterDispose: 0, numDisposedVariables: this.disposeWeights() };
  }
}
