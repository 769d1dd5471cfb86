/**
 * The demo's size check, before any work: sizes whose tables and click log would not fit in
 * this machine's memory are refused with one message instead of running until memory runs out.
 */
import { readdirSync } from 'node:fs';
import { formatBytes } from '../format.js';
import { prepareFolder } from '../options.js';

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

/** The message for a training set smaller than one batch (the demo trains whole batches only), else null. */
export function demoBatchError(trainExamples: number, batchSize: number): string | null {
  if (trainExamples >= batchSize) return null;
  return `error: --train ${trainExamples} is less than one batch (--batch ${batchSize}): the demo trains whole batches. Raise --train or lower --batch.`;
}

/**
 * Makes the --out folder (and its parents) and checks that it is a writable, empty folder, before any
 * work: the checkpoint refuses a folder that holds one (a previous run's), which would end a whole run.
 * @returns what is wrong, or null
 */
export function prepareOutDir(dir: string): string | null {
  return prepareFolder(dir, 'a folder the run can be kept in', (d) => {
    const entries = readdirSync(d);
    if (entries.length === 0) return null;
    return `Expected a new or empty folder but "${d}" holds ${entries.length} entries (${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', ...' : ''}; a previous run's?): pick another folder or empty this one.`;
  });
}
