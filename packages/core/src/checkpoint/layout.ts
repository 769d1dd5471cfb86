import { link, mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { threadId } from 'node:worker_threads';
import { basename, dirname, join, resolve } from 'node:path';
import { CheckpointCorruptError, FailedPreconditionError, NotFoundError } from '../errors.js';
import { ensureDir, errnoOf, fsyncDir, io, ioError, randomTag, removeTree, renamePath, statOrNull } from './fsio.js';

/**
 * The on-disk protocol that makes saves crash-safe (docs/checkpoint-format.md):
 *
 *   <dir>/CURRENT              one line: the name of the live version directory
 *   <dir>/ckpt-000000000007/   a complete checkpoint (manifest.json + data files)
 *   <dir>/LOCK                 held by the process that is saving (pid, host)
 *   <dir>/LOCK.<pid>-<tag>     LOCK's content while it is being taken (hard-linked to LOCK)
 *   <dir>/LOCK.stale-<pid>-<tag>  a crashed writer's LOCK while it is being taken over
 *   <dir>/.tmp-<pid>-<tag>/    a save in progress (ignored by readers)
 *   <dir>/CURRENT.tmp          the next CURRENT being written (ignored by readers)
 *
 * A save writes a temp directory, fsyncs it, renames it to the next `ckpt-N`,
 * writes + fsyncs `CURRENT.tmp`, renames it over `CURRENT` and fsyncs `<dir>`; only
 * then are older versions deleted. Readers follow `CURRENT` only, so a crash at any
 * point leaves either the previous or the new complete version live. The next save
 * (under the lock) deletes leftovers: temp dirs, `CURRENT.tmp`, unreferenced versions,
 * and (as soon as the lock is taken: withLock) the two lock temp files above of processes
 * that are gone, or 10 s old (removeLockLeftovers).
 */

export const CURRENT_FILE = 'CURRENT';
export const CURRENT_TMP_FILE = 'CURRENT.tmp';
export const LOCK_FILE = 'LOCK';
export const MANIFEST_FILE = 'manifest.json';
export const TMP_PREFIX = '.tmp-';
const VERSION_RE = /^ckpt-(\d{12})$/;
/** Names tempName() makes: `.tmp-<pid>-<8 hex digits>`; leftovers are only these. */
const TEMP_RE = /^\.tmp-\d+-[0-9a-f]{8}$/;

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

/**
 * The in-process side of the lock, shared by every copy of core loaded in this thread
 * (ESM and CJS builds): `byPath` queues calls per resolved lock path in call order;
 * `byId` queues them per lock *file identity* (the directory's device and inode plus
 * the lock's name), so one directory reached through a symlink or a bind mount is one
 * lock. A LOCK file naming this process and thread is stale unless `byId` has a holder.
 */
interface LockQueues {
  byPath: Map<string, Promise<void>>;
  byId: Map<string, Promise<void>>;
}
const QUEUES_KEY = Symbol.for('@embedstack/core.checkpointLocks.v1');
const queues: LockQueues = ((globalThis as Record<symbol, LockQueues | undefined>)[QUEUES_KEY] ??= { byPath: new Map(), byId: new Map() });

/** Joins the queue of `key` synchronously; `ready` resolves when every earlier call has released. */
function enqueue(map: Map<string, Promise<void>>, key: string): { ready: Promise<void>; release: () => void } {
  const before = map.get(key) ?? Promise.resolve();
  let done!: () => void;
  const mine = new Promise<void>((r) => (done = r));
  const tail = before.then(() => mine);
  map.set(key, tail);
  return {
    ready: before,
    release: () => {
      done();
      if (map.get(key) === tail) map.delete(key);
    },
  };
}

/**
 * A LOCK that cannot be parsed (being written by a writer without hard links) counts as held
 * this long after its mtime; a lock's temp file this old (by ctime) is a leftover
 * (removeLockLeftovers).
 */
export const LOCK_GRACE_MS = 10_000;

interface LockHolder {
  pid: number;
  host: string;
  since: string;
  /** Worker thread id of the holder (0: main thread); absent in locks of older versions. */
  thread?: number;
  /** Random tag of this acquisition (absent in locks of older versions). */
  token?: string;
}

function holderAlive(h: LockHolder): boolean {
  if (h.host !== hostname()) return true; // cannot tell: assume it is running
  if (h.pid === process.pid) {
    // Another thread of this process may hold it (its queues are not ours): assume it does.
    // This thread holds no lock that its in-process queue (which we now hold) does not know.
    return (h.thread ?? 0) !== threadId;
  }
  return pidAlive(h.pid);
}

/** Whether a process with this id runs on this host (one we may not signal counts). */
function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return errnoOf(e) === 'EPERM';
  }
}

