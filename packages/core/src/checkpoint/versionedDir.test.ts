import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { liveVersionDir, saveVersionedDir, writeDurableFile } from './versionedDir.js';

const root = mkdtempSync(join(tmpdir(), 'embedstack-vdir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function codeOf(p: Promise<unknown>): Promise<[string | undefined, string | undefined]> {
  try {
    await p;
  } catch (e) {
    const err = e as { code?: string; argument?: string };
    return [err.code, err.argument];
  }
  return [undefined, undefined];
}

describe('saveVersionedDir / liveVersionDir / writeDurableFile', () => {
  it('check their arguments before touching the disk', async () => {
    expect(await codeOf(saveVersionedDir(join(root, 'a'), 1 as unknown as () => Promise<void>))).toEqual(['INVALID_TYPE', 'fill']);
    expect(await codeOf(saveVersionedDir('', async () => undefined))).toEqual(['INVALID_ARGUMENT', 'dir']);
    expect(await codeOf(writeDurableFile(join(root, 'f'), 5 as unknown as string))).toEqual(['INVALID_TYPE', 'data']);
    expect(await codeOf(writeDurableFile(7 as unknown as string, 'x'))).toEqual(['INVALID_TYPE', 'path']);
    expect(await codeOf(liveVersionDir(null as unknown as string))).toEqual(['INVALID_TYPE', 'dir']);
    expect(readdirSync(root)).toEqual([]);
  });

  it('commit what fill writes as the next version; a failing fill leaves the previous one live and nothing behind', async () => {
    const dir = join(root, 'v');
    expect(await liveVersionDir(dir)).toBeNull();
    const first = await saveVersionedDir(dir, ({ tmp, live }) => {
      expect(live).toBeNull();
      return writeDurableFile(join(tmp, 'data'), 'one');
    });
    expect(first).toBe(join(dir, 'ckpt-000000000001'));
    expect(await liveVersionDir(dir)).toBe(first);
    await expect(
      saveVersionedDir(dir, async ({ tmp, live }) => {
        expect(live).toBe(first);
        await writeDurableFile(join(tmp, 'data'), 'two');
        throw new Error('disk full');
      }),
    ).rejects.toThrow('disk full');
    expect(readdirSync(dir).sort()).toEqual(['CURRENT', 'ckpt-000000000001']);
    const second = await saveVersionedDir(dir, ({ tmp }) => writeDurableFile(join(tmp, 'data'), 'three'));
    expect(second).toBe(join(dir, 'ckpt-000000000002'));
    expect(readFileSync(join(second, 'data'), 'utf8')).toBe('three');
    expect(readdirSync(dir).sort()).toEqual(['CURRENT', 'ckpt-000000000002']);
  });
});
