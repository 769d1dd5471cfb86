import { mkdir, open, readdir, readFile, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { CheckpointCorruptError, FailedPreconditionError, NotFoundError } from '../errors.js';
import { ensureDir, errnoOf, fsyncDir, io, ioError, randomTag, removeTree, renamePath, statOrNull } from './fsio.js';

/**
 * The on-disk protocol that makes saves crash-safe (docs/checkpoint-format.md):
 *
 *   <dir>/CURRENT              one line: the name of the live version directory
 *   <dir>/ckpt-000000000007/   a complete checkpoint (manifest.json + data files)
 *   <dir>/LOCK                 held by the process that is saving (pid, host)
 *   <dir>/.tmp-<pid>-<tag>/    a save in progress (ignored by readers)
 *   <dir>/CURRENT.tmp          the next CURRENT being written (ignored by readers)
 *
 * A save writes a temp directory, fsyncs it, renames it to the next `ckpt-N`,
 * writes + fsyncs `CURRENT.tmp`, renames it over `CURRENT` and fsyncs `<dir>`; only
 * then are older versions deleted. Readers follow `CURRENT` only, so a crash at any
 * point leaves either the previous or the new complete version live. The next save
 * (under the lock) deletes leftovers: temp dirs, `CURRENT.tmp`, unreferenced versions.
 */

export const CURRENT_FILE = 'CURRENT';
export const CURRENT_TMP_FILE = 'CURRENT.tmp';
export const LOCK_FILE = 'LOCK';
export const MANIFEST_FILE = 'manifest.json';
export const TMP_PREFIX = '.tmp-';
const VERSION_RE = /^ckpt-(\d{12})$/;

export function versionName(seq: number): string {
  return `ckpt-${String(seq).padStart(12, '0')}`;
}

export function versionSeq(name: string): number | null {
  const m = VERSION_RE.exec(name);
  return m ? Number(m[1]) : null;
}

export function tempName(): string {
  return `${TMP_PREFIX}${process.pid}-${randomTag()}`;
}

// ---- crash injection (tests only; not exported from the package) -------------

export type CrashPoint = 'dataWritten' | 'versionRenamed' | 'currentTmpWritten' | 'currentSwitched' | 'oldRemoved';

/** Thrown by the test hook to simulate a crash: the save stops without cleaning up. */
export class SimulatedCrash extends Error {
  constructor(readonly point: CrashPoint) {
    super(`simulated crash at ${point}`);
  }
}

let crashHook: ((point: CrashPoint) => void) | null = null;

/** Tests: `hook` is called at each step of a save and may throw SimulatedCrash. */
export function setCrashHookForTesting(hook: ((point: CrashPoint) => void) | null): void {
  crashHook = hook;
}

export function crashPoint(point: CrashPoint): void {
  crashHook?.(point);
}

// ---- locking ------------------------------------------------------------------

const inProcess = new Map<string, Promise<void>>();

interface LockHolder {
  pid: number;
  host: string;
  since: string;
}

function holderAlive(h: LockHolder): boolean {
  if (h.host !== hostname()) return true; // cannot tell: assume it is running
  if (h.pid === process.pid) return false; // this process holds no lock outside the in-process queue
  try {
    process.kill(h.pid, 0);
    return true;
  } catch (e) {
    return errnoOf(e) === 'EPERM';
  }
}

async function readHolder(path: string): Promise<LockHolder | null> {
  try {
    const h = JSON.parse(await readFile(path, 'utf8')) as LockHolder;
    return Number.isSafeInteger(h.pid) && typeof h.host === 'string' ? h : null;
  } catch {
    return null; // gone, or empty / half-written by a crashed writer: stale
  }
}

async function acquireFileLock(path: string, what: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      const h = await open(path, 'wx');
      try {
        await h.writeFile(JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString() }));
      } finally {
        await h.close();
      }
      return;
    } catch (e) {
      if (errnoOf(e) !== 'EEXIST' || attempt > 0) throw ioError('create lock file', path, e);
    }
    const holder = await readHolder(path);
    if (holder && holderAlive(holder)) {
      throw new FailedPreconditionError(
        `Cannot ${what}: process ${holder.pid} on ${holder.host} holds the lock "${path}" since ${holder.since}; ` +
          'wait for it, or delete that file if no such process is running',
      );
    }
    await io('remove stale lock file', path, () => rm(path, { force: true })); // its writer crashed
  }
}

/**
 * Runs `fn` while holding the lock of `lockPath`: calls from this process run one at
 * a time in call order (the queue is joined synchronously, before any await);
 * another live process holding it -> FailedPreconditionError; a lock left by a
 * crashed process is taken over. `prepare` runs first, in the queue (e.g. creating
 * the directory the lock file lives in).
 */
export async function withLock<T>(lockPath: string, what: string, fn: () => Promise<T>, prepare?: () => Promise<void>): Promise<T> {
  const key = resolve(lockPath);
  const before = inProcess.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((r) => (release = r));
  const tail = before.then(() => mine);
  inProcess.set(key, tail);
  await before;
  let held = false;
  try {
    await prepare?.();
    await acquireFileLock(key, what);
    held = true;
    return await fn();
  } catch (e) {
    // A simulated crash leaves the lock file behind, as a killed process would.
    if (e instanceof SimulatedCrash) held = false;
    throw e;
  } finally {
    if (held) await rm(key, { force: true }).catch(() => undefined);
    release();
    if (inProcess.get(key) === tail) inProcess.delete(key);
  }
}

// ---- versioned checkpoint directories ---------------------------------------------

