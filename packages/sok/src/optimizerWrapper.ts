import { InvalidArgumentError, InvalidTypeError, invalidParameter, type Keys, ShapeMismatchError, formatShape } from '@embedstack/core';
import { concatFloats, concatKeys } from './concat.js';
import { context } from './context.js';
import { applyPooled, applyRows } from './exchange.js';
import { idsFor } from './keys.js';
import { checkVariable } from './lookup.js';
import { optimizers, SokOptimizer } from './optimizers.js';
import { IndexedSlices } from './tape.js';
import { type SokVariable, stamp } from './variable.js';

/** A gradient and its variable, as `tape.gradient` returns them. */
export type GradientPair = readonly [IndexedSlices, SokVariable];

/** One variable's work in a step: the fused path (one pooled gradient) or rows. */
type Work = { v: SokVariable; pooled: IndexedSlices } | { v: SokVariable; keys: Keys; grads: Float32Array };

/**
 * SOK's `OptimizerWrapper(optimizer)`: applies sparse gradients to SOK variables.
 * The optimizer's slots live beside the rows on the owning device (the variable's
 * tables get them on the first step); the update is core's fused optimizer step, run
 * by each owning device on the rows it holds. `iterations` counts the steps (the `t`
 * of Adam's bias correction and of a learning-rate function).
 */
export class OptimizerWrapper {
  /** The wrapped optimizer (constructed from its name when a name was given). */
  readonly optimizer: SokOptimizer;
  #iterations = 0;

  /**
   * @param optimizer one of `sok.optimizers` (`new sok.optimizers.Adam({ ... })`), or its
   *   name ('SGD', 'Momentum', 'Adagrad', 'Adam', 'Adamax', 'Adadelta', 'Ftrl' / 'FTRL';
   *   any case) for its defaults
   * @throws InvalidArgumentError for an unknown name; InvalidTypeError for anything else
   */
  constructor(optimizer: SokOptimizer | string) {
    if (typeof optimizer === 'string') {
      const wanted = optimizer.toLowerCase();
      const Ctor = Object.entries(optimizers).find(([k]) => k.toLowerCase() === wanted)?.[1];
      if (!Ctor) throw invalidParameter('optimizer', `one of the optimizer names ${Object.keys(optimizers).join(', ')}`, optimizer);
      optimizer = new Ctor();
    }
    if (!(optimizer instanceof SokOptimizer)) {
      throw invalidParameter('optimizer', `one of sok.optimizers (${Object.keys(optimizers).join(', ')}) or its name`, optimizer, InvalidTypeError);
    }
    this.optimizer = optimizer;
  }

  /** Steps applied so far (`load` with this wrapper restores the dumped count). */
  get iterations(): number {
    return this.#iterations;
  }

  /** @internal `load`: continue from a dumped step count. */
  restoreIterations(n: number): void {
    if (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0) this.#iterations = n;
  }

  /**
   * One optimizer step over `gradsAndVars` (`tape.gradient`'s pairs, or your own
   * `[new sok.IndexedSlices(values, indices), variable]`). Several gradients of one
   * variable are summed into one step. Every pair is validated before any device
   * works (a rejected call changes nothing).
   *
   * @throws InvalidArgumentError for an empty list (Keras: "No gradients provided for any variable");
   *   InvalidTypeError / ShapeMismatchError / OutOfRangeError naming gradsAndVars[i]; FailedPreconditionError
   *   when a variable already holds another optimizer's slots or its init was shut down
   */
  async applyGradients(gradsAndVars: readonly GradientPair[]): Promise<void> {
    context();
    if (!Array.isArray(gradsAndVars)) throw invalidParameter('gradsAndVars', 'an array of [IndexedSlices, variable] pairs', gradsAndVars, InvalidTypeError);
    // Keras's "No gradients provided for any variable" (a ValueError): no step is counted.
    if (gradsAndVars.length === 0) throw new InvalidArgumentError('No gradients provided for any variable: gradsAndVars is empty (no step is applied or counted)', { argument: 'gradsAndVars' });
    const byVar = new Map<SokVariable, { pooled: IndexedSlices[]; rows: { keys: Keys; grads: Float32Array }[] }>();
    gradsAndVars.forEach((pair, i) => {
      const arg = `gradsAndVars[${i}]`;
      if (!Array.isArray(pair) || pair.length !== 2 || !(pair[0] instanceof IndexedSlices)) throw invalidParameter(arg, 'an [IndexedSlices, variable] pair', pair, InvalidTypeError);
      const v = checkVariable(pair[1], `${arg}[1]`);
      const g = pair[0];
      if (g.dim !== v.dimension) {
        // A tape gradient's values are computed lazily: its shape is [indices, dim] without computing them.
        const shape = g.pooled ? [g.indices.length, g.dim] : g.values.shape;
        throw new ShapeMismatchError(`Expected ${arg}[0].values to be [n, ${v.dimension}] (variable "${v.name}") but received ${formatShape(shape)}`, { argument: `${arg}[0].values` });
      }
      const entry = byVar.get(v) ?? { pooled: [], rows: [] };
      byVar.set(v, entry);
      if (g.pooled && g.source === v) {
        for (const p of g.pooled) {
          const rows = p.bag.rowSplits.length - 1;
          if (p.grads.length !== rows * v.dimension) {
            throw new ShapeMismatchError(`Expected the pooled gradient of ${arg}[0] to be [${rows}, ${v.dimension}] but received ${p.grads.length} floats`, { argument: `${arg}[0]` });
          }
        }
        entry.pooled.push(g);
        return;
      }
      // Slices built by hand, or a tape gradient of another variable (its ids checked against this one).
      entry.rows.push({ keys: idsFor(v, g.indices, `${arg}[0].indices`), grads: g.values.data });
    });
    const { spec, name } = this.optimizer;
    for (const v of byVar.keys()) v.checkSlots(spec, name);
    const work: Work[] = [...byVar].map(([v, e]) => {
      if (e.pooled.length === 1 && e.pooled[0]!.pooled!.length === 1 && e.rows.length === 0) return { v, pooled: e.pooled[0]! };
      // Several gradients of one variable: expand the pooled ones per entry and sum all in one step.
      const parts = [...e.pooled.map((g) => ({ keys: idsFor(v, g.indices, 'indices'), grads: g.values.data })), ...e.rows];
      return { v, keys: concatKeys(parts.map((p) => p.keys)), grads: concatFloats(parts.map((p) => p.grads)) };
    });
    // Every pair passed its checks: only now bind slots, stamp and count the step.
    for (const w of work) await w.v.bindSlots(spec, name);
    stamp(work.map((w) => w.v));
    const step = ++this.#iterations;
    await Promise.all(work.map(async (w) => {
      if ('pooled' in w) {
        const p = w.pooled.pooled![0]!;
        await applyPooled(w.v, p.bag, p.grads, p.combiner, spec, step);
      } else {
        await applyRows(w.v, w.keys, w.grads, spec, step);
      }
    }));
  }
}
