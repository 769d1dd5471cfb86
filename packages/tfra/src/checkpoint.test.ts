import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTable, saveTable } from '@embedstack/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, sortedKeys, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

const dirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'tfra-ckpt-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** key -> row of every key in `v`, sorted by key. */
async function contents(v: de.Variable): Promise<[string, number[]][]> {
  const [keys, values] = await v.export();
  const rows = rowsOf(values.data, v.dim);
  return Array.from(keys as ArrayLike<bigint | number>, (k, i): [string, number[]] => [String(k), rows[i]!]).sort((a, b) => Number(BigInt(a[0]) - BigInt(b[0])));
}

/** Everything observable of `v`: rows, per-shard sizes, the slots of `opt` when bound. */
async function snapshot(v: de.Variable, opt?: de.Optimizer): Promise<unknown> {
  const sizes: number[] = [];
  for (let s = 0; s < v.shardNum; s++) sizes.push(await v.size(s));
  const slots = opt ? await Promise.all(v.getSlotVariables(opt).map(async (sv) => [sv.name, await contents(sv)])) : [];
  return { rows: await contents(v), sizes, slots, iterations: opt?.iterations ?? null };
}

const row = (k: number, gen: number): number[] => [k + gen / 10, -k - gen / 10];

async function filled(name: string, devices: string[], keys: number[], gen: number): Promise<de.Variable> {
  const v = new de.Variable({ dim: 2, name, devices });
  await v.upsert(keys.map(BigInt), keys.flatMap((k) => row(k, gen)));
  return v;
}

/** The files of `dir`, recursively (relative paths), sorted. */
function tree(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true })
    .flatMap((d) => (d.isDirectory() ? tree(dir, join(prefix, d.name)) : [join(prefix, d.name)]))
    .sort();
}

