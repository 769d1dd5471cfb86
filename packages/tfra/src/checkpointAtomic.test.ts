import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IOError, saveTable } from '@embedstack/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, uniqueName, useTestBackend } from '../test/setup.js';

// This file's own module instances (vitest.config.ts runs files in shared workers): the modules it
// imports load afresh, so they see the mock below.
vi.hoisted(() => vi.resetModules());
// saveTable, wrapped so that a test can make one shard's save fail (a full disk, a crash).
vi.mock('@embedstack/core', async (importOriginal) => {
  const core = await importOriginal<typeof import('@embedstack/core')>();
  return { ...core, saveTable: vi.fn(core.saveTable) };
});

beforeAll(async () => {
  await useTestBackend();
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('saveToFileSystem is atomic across shards', () => {
  it('when the save of shard 1 fails, every shard of the previous save is still loaded, and the next save succeeds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tfra-atomic-'));
    dirs.push(dir);
    const name = uniqueName('atomic');
    const keys = [0n, 1n, 2n, 3n, 4n, 5n];
    const v = new de.Variable({ dim: 1, name, devices: ['a', 'b'] });
    await v.upsert(keys, [1, 1, 1, 1, 1, 1]);
    await v.saveToFileSystem(dir);
    await v.upsert(keys, [2, 2, 2, 2, 2, 2]);
    const real = vi.mocked(saveTable).getMockImplementation()!;
    vi.mocked(saveTable)
      .mockImplementationOnce(real)
      .mockImplementationOnce(() => Promise.reject(new IOError('Could not write: no space left on device')));
    await expectError(v.saveToFileSystem(dir), 'IO_ERROR', 'no space left');
    const back = new de.Variable({ dim: 1, name, devices: ['a', 'b', 'c'] });
    await back.loadFromFileSystem(dir);
    expect(Array.from((await back.lookup(keys)).data)).toEqual([1, 1, 1, 1, 1, 1]);
    // nothing of the failed save is left beside the live version
    const proc = join(dir, name, 'proc_0_of_1');
    expect(readdirSync(proc).filter((f) => f !== 'CURRENT').length).toBe(1);
    await v.saveToFileSystem(dir);
    const after = new de.Variable({ dim: 1, name });
    await after.loadFromFileSystem(dir);
    expect(rowsOf((await after.lookup(keys)).data, 1).flat()).toEqual([2, 2, 2, 2, 2, 2]);
  });
});
