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
