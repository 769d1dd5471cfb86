// review32b #1-#4, review32c #5: sok dump replaces its folder as a whole, checksums every
// file, keeps names inside the folder; a refused load changes nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32c, EmbeddingTable, IOError, RaggedTensor } from '@embedstack/core';
import * as sok from '@embedstack/sok';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectError, initDevices, rowsByKey, useTestBackend } from '../test/setup.js';

const root = mkdtempSync(join(tmpdir(), 'sok-dump-safety-'));
let n = 0;
/** A fresh folder path (not created) inside its own parent. */
const freshDir = () => {
  const parent = join(root, `case${n++}`);
  mkdirSync(parent);
  return { parent, dir: join(parent, 'model') };
};

beforeAll(async () => {
  await useTestBackend();
});
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(() => {
  sok.shutdown();
  rmSync(root, { recursive: true, force: true });
});

/** A dynamic variable with keys 0..rows-1, row k = [k * 10 + gen, -k] (dimension 2). */
async function filled(name: string, rows: number, gen: number): Promise<sok.DynamicVariable> {
  const v = new sok.DynamicVariable({ dimension: 2, name });
  const keys = Array.from({ length: rows }, (_, k) => BigInt(k));
  await sok.assign(v, keys, Float32Array.from({ length: rows * 2 }, (_, i) => (i % 2 === 0 ? (i / 2) * 10 + gen : -(i - 1) / 2)));
  return v;
}

/** The expected rows of `filled(name, rows, gen)`, computed independently. */
function expectedRows(rows: number, gen: number): Map<bigint, number[]> {
  return new Map(Array.from({ length: rows }, (_, k) => [BigInt(k), [k * 10 + gen, -k]]));
}

const sortedEntries = (m: Map<bigint, number[]>) => [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));

/** The first slot of every row (each device's table read directly: exportVariable has no slots). */
async function slotsByKey(v: sok.SokVariable): Promise<Map<bigint, number[]>> {
  const out = new Map<bigint, number[]>();
  const n = v.shards.length;
  for (const s of v.shards) {
    for await (const b of s.table.exportBatches()) {
      const width = b.slots[0] ? b.slots[0].length / b.keys.length : 0;
      for (let i = 0; i < b.keys.length; i++) {
        const local = BigInt(b.keys[i]!);
        const key = v.kind === 'static' && n > 1 ? local * BigInt(n) + BigInt(s.device) : local;
        out.set(key, b.slots[0] ? Array.from(b.slots[0].subarray(i * width, (i + 1) * width)) : []);
      }
    }
  }
  return out;
}

/** Every observable of the variables and the optimizer: rows, sizes, slots, iterations, the score clock. */
async function state(vars: sok.SokVariable[], opt?: sok.OptimizerWrapper) {
  return {
    rows: await Promise.all(vars.map(async (v) => sortedEntries(await rowsByKey(v)))),
    sizes: await Promise.all(vars.map((v) => v.size())),
    slots: vars.map((v) => [v.boundOptimizer ?? null, [...v.slotLayout.names]]),
    accumulators: await Promise.all(vars.map(async (v) => sortedEntries(await slotsByKey(v)))),
    iterations: opt?.iterations ?? null,
    score: sok.currentScore(),
  };
}

/** Loads `dir` into new dimension-2 dynamic variables of these names: their rows, sorted by key. */
async function loadBack(dir: string, names: string[]) {
  const vars = names.map((name) => new sok.DynamicVariable({ dimension: 2, name }));
  await sok.load(dir, vars);
  return Promise.all(vars.map(async (v) => sortedEntries(await rowsByKey(v))));
}

function flipBit(path: string, byte: number, bit = 0): void {
  const b = readFileSync(path);
  b[byte]! ^= 1 << bit;
  writeFileSync(path, b);
}

/** Rewrites a version 2 meta as a version 1 meta (a dump written before the checksums). */
function toVersion1(metaPath: string): void {
  const m = JSON.parse(readFileSync(metaPath, 'utf8')) as Record<string, unknown>;
  delete m.files;
  delete m.metaCrc32c;
  m.version = 1;
  writeFileSync(metaPath, JSON.stringify(m, null, 2));
}

