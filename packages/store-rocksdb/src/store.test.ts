import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RocksStore } from './index.js';
import { tempDir } from '../test/tmp.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function openTemp(extra: Record<string, unknown> = {}): Promise<{ store: RocksStore; dir: string }> {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const store = await RocksStore.open({ path: join(t.dir, 'db'), tables: ['a', 'b'], ...extra });
  cleanups.push(() => store.close());
  return { store, dir: join(t.dir, 'db') };
}

/** Row of key k in the tests: [k*10 + c for each column c] (computed here, independent of the store). */
function rowOf(k: bigint, dim: number): number[] {
  return Array.from({ length: dim }, (_, c) => Number(k) * 10 + c);
}

describe('RocksStore', () => {
  it('puts and multi-gets exact rows, misses are zeros and not found', async () => {
    const { store } = await openTemp({ maxBatchSize: 3 });
    const keys = [5n, -7n, 123456789012345n, 0n, 9007199254740993n];
    const vals = new Float32Array(keys.flatMap((k) => rowOf(k, 2)));
    await store.put('a', keys, vals);
    const got = await store.multiGet('a', [0n, 5n, 42n, -7n, 9007199254740993n], 2);
    expect(Array.from(got.found)).toEqual([1, 1, 0, 1, 1]);
    expect(got.hits).toBe(4);
    expect(Array.from(got.values)).toEqual([...rowOf(0n, 2), ...rowOf(5n, 2), 0, 0, ...rowOf(-7n, 2), ...Array.from(new Float32Array(rowOf(9007199254740993n, 2)))]);
  });

  it('keeps tables apart (one column family each)', async () => {
    const { store } = await openTemp();
    await store.put('a', [1n], new Float32Array([1, 2]));
    await store.put('b', [1n], new Float32Array([3, 4, 5]));
    expect(Array.from((await store.multiGet('a', [1n], 2)).values)).toEqual([1, 2]);
    expect(Array.from((await store.multiGet('b', [1n], 3)).values)).toEqual([3, 4, 5]);
  });

  it('overwrites, removes, and persists across reopen; read-only refuses writes', async () => {
    const { store, dir } = await openTemp();
    await store.put('a', [1n, 2n], new Float32Array([1, 1, 2, 2]));
    await store.put('a', [2n], new Float32Array([9, 9]));
    await store.remove('a', [1n, 77n]);
    await store.close();
    const ro = await RocksStore.open({ path: dir, tables: ['a', 'b'], readOnly: true });
    cleanups.push(() => ro.close());
    const got = await ro.multiGet('a', [1n, 2n], 2);
    expect(Array.from(got.found)).toEqual([0, 1]);
    expect(Array.from(got.values)).toEqual([0, 0, 9, 9]);
    await expect(ro.put('a', [3n], new Float32Array([1, 1]))).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
  });

  it("compact gives a cleared table's disk back (its table files); the other table is untouched, the cleared one stays open and empty", async () => {
    const { store, dir } = await openTemp();
    const bytes = (): number => readdirSync(dir).reduce((a, f) => a + (/\.(sst|log)$/.test(f) ? statSync(join(dir, f)).size : 0), 0);
    const n = 100_000; // 100000 rows of 16 floats: 6.4 MB of values
    const keys = BigInt64Array.from({ length: n }, (_, i) => BigInt(i));
    await store.put('a', keys, Float32Array.from({ length: n * 16 }, (_, j) => j % 977));
    await store.put('b', [1n, 2n], new Float32Array([1, 1, 2, 2]));
    await store.compact('a'); // flushed into table files (the log of the writes can go)
    await store.compact('b');
    const full = bytes();
    expect(full).toBeGreaterThan(n * 64);
    await store.clear('a');
    expect(bytes()).toBeGreaterThan(n * 64); // a range deletion alone frees nothing
    await store.compact('a');
    expect(bytes()).toBeLessThan(n * 4); // the table files of 'a' are deleted
    expect((await store.multiGet('a', keys.subarray(0, 1000), 16)).hits).toBe(0);
    expect(Array.from((await store.multiGet('b', [1n, 2n], 2)).values)).toEqual([1, 1, 2, 2]);
    expect(store.tables()).toEqual(['a', 'b']);
    await store.put('a', [5n], new Float32Array(16).fill(3));
    expect(Array.from((await store.multiGet('a', [5n], 16)).values)).toEqual(Array.from({ length: 16 }, () => 3));
    await expect(store.compact('zz')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('clears one table: every key gone (the extreme keys too), the other table untouched, writable after', async () => {
    const { store, dir } = await openTemp();
    const keys = [-(2n ** 63n), -1n, 0n, 1n, 2n ** 63n - 1n];
    await store.put('a', keys, new Float32Array([1, 1, 2, 2, 3, 3, 4, 4, 5, 5]));
    await store.put('b', [0n, 2n ** 63n - 1n], new Float32Array([7, 7, 8, 8]));
    await store.clear('a');
    expect(Array.from((await store.multiGet('a', keys, 2)).found)).toEqual([0, 0, 0, 0, 0]);
    const rows: bigint[] = [];
    for await (const b of store.scan('a', 2)) rows.push(...b.keys);
    expect(rows).toEqual([]);
    expect(Array.from((await store.multiGet('b', [0n, 2n ** 63n - 1n], 2)).values)).toEqual([7, 7, 8, 8]);
    await store.put('a', [1n], new Float32Array([9, 9]));
    await store.close();
    const ro = await RocksStore.open({ path: dir, tables: ['a', 'b'], readOnly: true });
    cleanups.push(() => ro.close());
    const got = await ro.multiGet('a', keys, 2);
    expect(Array.from(got.found)).toEqual([0, 0, 0, 1, 0]);
    expect(Array.from(got.values.subarray(6, 8))).toEqual([9, 9]);
    await expect(ro.clear('a')).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(ro.clear('zz')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('reopens a database for writing without naming its tables: every table it holds is opened with it', async () => {
    const { store, dir } = await openTemp();
    await store.put('a', [1n, 2n], new Float32Array([1, 1, 2, 2]));
    await store.put('b', [3n], new Float32Array([3, 3, 3]));
    await store.close();
    const again = await RocksStore.open({ path: dir });
    expect(again.tables().sort()).toEqual(['a', 'b']);
    expect(Array.from((await again.multiGet('a', [2n, 1n], 2)).values)).toEqual([2, 2, 1, 1]);
    await again.addTables(['c']);
    await again.put('c', [4n], new Float32Array([4]));
    await again.close();
    const third = await RocksStore.open({ path: dir, tables: ['c'] });
    cleanups.push(() => third.close());
    expect(third.tables().sort()).toEqual(['a', 'b', 'c']);
    expect(Array.from((await third.multiGet('b', [3n], 3)).values)).toEqual([3, 3, 3]);
    expect(Array.from((await third.multiGet('c', [4n], 1)).values)).toEqual([4]);
  });

  it('bulk-loads batches and scans them back in full', async () => {
    const { store } = await openTemp({ maxBatchSize: 100 });
    async function* batches(): AsyncGenerator<{ keys: BigInt64Array; values: Float32Array }> {
      for (let b = 0; b < 5; b++) {
        const keys = BigInt64Array.from({ length: 250 }, (_, i) => BigInt(b * 250 + i));
        yield { keys, values: new Float32Array(Array.from(keys).flatMap((k) => rowOf(k, 3))) };
      }
    }
    expect(await store.bulkLoad('b', batches())).toBe(1250);
    const seen = new Map<bigint, number[]>();
    for await (const { keys, values } of store.scan('b', 3, 400)) {
      keys.forEach((k, i) => seen.set(k, Array.from(values.subarray(i * 3, i * 3 + 3))));
    }
    expect(seen.size).toBe(1250);
    for (const k of [0n, 1n, 777n, 1249n]) expect(seen.get(k)).toEqual(rowOf(k, 3));
    const got = await store.multiGet('b', [1249n, 1250n], 3);
    expect(Array.from(got.values)).toEqual([...rowOf(1249n, 3), 0, 0, 0]);
  });

  it('adds tables by reopening, keeping the data', async () => {
    const { store } = await openTemp();
    await store.put('a', [4n], new Float32Array([4]));
    await store.addTables(['c']);
    expect(store.tables().sort()).toEqual(['a', 'b', 'c']);
    await store.put('c', [4n], new Float32Array([8]));
    expect(Array.from((await store.multiGet('a', [4n], 1)).values)).toEqual([4]);
    expect(Array.from((await store.multiGet('c', [4n], 1)).values)).toEqual([8]);
  });

  it('rejects bad calls with coded errors and changes nothing', async () => {
    const { store } = await openTemp();
    await store.put('a', [1n], new Float32Array([1, 2]));
    await expect(store.multiGet('zz', [1n], 2)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(store.put('a', [1n, 2n], new Float32Array([1, 2, 3]))).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    await expect(store.multiGet('a', [1n], 3)).rejects.toMatchObject({ code: 'CHECKPOINT_CORRUPT' });
    await expect(store.multiGet('a', [1.5], 2)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    expect(Array.from((await store.multiGet('a', [1n, 2n], 2)).values)).toEqual([1, 2, 0, 0]);
    await store.close();
    await expect(store.multiGet('a', [1n], 2)).rejects.toMatchObject({ code: 'DISPOSED' });
  });

  it('reports a path that cannot be opened as IO_ERROR (never hangs)', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const file = join(t.dir, 'file');
    writeFileSync(file, 'x');
    await expect(RocksStore.open({ path: join(file, 'db') })).rejects.toMatchObject({ code: 'IO_ERROR' });
    await expect(RocksStore.open({ path: join(t.dir, 'none'), readOnly: true })).rejects.toMatchObject({ code: 'IO_ERROR' });
    await expect(RocksStore.open({ path: 7 } as never)).rejects.toMatchObject({ code: 'INVALID_TYPE' });
    await expect(RocksStore.open({ path: t.dir, numThreads: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(RocksStore.open({ path: t.dir, nope: 1 } as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('one writer per folder in a process, whatever path names it (RocksDB alone let a link open a second): IO_ERROR saying so and what to do; read-only opens beside it; after close a writer opens', async () => {
    const { store, dir } = await openTemp();
    await store.put('a', [1n], new Float32Array([1, 2]));
    const link = join(dir, '..', 'link');
    symlinkSync(dir, link, 'dir');
    // the same folder by another spelling, and through a link
    for (const path of [join(dir, '..', 'db'), link]) {
      const second = RocksStore.open({ path });
      await expect(second).rejects.toMatchObject({ code: 'IO_ERROR', argument: 'options.path' });
      await expect(second).rejects.toThrow(/for writing: this process has the folder open for writing already .*close that store first, open this one read-only, or use another folder/);
    }
    const reader = await RocksStore.open({ path: dir, readOnly: true, tables: ['a'] });
    expect(Array.from((await reader.multiGet('a', [1n], 2)).values)).toEqual([1, 2]);
    await reader.close();
    await store.close();
    const again = await RocksStore.open({ path: link }); // through the link: the one writer now
    expect(Array.from((await again.multiGet('a', [1n], 2)).values)).toEqual([1, 2]);
    await again.close();
    // two opens of one new folder at once: one writer, the other refused
    const fresh = join(dir, '..', 'fresh');
    const both = await Promise.allSettled([RocksStore.open({ path: fresh }), RocksStore.open({ path: join(link, '..', 'fresh') })]);
    expect(both.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    for (const r of both) if (r.status === 'fulfilled') await r.value.close();
  });
});

/** Rejects when `p` has not settled after `ms` (a hang shows as a clear failure, not a test timeout). */
function settlesWithin<T>(p: Promise<T>, what: string, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not settle (hangs)`)), ms)));
  return Promise.race([p, hang]).finally(() => clearTimeout(timer));
}

describe('RocksStore failure paths', () => {
  it('close() ends open scans: an abandoned scan or a close inside the loop no longer hangs; the scan then rejects DISPOSED', async () => {
    const { store, dir } = await openTemp();
    const keys = BigInt64Array.from({ length: 300 }, (_, i) => BigInt(i));
    await store.put('a', keys, new Float32Array(600).fill(1));
    const abandoned = store.scan('a', 2, 100);
    expect((await abandoned.next()).value?.keys.length).toBe(100);
    await settlesWithin(store.close(), 'close() with an open scan');
    await expect(abandoned.next()).rejects.toMatchObject({ code: 'DISPOSED' });
    // closing from inside the loop
    const again = await RocksStore.open({ path: dir, tables: ['a'] });
    cleanups.push(() => again.close());
    let rows = 0;
    const loop = (async () => {
      for await (const b of again.scan('a', 2, 100)) {
        rows += b.keys.length;
        await again.close();
      }
    })();
    await expect(settlesWithin(loop, 'a scan whose loop closed the store')).rejects.toMatchObject({ code: 'DISPOSED' });
    expect(rows).toBe(100);
  });

  it('calls made while addTables reopens the database wait for it (they used to reject with a raw "session is closed")', async () => {
    const { store } = await openTemp();
    await store.put('a', [1n], new Float32Array([1, 1]));
    const adding = store.addTables(['c']);
    const calls = [
      store.put('a', [2n], new Float32Array([2, 2])),
      store.put('c', [3n], new Float32Array([3])),
      store.multiGet('a', [1n], 2).then((r) => Array.from(r.values)),
      store.remove('a', [9n]),
    ];
    await adding;
    const results = await Promise.all(calls);
    expect(results[2]).toEqual([1, 1]);
    expect(Array.from((await store.multiGet('a', [1n, 2n], 2)).values)).toEqual([1, 1, 2, 2]);
    expect(Array.from((await store.multiGet('c', [3n], 1)).values)).toEqual([3]);
    // a reopen would wait for an open scan forever: refused instead
    const open = store.scan('a', 2, 1);
    await open.next();
    await expect(store.addTables(['d'])).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await open.return(undefined);
    await store.addTables(['d']);
    expect(store.tables().sort()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a full disk (a 4 MiB tmpfs) rejects with IO_ERROR saying so; the rows written before stay readable', async (ctx) => {
    const t = tempDir('rocks-full-');
    cleanups.push(t.cleanup);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', t.dir]).status === 0;
    if (!mounted) ctx.skip('mounting a tmpfs is not permitted here (needs root)');
    cleanups.push(() => spawnSync('umount', [t.dir]));
    const store = await RocksStore.open({ path: join(t.dir, 'db'), tables: ['a'] });
    cleanups.push(() => store.close());
    const dim = 64;
    let written = 0;
    let error: unknown = null;
    for (let b = 0; b < 64 && !error; b++) {
      const keys = BigInt64Array.from({ length: 1000 }, (_, i) => BigInt(b * 1000 + i));
      await store.put('a', keys, new Float32Array(1000 * dim).fill(b)).then(
        () => (written += 1000),
        (e: unknown) => (error = e),
      );
    }
    expect(error, 'a 4 MiB disk took 16 MiB').not.toBeNull();
    expect(error).toMatchObject({ code: 'IO_ERROR' });
    expect((error as Error).message).toMatch(/No space left on device.*ENOSPC: the disk is full/);
    const keys = BigInt64Array.from({ length: written }, (_, i) => BigInt(i));
    const got = await store.multiGet('a', keys, dim);
    expect(got.hits).toBe(written);
    expect(got.values[(written - 1) * dim]).toBe(written / 1000 - 1);
  });

  it('a clean close leaves the rows in table files: a damaged write-ahead log afterwards loses none of them', async () => {
    const { store, dir } = await openTemp();
    const n = 20000;
    const keys = BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * 7n - 50000n);
    const values = new Float32Array(n * 4).map((_, i) => i);
    await store.put('a', keys, values);
    await store.close();
    // RocksDB's recovery stops silently at a damaged log record: garble the middle of every log
    for (const f of readdirSync(dir).filter((x) => x.endsWith('.log'))) {
      const b = readFileSync(join(dir, f));
      for (let i = b.length >> 1; i < Math.min(b.length, (b.length >> 1) + 4096); i++) b[i] = b[i]! ^ 0x5a;
      writeFileSync(join(dir, f), b);
    }
    const again = await RocksStore.open({ path: dir, tables: ['a'] });
    cleanups.push(() => again.close());
    const got = await again.multiGet('a', keys, 4);
    expect(got.hits).toBe(n);
    expect(got.values).toEqual(values);
  });

  it('a damaged table file: reads reject with IO_ERROR naming the checksum mismatch (they used to end the process)', async () => {
    const { store, dir } = await openTemp();
    const n = 20000;
    const keys = BigInt64Array.from({ length: n }, (_, i) => BigInt(i));
    await store.put('a', keys, new Float32Array(n * 4).fill(2));
    await store.close(); // flushes the rows into a table file (.sst)
    const ssts = readdirSync(dir).filter((x) => x.endsWith('.sst'));
    expect(ssts.length).toBeGreaterThan(0);
    for (const f of ssts) {
      const b = readFileSync(join(dir, f));
      for (let i = b.length >> 2; i < Math.min(b.length, (b.length >> 2) + 8192); i++) b[i] = b[i]! ^ 0x5a;
      writeFileSync(join(dir, f), b);
    }
    const again = await RocksStore.open({ path: dir, tables: ['a'], maxBatchSize: 1000 });
    cleanups.push(() => again.close());
    const err = await again.multiGet('a', keys, 4).then(() => null, (e: Error) => e);
    expect(err).toMatchObject({ code: 'IO_ERROR' });
    expect(err!.message).toMatch(/checksum mismatch|Corruption/i);
    const scanned = (async () => {
      for await (const b of again.scan('a', 4)) void b;
    })();
    await expect(scanned).rejects.toMatchObject({ code: 'IO_ERROR' });
  });
});
