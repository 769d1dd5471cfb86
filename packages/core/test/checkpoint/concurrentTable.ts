// The small table of the concurrency tests: CONCURRENT_ROWS rows whose values encode a
// generation, and a check that a loaded table holds exactly one complete generation.
import { referenceBackend } from '../../src/reference/index.js';
import { createTable, type EmbeddingTable } from '../../src/table.js';

export const CONCURRENT_ROWS = 10;
export const CONCURRENT_DIM = 2;

/** Row i of generation gen: key i, values [gen, i + 0.5] (float32-exact). */
export async function concurrentTable(gen: number): Promise<EmbeddingTable> {
  const t = emptyConcurrentTable();
  const keys = Array.from({ length: CONCURRENT_ROWS }, (_, i) => BigInt(i));
  await t.upsert(keys, Float32Array.from(keys.flatMap((_, i) => [gen, i + 0.5])));
  return t;
}

export function emptyConcurrentTable(): EmbeddingTable {
  return createTable({ dim: CONCURRENT_DIM, name: 'conc' }, { backend: referenceBackend });
}

/** The one generation every row of `t` belongs to; throws unless the table is exactly one complete generation. */
export async function generationOf(t: EmbeddingTable): Promise<number> {
  const b = await t.export();
  if (b.keys.length !== CONCURRENT_ROWS) throw new Error(`expected ${CONCURRENT_ROWS} rows but found ${b.keys.length}`);
  const gens = new Set<number>();
  for (let r = 0; r < b.keys.length; r++) {
    const i = Number(b.keys[r]);
    gens.add(b.values[r * 2]!);
    if (b.values[r * 2 + 1] !== i + 0.5) throw new Error(`row ${i}: value ${b.values[r * 2 + 1]}, expected ${i + 0.5}`);
  }
  if (gens.size !== 1) throw new Error(`a mix of generations: ${[...gens].join(', ')}`);
  return [...gens][0]!;
}