describe('dump file names', () => {
  it("keeps names like '../escaped' and 'emb/user' inside the folder, one file set per name", async () => {
    await initDevices(2);
    const { parent, dir } = freshDir();
    const vars = [await filled('../escaped', 3, 1), await filled('emb/user', 4, 2), await filled('emb_user', 5, 3), await filled('emb', 2, 4)];
    await sok.dump(dir, vars);
    expect(readdirSync(parent)).toEqual(['model']);
    expect(readdirSync(dir).sort()).toEqual(
      ['%2E%2E%2Fescaped', 'emb%2Fuser', 'emb_user', 'emb'].flatMap((b) => [`${b}-key`, `${b}-meta.json`, `${b}-weight`]).sort(),
    );
    await initDevices(1);
    expect(await loadBack(dir, ['../escaped', 'emb/user', 'emb_user', 'emb'])).toEqual([sortedEntries(expectedRows(3, 1)), sortedEntries(expectedRows(4, 2)), sortedEntries(expectedRows(5, 3)), sortedEntries(expectedRows(2, 4))]);
  });
});

describe('dump replaces its folder as a whole', () => {
  it('a new dump replaces the previous one and keeps the files of other variables and other files', async () => {
    await initDevices(2);
    const { parent, dir } = freshDir();
    await sok.dump(dir, [await filled('a', 4, 1), await filled('b', 3, 1)]);
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    await sok.dump(dir, [await filled('a', 6, 2)]);
    expect(readdirSync(parent)).toEqual(['model']); // no temporary or aside folder left
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('mine');
    expect(await loadBack(dir, ['a', 'b'])).toEqual([sortedEntries(expectedRows(6, 2)), sortedEntries(expectedRows(3, 1))]);
  });

  it('refuses a folder holding a subfolder, writing nothing', async () => {
    await initDevices(1);
    const { parent, dir } = freshDir();
    mkdirSync(join(dir, 'sub'), { recursive: true });
    await expectError(sok.dump(dir, [await filled('a', 2, 1)]), 'FAILED_PRECONDITION', 'sub', 'folder of its own');
    expect(readdirSync(parent)).toEqual(['model']);
    expect(readdirSync(dir)).toEqual(['sub']);
  });

  it('a short write (full disk) fails with IOError naming the file and leaves the previous dump whole', async () => {
    await initDevices(2);
    const { parent, dir } = freshDir();
    await sok.dump(dir, [await filled('a', 50, 1), await filled('b', 50, 1)]);
    const probe = await open(join(dir, 'a-key'), 'r');
    const proto = Object.getPrototypeOf(probe) as { write: (...a: unknown[]) => Promise<{ bytesWritten: number }> };
    await probe.close();
    const real = proto.write;
    let calls = 0;
    vi.spyOn(proto, 'write').mockImplementation(function (this: unknown, ...args: unknown[]) {
      // The 4th write is cut short, then nothing more fits (what write(2) does on ENOSPC).
      calls++;
      if (calls === 4) return real.call(this, args[0], args[1], 3);
      if (calls > 4) return Promise.resolve({ bytesWritten: 0, buffer: args[0] });
      return real.apply(this, args);
    });
    const err = await expectError(sok.dump(dir, [await filled('a', 70, 2), await filled('b', 70, 2)]), 'IO_ERROR', 'bytes were written');
    vi.restoreAllMocks();
    expect(err.message).toMatch(/sok-tmp-\d+-[0-9a-f]+\/(a|b)-(key|weight)"/);
    expect(readdirSync(parent)).toEqual(['model']); // the temporary folder is removed
    await initDevices(1);
    expect(await loadBack(dir, ['a', 'b'])).toEqual([sortedEntries(expectedRows(50, 1)), sortedEntries(expectedRows(50, 1))]);
  });

  it('finishes a swap a crash interrupted: the aside folder alone is recovered, beside a new dump it is removed', async () => {
    await initDevices(2);
    const { parent, dir } = freshDir();
    const aside = join(parent, '.model.sok-old');
    await sok.dump(dir, [await filled('a', 5, 1)]);
    // Killed between "rename the old folder aside" and "rename the new one in".
    renameSync(dir, aside);
    const a = new sok.DynamicVariable({ dimension: 2, name: 'a' });
    await sok.load(dir, [a]);
    expect(sortedEntries(await rowsByKey(a))).toEqual(sortedEntries(expectedRows(5, 1)));
    expect(readdirSync(parent)).toEqual(['model']);
    // Killed after the new folder was renamed in, before the old one was removed.
    await sok.dump(join(parent, 'copy'), [await filled('a', 7, 2)]);
    renameSync(dir, aside);
    renameSync(join(parent, 'copy'), dir);
    const a2 = new sok.DynamicVariable({ dimension: 2, name: 'a' });
    await sok.load(dir, [a2]);
    expect(sortedEntries(await rowsByKey(a2))).toEqual(sortedEntries(expectedRows(7, 2)));
    // Killed while writing: a temporary folder of a dead process. The next dump removes it and the aside folder.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid;
    const leftover = join(parent, `.model.sok-tmp-${dead}-abcdef`);
    mkdirSync(leftover);
    writeFileSync(join(leftover, 'a-key'), new Uint8Array(8));
    await sok.dump(dir, [await filled('a', 2, 3)]);
    expect(readdirSync(parent).sort()).toEqual(['model']);
    const a3 = new sok.DynamicVariable({ dimension: 2, name: 'a' });
    await sok.load(dir, [a3]);
    expect(sortedEntries(await rowsByKey(a3))).toEqual(sortedEntries(expectedRows(2, 3)));
  });
});

describe('load checks every file first', () => {
  async function trained(wRows: number) {
    await initDevices(2);
    const v = await filled('pv', 40, 1);
    const w = new sok.Variable({ shape: [wRows, 2], initializer: '0', name: 'pw' });
    await sok.assign(w, [5, wRows - 2000, wRows - 1], Float32Array.of(1, 2, 3, 4, 5, 6));
    const opt = new sok.OptimizerWrapper(new sok.optimizers.Adagrad({ learningRate: 0.5 }));
    const tape = new sok.GradientTape();
    await sok.embeddingLookup(v, [1n, 2n], { tape });
    await opt.applyGradients(tape.gradient([new Float32Array([1, 1, 1, 1])]));
    return { v, w, opt };
  }

  /** Fresh variables holding other rows than the dump (the state a refused load must keep). */
  async function targets(wRows: number) {
    await initDevices(2);
    const v = await filled('pv', 3, 9);
    const w = new sok.Variable({ shape: [wRows, 2], initializer: '0', name: 'pw' });
    await sok.assign(w, [7], Float32Array.of(7, 7));
    const opt = new sok.OptimizerWrapper(new sok.optimizers.Adagrad({ learningRate: 0.5 }));
    return { v, w, opt };
  }

  it('a flipped bit in any data file or the meta is refused as CHECKPOINT_CORRUPT naming the file; nothing changes', async () => {
    const { v, w, opt } = await trained(3000);
    const { dir } = freshDir();
    await sok.dump(dir, [v, w], opt);
    const dumped = sortedEntries(await rowsByKey(v));
    const backup = join(root, `backup${n++}`);
    mkdirSync(backup);
    const fileNames = readdirSync(dir).sort();
    expect(fileNames).toEqual(['pv-Adagrad-accumulators', 'pv-key', 'pv-meta.json', 'pv-weight', 'pw-key', 'pw-meta.json', 'pw-weight']);
    for (const f of fileNames) writeFileSync(join(backup, f), readFileSync(join(dir, f)));
    const t = await targets(3000);
    const before = await state([t.v, t.w], t.opt);
    for (const f of fileNames) {
      const size = readFileSync(join(dir, f)).length;
      // a bit in the data of the file (the last byte: in pw-key the high byte of the last row id; in a meta its closing brace)
      flipBit(join(dir, f), f.endsWith('.json') ? Math.floor(size / 2) : size - 1, 6);
      await expectError(sok.load(dir, [t.v, t.w], t.opt), 'CHECKPOINT_CORRUPT', f);
      expect(await state([t.v, t.w], t.opt)).toEqual(before);
      writeFileSync(join(dir, f), readFileSync(join(backup, f)));
    }
    await sok.load(dir, [t.v, t.w], t.opt);
    expect(sortedEntries(await rowsByKey(t.v))).toEqual(dumped);
    expect(t.opt.iterations).toBe(1);
  });

  it('an old dump without checksums still loads; a bad row id in its second batch changes nothing', async () => {
    const { v, w, opt } = await trained(70000);
    const { dir } = freshDir();
    await sok.dump(dir, [v, w], opt);
    const dumped = sortedEntries(await rowsByKey(v));
    toVersion1(join(dir, 'pv-meta.json'));
    toVersion1(join(dir, 'pw-meta.json'));
    const t = await targets(70000);
    const before = await state([t.v, t.w], t.opt);
    // A row id in the second batch of 65536 rows becomes 70000 (one past the last row).
    const keyPath = join(dir, 'pw-key');
    const keys = new BigInt64Array(readFileSync(keyPath).buffer.slice(0));
    expect(keys.length).toBe(70000);
    keys[68000] = 70000n;
    const good = readFileSync(keyPath);
    writeFileSync(keyPath, new Uint8Array(keys.buffer));
    await expectError(sok.load(dir, [t.v, t.w], t.opt), 'OUT_OF_RANGE', 'pw-key', '70000');
    expect(await state([t.v, t.w], t.opt)).toEqual(before);
    writeFileSync(keyPath, good);
    await sok.load(dir, [t.v, t.w], t.opt);
    expect(sortedEntries(await rowsByKey(t.v))).toEqual(dumped);
    const wRows = await rowsByKey(t.w);
    expect([wRows.get(5n), wRows.get(68000n), wRows.get(69999n), wRows.get(7n)]).toEqual([[1, 2], [3, 4], [5, 6], [0, 0]]);
    expect(t.opt.iterations).toBe(1);
  });

  it('a backend failure while importing, after every check passed, changes nothing (fix33b #2)', async () => {
    const { v, w, opt } = await trained(3000);
    const { dir } = freshDir();
    await sok.dump(dir, [v, w], opt);
    const dumped = sortedEntries(await rowsByKey(v));
    const t = await targets(3000);
    // Give the targets slots and a step of their own, so that a half-done load would show.
    const tape = new sok.GradientTape();
    await sok.lookupSparse([t.v, t.w], [RaggedTensor.fromNestedArray([[0n, 1n]]), RaggedTensor.fromNestedArray([[7]])], { combiners: 'sum', tape });
    await t.opt.applyGradients(tape.gradient([new Float32Array([1, 2]), new Float32Array([3, 4])]));
    const before = await state([t.v, t.w], t.opt);
    expect(before.slots).toEqual([['Adagrad', ['accumulators']], ['Adagrad', ['accumulators']]]);
    const real = EmbeddingTable.prototype.importRows;
    // Each call of the load fails at another import: the first, one in the middle (pv loaded, pw not), the last.
    for (const failAt of [1, 3, 4]) {
      let calls = 0;
      const spy = vi.spyOn(EmbeddingTable.prototype, 'importRows').mockImplementation(function (this: EmbeddingTable, ...args: Parameters<EmbeddingTable['importRows']>) {
        calls++;
        if (calls === failAt) return Promise.reject(new IOError('injected backend failure'));
        return real.apply(this, args);
      });
      await expectError(sok.load(dir, [t.v, t.w], t.opt), 'IO_ERROR', 'injected backend failure');
      spy.mockRestore();
      expect(calls).toBeGreaterThanOrEqual(failAt);
      expect(await state([t.v, t.w], t.opt)).toEqual(before);
    }
    await sok.load(dir, [t.v, t.w], t.opt);
    expect(sortedEntries(await rowsByKey(t.v))).toEqual(dumped);
    expect(t.opt.iterations).toBe(1);
  });

  it('writes the CRC-32C of every data file into the meta', async () => {
    await initDevices(1);
    const { dir } = freshDir();
    await sok.dump(dir, [await filled('c', 3, 1)]);
    const meta = JSON.parse(readFileSync(join(dir, 'c-meta.json'), 'utf8')) as { version: number; files: Record<string, { bytes: number; crc32c: number }> };
    expect(meta.version).toBe(2);
    for (const f of ['c-key', 'c-weight']) {
      const data = readFileSync(join(dir, f));
      expect(meta.files[f]).toEqual({ bytes: data.length, crc32c: crc32c(new Uint8Array(data)) });
    }
    expect(existsSync(join(dir, 'c-score'))).toBe(false);
  });
});
