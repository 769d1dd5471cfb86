// A synthetic table for the kill -9 test: row i of generation `gen` is computed on the
// fly (no memory per row), and a "checking" table that verifies rows as they are
// imported. Both are real RawTableSync implementations behind EmbeddingTable.
import { InternalError } from '../../src/errors.js';
import { optimizers } from '../../src/optimizers.js';
import type { ExportBatch, RawTableSync } from '../../src/rawTable.js';
import { rawTableFromSync } from '../../src/rawTable.js';
import { EmbeddingTable } from '../../src/table.js';
import { resolveTableOptions } from '../../src/tableOptions.js';

export const GEN_DIM = 16;

/** Key of row i: spread over the int64 range, negative ones included. */
export const keyOf = (i: number): bigint => BigInt(i) * 1_000_000_007n - (1n << 40n);
export const rowOf = (key: bigint): number => Number((key + (1n << 40n)) / 1_000_000_007n);
/** Float32-exact while gen <= 4000 (quarter steps need values below 2^22). */
export const valueOf = (gen: number, i: number, c: number): number => gen * 1024 + (i % 1000) + c * 0.25;
export const slotOf = (gen: number, c: number): number => gen * 4 + 0.5 + c;

function tableOptions() {
  return resolveTableOptions({ dim: GEN_DIM, name: 'generated', optimizer: optimizers.adagrad({ learningRate: 0.1 }), scorePolicy: 'customized' });
}

const unsupported = (): never => {
  throw new InternalError('not part of the generated test table');
};

function base(): Omit<RawTableSync, 'exportBatch' | 'importRows' | 'size'> {
  return {
    find: unsupported,
    findOrInsert: unsupported,
    upsert: unsupported,
    assign: unsupported,
    accum: unsupported,
    remove: unsupported,
    clear: () => undefined,
    capacity: () => 0,
    memoryUsage: () => 0,
    lookupCombined: unsupported,
    lookupCombinedPartial: unsupported,
    lookupCombinedBackward: unsupported,
    applyCombinedGradients: unsupported,
    applyGradients: unsupported,
    restrict: unsupported,
    setEpoch: () => undefined,
    dispose: () => undefined,
  };
}

/** `rows` rows of generation `gen` (settable), exported in row order. */
export function generatedTable(rows: number): { table: EmbeddingTable; setGeneration: (gen: number) => void } {
  let gen = 0;
  const raw: RawTableSync = {
    ...base(),
    size: () => rows,
    importRows: unsupported,
    exportBatch(offset: number, limit: number): ExportBatch {
      const start = Math.min(offset, rows);
      const n = Math.min(limit, rows - start);
      const keys = new BigInt64Array(n);
      const values = new Float32Array(n * GEN_DIM);
      const slot = new Float32Array(n * GEN_DIM);
      for (let r = 0; r < n; r++) {
        const i = start + r;
        keys[r] = keyOf(i);
        for (let c = 0; c < GEN_DIM; c++) {
          values[r * GEN_DIM + c] = valueOf(gen, i, c);
          slot[r * GEN_DIM + c] = slotOf(gen, c);
        }
      }
      return { keys, values, slots: [slot], scores: new BigUint64Array(n).fill(BigInt(gen)) };
    },
  };
  return { table: new EmbeddingTable(rawTableFromSync(raw), tableOptions(), 'generated'), setGeneration: (g) => (gen = g) };
}

/**
 * A table that checks every imported row against the generated data and records which
 * generations it saw and which rows arrived. `mismatches` counts rows that belong to
 * no single generation (value, slot and score must agree).
 */
export function checkingTable(rows: number): {
  table: EmbeddingTable;
  generations: Set<number>;
  seen: () => number;
  mismatches: () => number;
  /** The first mismatching row, described. */
  firstMismatch: () => string | null;
} {
  const generations = new Set<number>();
  const arrived = new Uint8Array(rows);
  let count = 0;
  let bad = 0;
  let first: string | null = null;
  const raw: RawTableSync = {
    ...base(),
    size: () => count,
    exportBatch: unsupported,
    importRows(keys, values, slots, scores) {
      for (let r = 0; r < keys.length; r++) {
        const i = rowOf(BigInt(keys[r]!));
        const gen = Number(scores![r]!);
        let ok = i >= 0 && i < rows && keyOf(i) === BigInt(keys[r]!) && arrived[i] === 0;
        for (let c = 0; ok && c < GEN_DIM; c++) {
          ok = values[r * GEN_DIM + c] === valueOf(gen, i, c) && slots![0]![r * GEN_DIM + c] === slotOf(gen, c);
        }
        if (!ok) {
          bad++;
          first ??= `row ${i} key ${keys[r]} gen ${gen} values ${values.subarray(r * GEN_DIM, r * GEN_DIM + 2).join()} slot ${slots![0]![r * GEN_DIM]}`;
        } else arrived[i] = 1;
        generations.add(gen);
        count++;
      }
    },
  };
  return {
    table: new EmbeddingTable(rawTableFromSync(raw), tableOptions(), 'checking'),
    generations,
    seen: () => count,
    mismatches: () => bad,
    firstMismatch: () => first,
  };
}