describe('saveToFileSystem / loadFromFileSystem: one save is one unit', () => {
  it('a save with fewer shards hides the folders of an earlier save with more: deleted keys stay deleted, new values win', async () => {
    const dir = tmp();
    const name = uniqueName('reshard');
    const keys16 = Array.from({ length: 16 }, (_, i) => i);
    await (await filled(name, ['a', 'b', 'c', 'd'], keys16, 1)).saveToFileSystem(dir);
    const keys8 = keys16.slice(0, 8);
    await (await filled(name, ['a', 'b'], keys8, 2)).saveToFileSystem(dir);
    const back = new de.Variable({ dim: 2, name, devices: ['a', 'b', 'c'] });
    await back.loadFromFileSystem(dir);
    expect(await contents(back)).toEqual(keys8.map((k) => [String(k), row(k, 2).map(Math.fround)]));
    // the 4-shard folders are gone: the version holds exactly the 2 shards and the manifest
    const files = tree(join(dir, name, 'proc_0_of_1'));
    expect(files.filter((f) => f.includes('_of_4'))).toEqual([]);
    expect(new Set(files.filter((f) => f.includes('/')).map((f) => f.split('/')[1]))).toEqual(new Set(['shard_0_of_2', 'shard_1_of_2', 'tfra-variable.json']));
  });

  it('a save with one process hides the parts of an earlier save with two, which it then deletes', async () => {
    const dir = tmp();
    const name = uniqueName('procs');
    for (const rank of [0, 1]) {
      const keys = [1, 2, 3, 4].filter((k) => k % 2 === rank);
      await (await filled(name, ['a'], keys, 1)).saveToFileSystem(dir, { procSize: 2, procRank: rank });
    }
    await (await filled(name, ['a'], [3, 4], 2)).saveToFileSystem(dir);
    const back = new de.Variable({ dim: 2, name });
    await back.loadFromFileSystem(dir);
    expect(await contents(back)).toEqual([3, 4].map((k) => [String(k), row(k, 2).map(Math.fround)]));
    expect(readdirSync(join(dir, name))).toEqual(['proc_0_of_1']);
  });

  it('while a save of two processes is incomplete, the last complete save is loaded', async () => {
    const dir = tmp();
    const name = uniqueName('half');
    await (await filled(name, ['a'], [1, 2], 1)).saveToFileSystem(dir);
    await (await filled(name, ['a'], [2], 2)).saveToFileSystem(dir, { procSize: 2, procRank: 0 }); // rank 1 not yet
    const back = new de.Variable({ dim: 2, name });
    await back.loadFromFileSystem(dir);
    expect(await contents(back)).toEqual([1, 2].map((k) => [String(k), row(k, 1).map(Math.fround)]));
    // with no complete save at all, the load is refused, naming the missing part
    const lone = uniqueName('lone');
    await (await filled(lone, ['a'], [2], 2)).saveToFileSystem(dir, { procSize: 2, procRank: 1 });
    await expectError(new de.Variable({ dim: 2, name: lone }).loadFromFileSystem(dir), 'CHECKPOINT_CORRUPT', 'rank 0', 'proc_0_of_2');
  });

  it('a refused load (a corrupt later shard, a missing dir, another dim) changes nothing, and binds no optimizer', async () => {
    const dir = tmp();
    const name = uniqueName('refused');
    const src = await filled(name, ['a', 'b'], [0, 1, 2, 3, 4, 5, 6, 7, 8], 1);
    await src.saveToFileSystem(dir);
    const target = await filled(name, ['a', 'b'], [1, 20], 5);
    const opt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.1 }));
    const before = await snapshot(target, opt);
    // flip one byte in the last shard's values
    const version = join(dir, name, 'proc_0_of_1', readFileSync(join(dir, name, 'proc_0_of_1', 'CURRENT'), 'utf8').trim());
    const shard1 = join(version, 'shard_1_of_2');
    const values = join(shard1, readFileSync(join(shard1, 'CURRENT'), 'utf8').trim(), 'values');
    const bytes = readFileSync(values);
    bytes[5]! ^= 0x10;
    writeFileSync(values, bytes);
    await expectError(target.loadFromFileSystem(dir, { optimizer: opt }), 'CHECKPOINT_CORRUPT', 'values');
    expect(await snapshot(target, opt)).toEqual(before);
    await expectError(target.loadFromFileSystem(join(dir, 'missing'), { optimizer: opt }), 'NOT_FOUND', 'dir');
    expect(await snapshot(target, opt)).toEqual(before);
    const wide = new de.Variable({ dim: 3, name });
    const wideOpt = de.DynamicEmbeddingOptimizer(new de.optimizers.Adam({ learningRate: 0.1 }));
    await expectError(wide.loadFromFileSystem(dir, { optimizer: wideOpt }), 'INVALID_ARGUMENT', 'dim 2');
    expect(await wide.size()).toBe(0);
    // no optimizer was bound: another one trains the variable (SGD lr 1: w = w - g)
    const sgd = de.DynamicEmbeddingOptimizer(new de.optimizers.SGD({ learningRate: 1 }));
    const [, tw] = await de.embeddingLookup(target, [1n], { name: 't', returnTrainable: true });
    await sgd.applyGradients([[[1, 1], tw]]);
    expect(rowsOf((await target.lookup([1n])).data, 2)).toEqual([row(1, 5).map((x) => Math.fround(Math.fround(x) - 1))]);
  });

  it('refuses a checkpoint of another key dtype before writing anything', async () => {
    const dir = tmp();
    const name = uniqueName('dtype');
    const narrow = new de.Variable({ dim: 2, name, keyDtype: 'int32' });
    await narrow.upsert([1, 2], [1, 1, 2, 2]);
    await narrow.saveToFileSystem(dir);
    const wide = await filled(name, ['a'], [9], 1);
    const before = await snapshot(wide);
    await expectError(wide.loadFromFileSystem(dir), 'INVALID_ARGUMENT', 'dir', 'keyDtype int32');
    expect(await snapshot(wide)).toEqual(before);
  });

  it("variables whose names map to one folder ('a/b', 'a_b'): saving the second and loading the other are refused", async () => {
    const dir = tmp();
    const stem = uniqueName('m');
    const slash = await filled(`${stem}/emb`, ['a'], [1, 2], 1);
    await slash.saveToFileSystem(dir);
    const under = await filled(`${stem}_emb`, ['a'], [3], 2);
    await expectError(under.saveToFileSystem(dir), 'ALREADY_EXISTS', `"${stem}_emb"`, `"${stem}/emb"`);
    await expectError(under.loadFromFileSystem(dir), 'INVALID_ARGUMENT', 'dir', `"${stem}/emb"`);
    expect(await contents(under)).toEqual([['3', row(3, 2).map(Math.fround)]]);
    const back = new de.Variable({ dim: 2, name: `${stem}/emb` });
    await back.loadFromFileSystem(dir);
    expect(await contents(back)).toEqual([1, 2].map((k) => [String(k), row(k, 1).map(Math.fround)]));
  });

  it('still loads the first layout (shard folders in proc_<r>_of_<s>): the newest complete shard count', async () => {
    const dir = tmp();
    const name = uniqueName('legacy');
    const proc = join(dir, name, 'proc_0_of_1');
    const extra = { tfra: { variable: name, keyDtype: 'int64', procRank: 0, procSize: 1 } };
    const saveShards = async (keys: number[], n: number, gen: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const t = createTable({ kind: 'dynamic', dim: 2, keyDtype: 'int64', name: `${name}_${i}` });
        const mine = keys.filter((k) => k % n === i);
        await t.upsert(BigInt64Array.from(mine.map(BigInt)), Float32Array.from(mine.flatMap((k) => row(k, gen))));
        await saveTable(t, join(proc, `shard_${i}_of_${n}`), { shard: { index: i, count: n }, extra });
        t.dispose();
      }
    };
    await saveShards([1, 2, 3, 4, 5, 6], 3, 1);
    await saveShards([1, 2], 2, 2);
    const back = new de.Variable({ dim: 2, name });
    await back.loadFromFileSystem(dir);
    expect(await contents(back)).toEqual([1, 2].map((k) => [String(k), row(k, 2).map(Math.fround)]));
    // a new save replaces the first layout's folders
    await (await filled(name, ['a'], [7], 3)).saveToFileSystem(dir);
    expect(readdirSync(proc).filter((f) => f.startsWith('shard_'))).toEqual([]);
    const again = new de.Variable({ dim: 2, name });
    await again.loadFromFileSystem(dir);
    expect(sortedKeys((await again.export())[0])).toEqual([7n]);
  });
});