type LockState = { kind: 'gone' } | { kind: 'held'; holder: LockHolder } | { kind: 'young'; mtimeMs: number } | { kind: 'stale'; ino: bigint };

/** Reads LOCK through one handle (content and inode of the same file). */
async function readLock(path: string): Promise<LockState> {
  let h;
  try {
    h = await open(path, 'r');
  } catch (e) {
    if (errnoOf(e) === 'ENOENT') return { kind: 'gone' };
    throw ioError('open lock file', path, e);
  }
  try {
    const st = await h.stat({ bigint: true });
    let holder: LockHolder | null = null;
    try {
      const parsed = JSON.parse(await h.readFile('utf8')) as LockHolder;
      if (Number.isSafeInteger(parsed.pid) && typeof parsed.host === 'string') holder = parsed;
    } catch {
      holder = null;
    }
    if (holder) return holderAlive(holder) ? { kind: 'held', holder } : { kind: 'stale', ino: st.ino };
    // Empty or half-written: a writer between create and write (no hard links on this file
    // system), or one that crashed there. Held while young.
    const mtimeMs = Number(st.mtimeMs);
    return Date.now() - mtimeMs < LOCK_GRACE_MS ? { kind: 'young', mtimeMs } : { kind: 'stale', ino: st.ino };
  } finally {
    await h.close().catch(() => undefined);
  }
}

/** Creates `path` holding `content`, atomically when hard links work (temp file + link). False when `path` exists. */
async function createLockFile(path: string, content: string, tmp: string): Promise<boolean> {
  try {
    await link(tmp, path);
    return true;
  } catch (e) {
    const code = errnoOf(e);
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS' && code !== 'EMLINK') throw ioError('create lock file', path, e);
  }
  // No hard links here: O_EXCL, then write (readers treat a young empty LOCK as held).
  let h;
  try {
    h = await open(path, 'wx');
  } catch (e) {
    if (errnoOf(e) === 'EEXIST') return false;
    throw ioError('create lock file', path, e);
  }
  try {
    await h.writeFile(content);
  } finally {
    await h.close();
  }
  return true;
}

/** An acquisition's temp file of the lock `path`: the lock's content before it is linked to `path`. */
const lockTempPath = (path: string, token: string): string => `${path}.${token}`;
/** Where takeOverStale moves a stale lock `path` during the acquisition `token`. */
const staleLockPath = (path: string, token: string): string => `${path}.stale-${token}`;

/**
 * Moves a stale LOCK (inode `ino`) out of the way. If another writer replaced it since we
 * read it (the inode differs), puts that one back: it is live.
 */
async function takeOverStale(path: string, ino: bigint, token: string): Promise<void> {
  const moved = staleLockPath(path, token);
  try {
    await rename(path, moved);
  } catch (e) {
    if (errnoOf(e) === 'ENOENT') return; // someone else moved it: retry the create
    throw ioError('remove stale lock file', path, e);
  }
  try {
    const st = await io('stat', moved, () => stat(moved, { bigint: true }));
    if (st.ino !== ino) await link(moved, path).catch(() => undefined); // a fresh lock: restore it
  } finally {
    await rm(moved, { force: true }).catch(() => undefined);
  }
}

