// A 10M-row HugeCTR table loads in bounded memory: the model files are streamed a batch at a time.
import { afterAll, describe, expect, it } from 'vitest';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { HPS } from './index.js';
import { psConfig, tempDir } from '../test/fixtures.js';

const ROWS = 10_000_000;
/** Key of row i and its one float (exact in float32), written here independently of the loader. */
const keyOf = (i: number): bigint => BigInt(i) * 3n - 7n;
const valueOf = (i: number): number => (i % 1024) / 8;

const t = tempDir('hps-10m-');
afterAll(() => t.cleanup());

/** Writes the `key` / `emb_vector` files of a dim-1 table in 1M-row pieces (the writer is bounded too). */
function writeBigTable(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const kf = openSync(join(dir, 'key'), 'w');
  const vf = openSync(join(dir, 'emb_vector'), 'w');
  const piece = 1 << 20;
  const k = new BigInt64Array(piece);
  const v = new Float32Array(piece);
  for (let row = 0; row < ROWS; row += piece) {
    const n = Math.min(piece, ROWS - row);
    for (let j = 0; j < n; j++) {
      k[j] = keyOf(row + j);
      v[j] = valueOf(row + j);
    }
    writeSync(kf, new Uint8Array(k.buffer, 0, n * 8));
    writeSync(vf, new Uint8Array(v.buffer, 0, n * 4));
  }
  closeSync(kf);
  closeSync(vf);
  return dir;
}

describe('HPS model loading', () => {
  it('streams a 10M-row table (120 MB of files) in bounded memory, with progress, and serves it exactly', async () => {
    const folder = writeBigTable(join(t.dir, 'big'));
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // V8 frees dead ArrayBuffers' memory on a background thread after a full collection
    // (concurrent array buffer sweeping), so right after one gc() `arrayBuffers` may still
    // count batches already dead, the more the busier the machine (2.8-6.8 MiB here at load
    // 12 where 0.77 MiB was live; 8.9 MiB once at load 13-37). The next collection first
    // waits for that sweep: after two, it counts what was live at the first.
    const settled = (): NodeJS.MemoryUsage => {
      gc();
      gc();
      return process.memoryUsage();
    };
    const base = settled();
    let peakBuffers = 0;
    let peakRss = 0;
    let batches = 0;
    let last = 0;
    // L2 keeps the first 1% of the rows (initial_cache_rate), so the rest of the file is read and dropped:
    // what is measured is the loader's own memory, not the store's
    const s = await HPS.create({
      psConfig: psConfig([folder], [1], { gpucache: false, max_batch_size: 4096 }, { volatile_db: { type: 'hash_map', num_partitions: 4, initial_cache_rate: 0.01 } }),
      onProgress: (p: { rowsLoaded: number; rows: number }) => {
        expect(p.rows).toBe(ROWS);
        expect(p.rowsLoaded).toBeGreaterThan(last);
        last = p.rowsLoaded;
        if (++batches % 8 !== 0) return;
        const m = settled();
        peakBuffers = Math.max(peakBuffers, m.arrayBuffers - base.arrayBuffers);
        peakRss = Math.max(peakRss, m.rss - base.rss);
      },
    });
    try {
      expect(last).toBe(ROWS);
      expect(batches).toBe(Math.ceil(ROWS / 65536)); // the default load batch: 65536 rows
      // one batch is 65536 * (8 + 4) bytes = 768 KiB, and one is live (0.77 MiB measured);
      // reading the files whole would hold 120 MB, keeping every batch as much
      expect(peakBuffers).toBeLessThan(4 << 20);
      expect(peakRss).toBeLessThan(64 << 20);
      const rows = [0, 1, 65535, 65536, 99_999, 100_000, ROWS - 1];
      const got = await s.lookup(rows.map(keyOf), 'm', 0);
      // rows below 1% of 10M are in L2; the others are in no level (L3 disabled): the default -1
      expect(Array.from(got.data as Float32Array)).toEqual(rows.map((i) => (i < 100_000 ? valueOf(i) : -1)));
    } finally {
      await s.close();
    }
  }, 120000);
});