/** The live version named by `<dir>/CURRENT`, or null when there is no CURRENT file. */
export async function readCurrent(dir: string): Promise<string | null> {
  const path = join(dir, CURRENT_FILE);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if (errnoOf(e) === 'ENOENT' || errnoOf(e) === 'ENOTDIR') return null;
    throw ioError('read', path, e);
  }
  const name = text.trim();
  if (versionSeq(name) === null) {
    throw new CheckpointCorruptError(
      `Checkpoint file "${path}" is corrupt: expected the name of a version directory (ckpt-<12 digits>) but found ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  return name;
}

export interface LiveCheckpoint {
  /** Directory holding manifest.json and the data files. */
  path: string;
  /** Version directory name, or null for a flat checkpoint (manifest.json directly in dir). */
  version: string | null;
}

/**
 * Finds the checkpoint a reader must use: the version named by CURRENT, or `dir`
 * itself when it holds a manifest.json but no CURRENT (a flat checkpoint, e.g.
 * copied out of a version directory).
 * @throws NotFoundError when there is no checkpoint; CheckpointCorruptError when
 *   CURRENT names a missing directory
 */
export async function resolveLive(dir: string): Promise<LiveCheckpoint> {
  const version = await readCurrent(dir);
  if (version !== null) {
    const path = join(dir, version);
    const st = await statOrNull(path);
    if (!st?.isDirectory()) {
      throw new CheckpointCorruptError(
        `Checkpoint "${dir}" is corrupt: ${CURRENT_FILE} names "${version}" but that directory does not exist`,
      );
    }
    return { path, version };
  }
  if (await statOrNull(join(dir, MANIFEST_FILE))) return { path: dir, version: null };
  const st = await statOrNull(dir);
  throw new NotFoundError(
    st
      ? `Expected dir to hold a checkpoint (a ${CURRENT_FILE} or ${MANIFEST_FILE} file) but "${dir}" has neither`
      : `Expected dir to be an existing checkpoint directory but "${dir}" does not exist`,
    { argument: 'dir' },
  );
}

/** The sequence number for the next version: above every version present. */
export async function nextVersion(dir: string, current: string | null): Promise<string> {
  let max = current === null ? 0 : versionSeq(current)!;
  for (const name of await io('list', dir, () => readdir(dir))) max = Math.max(max, versionSeq(name) ?? 0);
  return versionName(max + 1);
}

/**
 * Deletes what a crashed or finished save left in `dir`: temp dirs, CURRENT.tmp and
 * every version directory except `keep`. Call only while holding the lock.
 */
export async function removeLeftovers(dir: string, keep: string | null): Promise<number> {
  let removed = 0;
  for (const name of await io('list', dir, () => readdir(dir))) {
    const stale = name.startsWith(TMP_PREFIX) || name === CURRENT_TMP_FILE || (versionSeq(name) !== null && name !== keep);
    if (stale) {
      await removeTree(join(dir, name));
      removed++;
    }
  }
  if (removed > 0) await fsyncDir(dir);
  return removed;
}

// ---- atomic replacement of a plain folder (HugeCTR layout) ----------------------

/** Sibling names used while replacing `target`: `.<base>.new`, `.<base>.old`, `.<base>.tmp-*`, `.<base>.lock`. */
export function siblings(target: string): { parent: string; base: string; next: string; old: string; lock: string; tmpPrefix: string } {
  const abs = resolve(target);
  const parent = dirname(abs);
  const base = basename(abs);
  return {
    parent,
    base,
    next: join(parent, `.${base}.new`),
    old: join(parent, `.${base}.old`),
    lock: join(parent, `.${base}.lock`),
    tmpPrefix: `.${base}.tmp-`,
  };
}

/**
 * The folder a reader of `target` must use: `target` when it exists, else the complete
 * replacement `.<base>.new` left by a writer that crashed between its two renames.
 * Null when neither exists.
 */
export async function liveFolder(target: string): Promise<string | null> {
  if (await statOrNull(target)) return target;
  const { next } = siblings(target);
  return (await statOrNull(next)) ? next : null;
}

/**
 * Replaces the folder `target` with one filled by `fill(tmpDir)` (which must fsync
 * its files), crash-safely: tmp -> `.<base>.new` (complete), target -> `.<base>.old`,
 * `.new` -> target, remove `.old`; the parent is fsynced after each rename. Recovery
 * (next writer; readers use {@link liveFolder}): target present -> it is live;
 * target missing -> `.new` is live. `canReplace` vets an existing target first.
 */
export async function replaceFolder(target: string, canReplace: (path: string) => Promise<void>, fill: (tmpDir: string) => Promise<void>): Promise<void> {
  const s = siblings(target);
  const abs = resolve(target);
  const prepare = (): Promise<void> => ensureDir(s.parent);
  await withLock(s.lock, `write "${abs}"`, async () => {
    // recovery of a crashed replacement
    if (!(await statOrNull(abs)) && (await statOrNull(s.next))) await renamePath(s.next, abs);
    for (const name of await io('list', s.parent, () => readdir(s.parent))) {
      if (name.startsWith(s.tmpPrefix)) await removeTree(join(s.parent, name));
    }
    await removeTree(s.next);
    await removeTree(s.old);
    const existing = await statOrNull(abs);
    if (existing) await canReplace(abs);
    const tmp = join(s.parent, `${s.tmpPrefix}${process.pid}-${randomTag()}`);
    await io('create directory', tmp, () => mkdir(tmp));
    try {
      await fill(tmp);
      await fsyncDir(tmp);
      await renamePath(tmp, s.next);
    } catch (e) {
      await removeTree(tmp).catch(() => undefined);
      throw e;
    }
    await fsyncDir(s.parent);
    if (existing) {
      await renamePath(abs, s.old);
      await fsyncDir(s.parent);
    }
    await renamePath(s.next, abs);
    await fsyncDir(s.parent);
    await removeTree(s.old);
  }, prepare);
}
