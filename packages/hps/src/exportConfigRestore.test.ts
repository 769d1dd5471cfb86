// exportModel writes psConfigFile before CURRENT switches; a switch that fails after that puts the
// file's previous content back (or removes the file it created), so a failed export changes nothing.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tensor } from '@embedstack/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as hps from './index.js';
import { tempDir } from '../test/fixtures.js';

// This file's own module instances (vitest.config.ts runs files in shared workers): the modules it
// imports load afresh, so core's checkpoint code and this package see the mock below.
vi.hoisted(() => vi.resetModules());
// the rename that makes a new CURRENT live fails while `failCurrent` is set (core's checkpoint code and this package share node:fs/promises)
const inject = vi.hoisted(() => ({ failCurrent: false }));
vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const rename: typeof real.rename = async (from, to) => {
    if (inject.failCurrent && String(to).endsWith('/CURRENT')) throw Object.assign(new Error('EIO: i/o error (injected)'), { code: 'EIO' });
    return real.rename(from, to);
  };
  return { ...real, rename, default: { ...real, rename } };
});

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  inject.failCurrent = false;
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('exportModel: CURRENT failing to switch after psConfigFile was written', () => {
  it('puts the previous ps config back (or removes a new one); the previous export stays live', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const ps = join(t.dir, 'ps.json');
    await hps.exportModel({ model: 'm', tables: [{ table: new Tensor(Float32Array.of(1, 1), [1, 2]), name: 'emb' }], dir: t.dir, psConfigFile: ps });
    const before = readFileSync(ps, 'utf8');
    const versions = readdirSync(join(t.dir, 'm')).sort();
    inject.failCurrent = true;
    const next = { model: 'm', tables: [{ table: new Tensor(Float32Array.of(2, 2, 3, 3), [2, 2]), name: 'other' }], dir: t.dir };
    await expect(hps.exportModel({ ...next, psConfigFile: ps })).rejects.toMatchObject({ code: 'IO_ERROR' });
    expect(readFileSync(ps, 'utf8')).toBe(before);
    const fresh = join(t.dir, 'fresh.json');
    await expect(hps.exportModel({ ...next, psConfigFile: fresh })).rejects.toMatchObject({ code: 'IO_ERROR' });
    expect(existsSync(fresh)).toBe(false);
    inject.failCurrent = false;
    // (core leaves CURRENT.tmp after a failed switch; readers ignore it, the next export removes it)
    expect(readdirSync(join(t.dir, 'm')).filter((f) => f !== 'CURRENT.tmp').sort()).toEqual(versions);
    const server = await hps.HPS.create({ psConfigFile: ps });
    cleanups.push(() => server.close());
    expect(Array.from((await server.lookup([0n], 'm', 0)).data as Float32Array)).toEqual([1, 1]);
  });
});
