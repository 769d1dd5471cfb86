// An independent reimplementation of sparse training: rows in a plain Map, Keras formulas as
// the package implements them (Adagrad without epsilon, as core's), with core's float32
// storage rule: every stored value (row, slot, summed gradient) is rounded to float32.
import { expect } from 'vitest';
import * as de from '../src/index.js';

export const DIM = 3;
export const INIT = [0.1, -0.2, 0.3];

export type Kind = 'sgd' | 'adagrad' | 'adam';
interface RefRow {
  w: number[];
  s: number[][];
}

export class PlainModel {
  rows = new Map<bigint, RefRow>();
  t = 0;
  constructor(
    readonly kind: Kind,
    readonly lr: number,
  ) {}

  private fresh(): RefRow {
    const init = this.kind === 'adagrad' ? [Array(DIM).fill(Math.fround(0.1))] : this.kind === 'adam' ? [Array(DIM).fill(0), Array(DIM).fill(0)] : [];
    return { w: INIT.map(Math.fround), s: init };
  }

  lookup(ids: bigint[]): number[][] {
    return ids.map((k) => (this.rows.get(k) ?? this.fresh()).w.slice());
  }

  /** One step; grads per occurrence, summed per key. */
  apply(ids: bigint[], grads: number[][]): void {
    this.t++;
    const f = Math.fround;
    const sum = new Map<bigint, number[]>();
    ids.forEach((k, i) => {
      const g = sum.get(k) ?? Array(DIM).fill(0);
      grads[i]!.forEach((x, c) => (g[c] = f(g[c] + f(x))));
      sum.set(k, g);
    });
    for (const [k, g] of sum) {
      const r = this.rows.get(k) ?? this.fresh();
      for (let c = 0; c < DIM; c++) {
        if (this.kind === 'sgd') r.w[c] = f(r.w[c]! - this.lr * g[c]!);
        else if (this.kind === 'adagrad') {
          r.s[0]![c] = f(r.s[0]![c]! + g[c]! ** 2);
          r.w[c] = f(r.w[c]! - (this.lr * g[c]!) / Math.sqrt(r.s[0]![c]!));
        } else {
          const b1 = 0.9;
          const b2 = 0.999;
          const lrT = (this.lr * Math.sqrt(1 - b2 ** this.t)) / (1 - b1 ** this.t);
          r.s[0]![c] = f(b1 * r.s[0]![c]! + (1 - b1) * g[c]!);
          r.s[1]![c] = f(b2 * r.s[1]![c]! + (1 - b2) * g[c]! ** 2);
          r.w[c] = f(r.w[c]! - (lrT * r.s[0]![c]!) / (Math.sqrt(r.s[1]![c]!) + 1e-7));
        }
      }
      this.rows.set(k, r);
    }
  }
}

export function target(k: bigint): number[] {
  const x = Number(k);
  return [Math.sin(x), Math.cos(x), (x % 3) - 1];
}

/** d/de of sum (e - target)^2 per occurrence. */
export function gradOf(ids: bigint[], rows: number[][]): number[][] {
  return ids.map((k, i) => rows[i]!.map((e, c) => 2 * (e - target(k)[c]!)));
}

export function optimizerFor(kind: Kind, lr: number): de.Optimizer {
  if (kind === 'sgd') return new de.optimizers.SGD({ learningRate: lr });
  if (kind === 'adagrad') return new de.optimizers.Adagrad({ learningRate: lr });
  return new de.optimizers.Adam({ learningRate: lr });
}

export const BATCHES: bigint[][] = [
  [1n, 2n, 3n, 2n],
  [3n, 4n, -5n, 1n, 1n],
  [6n, 2n, 7n],
  [1n, 2n, 3n, 4n, -5n, 6n, 7n, 8n],
  [8n, 8n, 8n],
  [2n, 9n, 1n, -5n],
];

/** Element-wise |a - b| <= rel * max(|a|, |b|) (plus 1e-12 for zeros). */
export function expectClose(a: number[][], b: number[][], rel: number, what: string): void {
  expect(a.length, what).toBe(b.length);
  a.forEach((row, i) =>
    row.forEach((x, c) => {
      const y = b[i]![c]!;
      expect(Math.abs(x - y), `${what} [${i}][${c}]: ${x} vs ${y}`).toBeLessThanOrEqual(rel * Math.max(Math.abs(x), Math.abs(y)) + 1e-12);
    }),
  );
}

