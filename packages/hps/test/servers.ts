// A test file's servers and scratch folder: servers made by serve() and cleanups pushed by the
// test are closed / run after each test (last first); the folder goes after the file.
import { afterAll, afterEach } from 'vitest';
import { HPS, type HpsOptions } from '../src/index.js';
import { tempDir } from './fixtures.js';

export function serverScope(prefix: string): { t: ReturnType<typeof tempDir>; cleanups: (() => unknown)[]; serve: (options: HpsOptions) => Promise<HPS> } {
  const t = tempDir(prefix);
  const cleanups: (() => unknown)[] = [];
  afterAll(() => t.cleanup());
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const serve = async (options: HpsOptions): Promise<HPS> => {
    const s = await HPS.create(options);
    cleanups.push(() => s.close());
    return s;
  };
  return { t, cleanups, serve };
}

/** Calls `check` every 20 ms until it holds, at most `n` times; then returns either way (the test's expect decides). */
export async function until(check: () => boolean | Promise<boolean>, n = 750): Promise<void> {
  for (let i = 0; i < n && !(await check()); i++) await new Promise((r) => setTimeout(r, 20));
}

/**
 * A test model's reads: `rowsOf(server, model)` the rows (`dim` floats each) a server returns
 * for `keys`, `wrongRows(got, want)` how many of those rows differ from the expected ones.
 */
export function modelRows(keys: readonly bigint[], dim: number): {
  rowsOf: (s: HPS, model: string) => Promise<number[]>;
  wrongRows: (got: number[], want: number[]) => number;
} {
  return {
    rowsOf: async (s, model) => Array.from((await s.lookup([...keys], model, 0)).data as Float32Array),
    wrongRows: (got, want) => {
      let n = 0;
      for (let i = 0; i < want.length; i += dim) if (got.slice(i, i + dim).some((v, j) => v !== want[i + j])) n++;
      return n;
    },
  };
}