/** Takes the LOCK file; returns this acquisition's token. */
async function acquireFileLock(path: string, what: string): Promise<string> {
  const token = `${process.pid}-${randomTag()}${randomTag()}`;
  const content = JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString(), thread: threadId, token });
  const tmp = lockTempPath(path, token);
  await io('create lock file', tmp, () => writeFile(tmp, content, { flag: 'wx' }));
  try {
    for (let attempt = 0; ; attempt++) {
      if (await createLockFile(path, content, tmp)) return token;
      const state = await readLock(path);
      if (state.kind === 'held' || state.kind === 'young' || attempt >= 4) {
        const by =
          state.kind === 'held'
            ? `process ${state.holder.pid} on ${state.holder.host} holds the lock "${path}" since ${state.holder.since}`
            : `another process is taking the lock "${path}"`;
        throw new FailedPreconditionError(`Cannot ${what}: ${by}; wait for it, or delete that file if no such process is running`);
      }
      if (state.kind === 'stale') await takeOverStale(path, state.ino, token); // its writer crashed
    }
  } finally {
    await rm(tmp, { force: true }).catch(() => undefined);
  }
}

/**
 * Removes the temp files of lock acquisitions that died: `<lock>.<token>` (the lock's content,
 * made by acquireFileLock before it links LOCK, removed when it returns) and
 * `<lock>.stale-<token>` (a crashed writer's LOCK moved away by takeOverStale, inside that
 * acquisition, so while `<lock>.<token>` exists); `<token>` is `<pid>-<16 hex digits>`. A
 * process killed inside those few file operations leaves them behind, and nothing else would
 * remove them. Run by withLock right after it takes the lock (no acquisition of this thread
 * is in flight then).
 * An acquisition file goes when its ctime is `graceMs` old (no acquisition's steps take that
 * long), or when the process in its name is gone from this host, unless its content names
 * another host (that host's process ids mean nothing here; one without content, killed
 * between create and write, is taken for this host's). A `stale-` file goes with its
 * acquisition file, or at once without one (orphaned), never while that one is kept: so a
 * live writer's lock it is moving (or putting back) is never removed under it. Best effort:
 * a file that vanishes or cannot be removed is skipped.
 * @returns how many files were removed
 */
export async function removeLockLeftovers(dir: string, lockName: string, graceMs = LOCK_GRACE_MS): Promise<number> {
  const lock = join(dir, lockName);
  const prefix = `${lockName}.`;
  const acquisitions: RegExpExecArray[] = [];
  const moved: string[] = [];
  for (const name of await io('list', dir, () => readdir(dir))) {
    const m = name.startsWith(prefix) ? LOCK_TEMP_RE.exec(name.slice(prefix.length)) : null;
    if (m?.[1]) moved.push(m[2]!);
    else if (m) acquisitions.push(m);
  }
  let removed = 0;
  const kept = new Set<string>();
  for (const m of acquisitions) {
    const path = lockTempPath(lock, m[2]!);
    if (await acquisitionGone(path, Number(m[3]), graceMs)) {
      if (await removeFile(path)) removed++;
    } else {
      kept.add(m[2]!);
    }
  }
  for (const token of moved) {
    if (!kept.has(token) && (await removeFile(staleLockPath(lock, token)))) removed++;
  }
  return removed;
}

/** Temp names of a lock's acquisitions after `<lock>.`: [stale-]<token>, the token <pid>-<16 hex digits>. */
const LOCK_TEMP_RE = /^(stale-)?((\d+)-[0-9a-f]{16})$/;

/** Whether an acquisition's temp file (made by process `pid`) is a leftover (removeLockLeftovers). */
async function acquisitionGone(path: string, pid: number, graceMs: number): Promise<boolean> {
  const st = await statOrNull(path);
  if (!st) return true; // its acquisition ended meanwhile
  if (Date.now() - Number(st.ctimeMs) >= graceMs) return true;
  if (pidAlive(pid)) return false;
  const host = await readFile(path, 'utf8').then(holderHost, () => null);
  return host === null || host === hostname();
}

/** The host a lock's content names, or null when it cannot be parsed. */
function holderHost(text: string): string | null {
  try {
    const h = JSON.parse(text) as Partial<LockHolder>;
    return typeof h.host === 'string' ? h.host : null;
  } catch {
    return null;
  }
}

