import { appendFile, mkdir, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../errors.js';
import { optimizers } from '../optimizers.js';
import { referenceBackend } from '../reference/index.js';
import { createTable, type EmbeddingTable } from '../table.js';
import type { TableOptions } from '../tableOptions.js';
import { loadTable, readCheckpointBatches, readTableManifest, saveTable, verifyCheckpoint } from './index.js';
import { rejection, rowsOf, withTempDir } from '../../test/checkpoint/testUtil.js';

const OPTS: TableOptions = { dim: 3, optimizer: optimizers.adagrad({ learningRate: 0.1 }), scorePolicy: 'customized' };
const make = (o: TableOptions = OPTS) => createTable(o, { backend: referenceBackend });

/** Saves a 40-row checkpoint into dir; returns its version directory. */
async function writeCheckpoint(dir: string, o: TableOptions = OPTS): Promise<string> {
  const t = make(o);
  const keys = Array.from({ length: 40 }, (_, i) => BigInt(i * 11 - 200));
  await t.upsert(keys, Float32Array.from({ length: 40 * o.dim }, (_, i) => i / 4), o.scorePolicy === 'customized' ? { scores: BigUint64Array.from(keys, (_, i) => BigInt(i)) } : undefined);
  await saveTable(t, dir);
  return join(dir, (await readFile(join(dir, 'CURRENT'), 'utf8')).trim());
}

/** A target table already holding two rows, and a snapshot of it. */
async function target(o: TableOptions = OPTS): Promise<[EmbeddingTable, Awaited<ReturnType<typeof rowsOf>>]> {
  const t = make(o);
  await t.upsert([5n, 7n], new Float32Array(2 * o.dim).fill(9), o.scorePolicy === 'customized' ? { scores: new BigUint64Array([50n, 60n]) } : undefined);
  return [t, await rowsOf(t)];
}

async function flipByte(path: string, at: number): Promise<void> {
  const b = await readFile(path);
  b[at] = b[at]! ^ 0x10;
  await writeFile(path, b);
}

describe('loadTable refuses damaged checkpoints and leaves the table unchanged', () => {
  for (const file of ['keys', 'values', 'slot-accumulators', 'scores']) {
    it(`one flipped byte in "${file}" -> CHECKPOINT_CORRUPT naming the file and both CRCs`, async () => {
      await withTempDir(async (dir) => {
        const v = await writeCheckpoint(dir);
        const size = (await stat(join(v, file))).size;
        await flipByte(join(v, file), Math.floor(size / 2) + 1);
        const [t, before] = await target();
        const e = await rejection(loadTable(t, dir));
        expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
        expect(e.message).toContain(join(v, file));
        expect(e.message).toMatch(/expected CRC32C 0x[0-9a-f]{8} \(manifest\) but computed 0x[0-9a-f]{8}/);
        expect(await rowsOf(t)).toEqual(before);
        // the other readers refuse it too
        expect((await rejection(verifyCheckpoint(dir))).code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
        const it = readCheckpointBatches(dir);
        expect((await rejection(it.next())).code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      });
    });
  }

  it('a truncated file -> CHECKPOINT_CORRUPT "truncated", expected vs found bytes', async () => {
    await withTempDir(async (dir) => {
      const v = await writeCheckpoint(dir);
      const size = (await stat(join(v, 'values'))).size;
      await truncate(join(v, 'values'), size - 5);
      const [t, before] = await target();
      const e = await rejection(loadTable(t, dir));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toBe(`Checkpoint file "${join(v, 'values')}" is truncated: expected ${size} bytes (manifest) but found ${size - 5}`);
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('extra bytes after the data -> CHECKPOINT_CORRUPT naming the file', async () => {
    await withTempDir(async (dir) => {
      const v = await writeCheckpoint(dir);
      await appendFile(join(v, 'scores'), Buffer.alloc(8));
      const [t, before] = await target();
      const e = await rejection(loadTable(t, dir));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toContain(`"${join(v, 'scores')}" is 8 bytes too long`);
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('a missing data file -> CHECKPOINT_CORRUPT naming it', async () => {
    await withTempDir(async (dir) => {
      const v = await writeCheckpoint(dir);
      await rm(join(v, 'slot-accumulators'));
      const [t, before] = await target();
      const e = await rejection(loadTable(t, dir));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toContain(`"${join(v, 'slot-accumulators')}" is missing`);
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('a table of another dim -> INVALID_ARGUMENT naming dim, both values', async () => {
    await withTempDir(async (dir) => {
      await writeCheckpoint(dir);
      const o = { ...OPTS, dim: 4 };
      const [t, before] = await target(o);
      const e = await rejection(loadTable(t, dir));
      expect(e.code).toBe(ErrorCodes.INVALID_ARGUMENT);
      expect(e.argument).toBe('dim');
      expect(e.message).toMatch(/expected dim to be 4 \(the table's\) but the manifest has 3/);
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('other key dtype, other slots, other kind -> INVALID_ARGUMENT naming the field', async () => {
    await withTempDir(async (dir) => {
      await writeCheckpoint(dir);
      const cases: [TableOptions, string][] = [
        [{ ...OPTS, keyDtype: 'int32' }, 'keyDtype'],
        [{ ...OPTS, optimizer: optimizers.adam({ learningRate: 0.1 }) }, 'slots'],
        [{ ...OPTS, optimizer: optimizers.rowWiseAdagrad({ learningRate: 0.1 }) }, 'slot widths'],
        [{ kind: 'static', vocabularySize: 500, dim: 3, optimizer: optimizers.adagrad({ learningRate: 0.1 }) }, 'kind'],
      ];
      for (const [o, field] of cases) {
        const [t, before] = await target(o);
        const e = await rejection(loadTable(t, dir));
        expect(e.code, field).toBe(ErrorCodes.INVALID_ARGUMENT);
        expect(e.argument).toBe(field);
        expect(e.message).toContain(`expected ${field} to be`);
        expect(await rowsOf(t)).toEqual(before);
      }
    });
  });

  it('a hand-edited manifest (dim changed) -> CHECKPOINT_CORRUPT naming manifest.json (self-checksum)', async () => {
    await withTempDir(async (dir) => {
      const v = await writeCheckpoint(dir);
      const path = join(v, 'manifest.json');
      await writeFile(path, (await readFile(path, 'utf8')).replace('"dim": 3', '"dim": 4'));
      const [t, before] = await target({ ...OPTS, dim: 4 });
      const e = await rejection(loadTable(t, dir));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toContain(path);
      expect(e.message).toContain('manifestCrc32c');
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('a manifest without its checksum is still checked: dim that disagrees with the file sizes -> CHECKPOINT_CORRUPT naming the field', async () => {
    await withTempDir(async (dir) => {
      const v = await writeCheckpoint(dir);
      const path = join(v, 'manifest.json');
      const m = JSON.parse(await readFile(path, 'utf8'));
      delete m.manifestCrc32c;
      m.dim = 4;
      await writeFile(path, JSON.stringify(m));
      const [t, before] = await target({ ...OPTS, dim: 4 });
      const e = await rejection(loadTable(t, dir));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toContain(path);
      expect(e.message).toContain('files.values.bytes');
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('manifest not JSON, unknown format version, garbage CURRENT -> CHECKPOINT_CORRUPT', async () => {
    await withTempDir(async (dir) => {
      const v = await writeCheckpoint(dir);
      const path = join(v, 'manifest.json');
      const good = await readFile(path, 'utf8');
      await writeFile(path, good.slice(0, 100));
      expect((await rejection(readTableManifest(dir))).message).toContain('not valid JSON');
      const m = JSON.parse(good);
      delete m.manifestCrc32c;
      m.formatVersion = 99;
      await writeFile(path, JSON.stringify(m));
      const e = await rejection(readTableManifest(dir));
      expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(e.message).toContain('formatVersion');
      await writeFile(join(dir, 'CURRENT'), 'hello\n');
      const c = await rejection(readTableManifest(dir));
      expect(c.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
      expect(c.message).toContain(join(dir, 'CURRENT'));
      await writeFile(join(dir, 'CURRENT'), 'ckpt-000000000077\n');
      expect((await rejection(readTableManifest(dir))).message).toContain('"ckpt-000000000077" but that directory does not exist');
    });
  });

  it('no checkpoint at all -> NOT_FOUND naming dir', async () => {
    await withTempDir(async (dir) => {
      const [t, before] = await target();
      const e = await rejection(loadTable(t, join(dir, 'nope')));
      expect(e.code).toBe(ErrorCodes.NOT_FOUND);
      expect(e.argument).toBe('dir');
      expect(e.message).toContain(join(dir, 'nope'));
      await mkdir(join(dir, 'empty'));
      expect((await rejection(loadTable(t, join(dir, 'empty')))).code).toBe(ErrorCodes.NOT_FOUND);
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('static checkpoint into a smaller static table: INVALID_ARGUMENT (vocabularySize); with a filter that lets a large row through: OUT_OF_RANGE; table unchanged', async () => {
    await withTempDir(async (dir) => {
      const big: TableOptions = { kind: 'static', vocabularySize: 10, dim: 2 };
      const src = make(big);
      await src.importRows(
        Array.from({ length: 10 }, (_, i) => BigInt(i)),
        Float32Array.from({ length: 20 }, (_, i) => i),
      );
      await saveTable(src, dir);
      const small = make({ kind: 'static', vocabularySize: 5, dim: 2 });
      await small.upsert([1n], [3, 3]);
      const before = await rowsOf(small);
      const e = await rejection(loadTable(small, dir));
      expect([e.code, e.argument]).toEqual([ErrorCodes.INVALID_ARGUMENT, 'vocabularySize']);
      const r = await rejection(loadTable(small, dir, { filter: (k) => k !== 9n }));
      expect(r.code).toBe(ErrorCodes.OUT_OF_RANGE);
      expect(r.message).toContain('key 5');
      expect(await rowsOf(small)).toEqual(before);
      await loadTable(small, dir, { filter: (k) => k < 5n });
      expect((await rowsOf(small)).get(4n)!.values).toEqual([8, 9]);
    });
  });
});

describe('argument checks (nothing is written on a rejected call)', () => {
  it('saveTable: bad table, dir, batchSize, shard, extra and unknown options', async () => {
    await withTempDir(async (dir) => {
      const t = make();
      const target = join(dir, 'x');
      const cases: [Promise<unknown>, string, string][] = [
        [saveTable(null as never, target), 'table', ErrorCodes.INVALID_TYPE],
        [saveTable(t, '' as never), 'dir', ErrorCodes.INVALID_ARGUMENT],
        [saveTable(t, 42 as never), 'dir', ErrorCodes.INVALID_TYPE],
        [saveTable(t, target, { batchSize: 0 }), 'batchSize', ErrorCodes.INVALID_ARGUMENT],
        [saveTable(t, target, { shard: { index: 2, count: 2 } }), 'shard', ErrorCodes.INVALID_ARGUMENT],
        [saveTable(t, target, { extra: { n: 1n } }), 'extra', ErrorCodes.INVALID_ARGUMENT],
        [saveTable(t, target, { bogus: 1 } as never), 'options.bogus', ErrorCodes.INVALID_ARGUMENT],
      ];
      for (const [p, argument, code] of cases) {
        const e = await rejection(p);
        expect([e.code, e.argument], argument).toEqual([code, argument]);
        expect(e.message).toContain(`Expected ${argument} to be`);
      }
      expect(await readdir(dir)).toEqual([]);
    });
  });

  it('loadTable: bad batchSize, filter, clear', async () => {
    await withTempDir(async (dir) => {
      await writeCheckpoint(dir);
      const [t, before] = await target();
      for (const [o, argument] of [
        [{ batchSize: -1 }, 'batchSize'],
        [{ filter: 3 }, 'filter'],
        [{ clear: 'yes' }, 'clear'],
      ] as const) {
        const e = await rejection(loadTable(t, dir, o as never));
        expect(e.argument).toBe(argument);
        expect(e.message).toContain(`Expected ${argument} to be`);
      }
      expect(await rowsOf(t)).toEqual(before);
    });
  });

  it('a file-system failure -> IO_ERROR naming the path, with the cause', async () => {
    await withTempDir(async (dir) => {
      await writeFile(join(dir, 'afile'), 'x');
      const e = await rejection(saveTable(make(), join(dir, 'afile', 'ckpt')));
      expect(e.code).toBe(ErrorCodes.IO_ERROR);
      expect(e.message).toContain(join(dir, 'afile', 'ckpt'));
      expect((e.cause as NodeJS.ErrnoException).code).toBe('ENOTDIR');
      expect(await readFile(join(dir, 'afile'), 'utf8')).toBe('x');
    });
  });

  it('a disposed table is refused', async () => {
    await withTempDir(async (dir) => {
      const t = make();
      t.dispose();
      const e = await rejection(saveTable(t, dir));
      expect([e.code, e.argument]).toEqual([ErrorCodes.DISPOSED, 'table']);
    });
  });
});
