import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { checkDir } from './args.js';
import { ensureDir, fsyncDir, io, removeTree, renamePath, writeSmallFile } from './fsio.js';
import {
  crashPoint,
  CURRENT_FILE,
  CURRENT_TMP_FILE,
  LOCK_FILE,
  nextVersion,
  readCurrent,
  removeLeftovers,
  resolveLive,
  SimulatedCrash,
  tempName,
  withLock,
} from './layout.js';
import { InvalidTypeError, invalidParameter } from '../errors.js';

/**
 * saveTable's versioned-directory protocol (layout.ts) for a facade that commits a
 * set of files or table checkpoints as one unit: `<dir>/CURRENT` names the live
 * `ckpt-N` directory; a save fills a temp directory, which is fsynced, renamed to the
 * next `ckpt-N` and made live by an atomic rename of CURRENT, so a crash at any
 * point leaves the previous or the new set live, never a mix. Used by tfra's
 * `saveToFileSystem`: one version holds every shard of one process's save.
 */

/** What {@link saveVersionedDir}'s `fill` gets. */
export interface VersionedDirFill {
  /** The empty temp directory to fill; its contents become the new version. */
  tmp: string;
  /** The live version directory before this save, or null when there is none. */
  live: string | null;
}

/**
 * Commits what `fill` writes as the next version of `dir` (created if needed), under
 * `dir`'s LOCK (as saveTable). `fill` must make its files durable (saveTable and
 * {@link writeDurableFile} do); the temp directory itself is fsynced here. Older
 * versions and leftovers of crashed saves are deleted after the switch.
 * @returns the path of the new live version directory
 * @throws what `fill` throws, FailedPreconditionError (another live process holds the
 *   lock), IOError: the previous version is then still live
 */
export async function saveVersionedDir(dir: string, fill: (f: VersionedDirFill) => Promise<void>): Promise<string> {
  checkDir(dir);
  if (typeof fill !== 'function') throw invalidParameter('fill', 'a function ({ tmp, live }) => Promise<void>', fill, InvalidTypeError);
  const root = resolve(dir);
  return (await commitVersion(root, `save into "${root}"`, fill)).path;
}

/**
 * The commit both saveTable and {@link saveVersionedDir} run, under `root`'s LOCK:
 * `fill` writes the temp directory (durably) and returns the save's result; the temp
 * directory is fsynced, renamed to the next `ckpt-N`, and CURRENT switched to it. A
 * failure deletes only what this save created, never the version CURRENT names.
 * @returns `fill`'s result and the path of the new live version directory
 */
export async function commitVersion<T>(root: string, what: string, fill: (f: VersionedDirFill) => Promise<T>): Promise<{ value: T; path: string }> {
  const save = async (): Promise<{ value: T; path: string }> => {
    const current = await readCurrent(root);
    await removeLeftovers(root, current);
    const tmp = join(root, tempName());
    const version = await nextVersion(root, current);
    // What this save created, so that a failure deletes nothing else (another writer's
    // version, or the one CURRENT names, must survive whatever goes wrong here).
    let tmpCreated = false;
    let renamed = false;
    let published = false;
    try {
      await io('create directory', tmp, () => mkdir(tmp));
      tmpCreated = true;
      const value = await fill({ tmp, live: current === null ? null : join(root, current) });
      await fsyncDir(tmp);
      crashPoint('dataWritten');
      await renamePath(tmp, join(root, version));
      renamed = true;
      await fsyncDir(root);
      crashPoint('versionRenamed');
      await writeSmallFile(join(root, CURRENT_TMP_FILE), `${version}\n`);
      crashPoint('currentTmpWritten');
      await renamePath(join(root, CURRENT_TMP_FILE), join(root, CURRENT_FILE));
      published = true; // from here on the new version is live: never delete it
      await fsyncDir(root);
      crashPoint('currentSwitched');
      // Best effort: a failure leaves an old version behind for the next save to delete.
      await removeLeftovers(root, version).catch(() => undefined);
      crashPoint('oldRemoved');
      return { value, path: join(root, version) };
    } catch (e) {
      if (!(e instanceof SimulatedCrash) && !published) {
        if (tmpCreated && !renamed) await removeTree(tmp).catch(() => undefined);
        if (renamed && (await readCurrent(root).catch(() => version)) !== version) await removeTree(join(root, version)).catch(() => undefined);
      }
      throw e;
    }
  };
  return withLock(join(root, LOCK_FILE), what, save, () => ensureDir(root));
}

/**
 * The live version directory of a directory written by {@link saveVersionedDir}, or
 * null when `dir` has no CURRENT file (nothing committed there).
 * @throws CheckpointCorruptError when CURRENT is unreadable or names a missing directory; IOError
 */
export async function liveVersionDir(dir: string): Promise<string | null> {
  checkDir(dir);
  const root = resolve(dir);
  if ((await readCurrent(root)) === null) return null;
  return (await resolveLive(root)).path; // follows CURRENT when a concurrent save switched it
}

/** Writes a small file durably (create or truncate, write, fsync, close). @throws IOError */
export async function writeDurableFile(path: string, data: string | Uint8Array): Promise<void> {
  checkDir(path, 'path');
  if (typeof data !== 'string' && !(data instanceof Uint8Array)) throw invalidParameter('data', 'a string or a Uint8Array', data, InvalidTypeError);
  await writeSmallFile(path, data);
}