/** rm -f; false when it failed. */
function removeFile(path: string): Promise<boolean> {
  return rm(path, { force: true }).then(
    () => true,
    () => false,
  );
}

/** Removes LOCK if it is still this acquisition's (a writer that judged it stale may have replaced it). */
async function releaseFileLock(path: string, token: string): Promise<void> {
  try {
    const h = JSON.parse(await readFile(path, 'utf8')) as LockHolder;
    if (h.token === token) await rm(path, { force: true });
  } catch {
    // gone or unreadable: not ours to remove
  }
}

/** Identity of the directory holding `lockPath` plus the lock's name: one key per lock file, whatever path reaches it. */
async function lockIdentity(lockPath: string): Promise<string> {
  const dir = dirname(lockPath);
  const st = await io('stat', dir, () => stat(dir, { bigint: true }));
  return `${st.dev}:${st.ino}/${basename(lockPath)}`;
}

/**
 * Runs `fn` while holding the lock of `lockPath`: calls from this process run one at
 * a time (calls through one path in call order: the queue is joined synchronously,
 * before any await; calls through another path to the same directory, e.g. a symlink,
 * wait too); another live process holding it -> FailedPreconditionError; a lock left
 * by a crashed process is taken over, and the temp files of crashed acquisitions removed
 * (removeLockLeftovers) before `fn` runs. `prepare` runs first, in the queue (e.g.
 * creating the directory the lock file lives in).
 */
export async function withLock<T>(lockPath: string, what: string, fn: () => Promise<T>, prepare?: () => Promise<void>): Promise<T> {
  const path = resolve(lockPath);
  const outer = enqueue(queues.byPath, path);
  try {
    await outer.ready;
    await prepare?.();
    const inner = enqueue(queues.byId, await lockIdentity(path));
    try {
      await inner.ready;
      const token = await acquireFileLock(path, what);
      let held = true;
      try {
        await removeLockLeftovers(dirname(path), basename(path));
        return await fn();
      } catch (e) {
        // A simulated crash leaves the lock file behind, as a killed process would.
        if (e instanceof SimulatedCrash) held = false;
        throw e;
      } finally {
        if (held) await releaseFileLock(path, token);
      }
    } finally {
      inner.release();
    }
  } finally {
    outer.release();
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

/** How many times a reader follows a CURRENT that changed under it before it gives up. */
const LIVE_RETRIES = 8;

/**
 * Finds the checkpoint a reader must use: the version named by CURRENT, or `dir`
 * itself when it holds a manifest.json but no CURRENT (a flat checkpoint, e.g.
 * copied out of a version directory). When the named version has vanished because a
 * save switched CURRENT and deleted it meanwhile, follows the new CURRENT (up to
 * LIVE_RETRIES times).
 * @throws NotFoundError when there is no checkpoint; CheckpointCorruptError when
 *   CURRENT names a missing directory (and still names it when read again)
 */
export async function resolveLive(dir: string): Promise<LiveCheckpoint> {
  let version = await readCurrent(dir);
  for (let attempt = 0; version !== null; attempt++) {
    const path = join(dir, version);
    const st = await statOrNull(path);
    if (st?.isDirectory()) return { path, version };
    const again = await readCurrent(dir);
    if (again === version || attempt >= LIVE_RETRIES) {
      throw new CheckpointCorruptError(
        `Checkpoint "${dir}" is corrupt: ${CURRENT_FILE} names "${version}" but that directory does not exist`,
      );
    }
    version = again;
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
 * Deletes what a crashed or finished save left in `dir`: temp dirs (named as tempName()
 * names them, nothing else starting with `.tmp-`), CURRENT.tmp and every version
 * directory except `keep` and the one CURRENT names now. Call only while
 * holding the lock.
 */
export async function removeLeftovers(dir: string, keep: string | null): Promise<number> {
  let removed = 0;
  const live = await readCurrent(dir).catch(() => null);
  for (const name of await io('list', dir, () => readdir(dir))) {
    const stale = TEMP_RE.test(name) || name === CURRENT_TMP_FILE || (versionSeq(name) !== null && name !== keep && name !== live);
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
