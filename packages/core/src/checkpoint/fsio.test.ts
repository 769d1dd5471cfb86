import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ensureDir } from './fsio.js';
import { withTempDir } from '../../test/checkpoint/testUtil.js';

// This file's own module instances (vitest.config.ts runs files in shared workers): fsio.ts loads
// afresh and imports the mock below.
vi.hoisted(() => vi.resetModules());
// Every directory fsync goes through `open(dir, 'r')` + sync: record the paths opened read-only.
const opened = vi.hoisted(() => [] as string[]);
vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const open = (async (path: Parameters<typeof real.open>[0], flags?: Parameters<typeof real.open>[1], mode?: Parameters<typeof real.open>[2]) => {
    if (flags === 'r') opened.push(String(path));
    return real.open(path, flags, mode);
  }) as typeof real.open;
  return { ...real, open, default: { ...real, open } };
});

afterEach(() => {
  opened.length = 0;
});

describe('ensureDir', () => {
  it.skipIf(process.platform === 'win32')('fsyncs the parent of every level it creates, and nothing when the directory exists', async () => {
    await withTempDir(async (root) => {
      await mkdir(join(root, 'a'));
      opened.length = 0;
      await ensureDir(join(root, 'a', 'b', 'c', 'd'));
      // b, c and d are new: their entries live in a, a/b and a/b/c
      expect(opened).toEqual([join(root, 'a', 'b', 'c'), join(root, 'a', 'b'), join(root, 'a')]);
      opened.length = 0;
      await ensureDir(join(root, 'a', 'b', 'c', 'd'));
      expect(opened).toEqual([]);
      await ensureDir(join(root, 'e'));
      expect(opened).toEqual([root]);
    });
  });
});
