/**
 * The demo's size check, before any work: sizes whose tables and click log would not fit in
 * this machine's memory are refused with one message instead of running until memory runs out.
 */
import { formatBytes } from '../format.js';

/** Categorical features of the click log: one table each (Criteo's C1..C26). */
export const DEMO_FEATURES = 26;

export interface DemoSizes {
  /** Categorical features (tables). */
  features: number;
  vocab: number;
  dim: number;
  trainExamples: number;
  testExamples: number;
}

/**
 * A lower bound of the bytes the demo holds at these sizes: each table's vocab x dim float32 rows
 * with Adagrad's accumulator beside them, and one 8-byte id per feature per example.
 */
export function demoBytes(s: DemoSizes): number {
  return s.features * s.vocab * s.dim * 4 * 2 + s.features * (s.trainExamples + s.testExamples) * 8;
}

/**
 * The message for sizes whose lower bound passes a quarter of the machine's memory (the run keeps
 * several copies of the rows: the restored checkpoint, the exported files, the serving caches), else null.
 */
export function demoSizeError(s: DemoSizes, totalBytes: number): string | null {
  const need = demoBytes(s);
  if (need <= totalBytes / 4) return null;
  return (
    `error: --vocab ${s.vocab}, --dim ${s.dim}, --train ${s.trainExamples} and --test ${s.testExamples} need at least ${formatBytes(need)} ` +
    `(${s.features} tables of vocab x dim floats with Adagrad's accumulator, and ${s.features} ids per example), more than a quarter of ` +
    `this machine's ${formatBytes(totalBytes)}: the run keeps several copies of the rows (checkpoint, export, serving). Pick smaller sizes.`
  );
}
