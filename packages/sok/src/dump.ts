import { randomBytes } from 'node:crypto';
import { type Dirent } from 'node:fs';
import { chmod, copyFile, link, mkdir, open, readdir, readFile, readlink, realpath, rename, rm, stat, symlink } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import {
  CheckpointCorruptError,
  crc32c,
  type ExportBatch,
  checkRowIndices,
  FailedPreconditionError,
  fileNameOf,
  InvalidTypeError,
  IOError,
  invalidParameter,
  type EmbeddingTable,
  type Keys,
  NotFoundError,
  type OptimizerSpec,
  sameSlotLayout,
} from '@embedstack/core';
import { context, nextScore, peekScore } from './context.js';
import { checkVariable } from './lookup.js';
import { OptimizerWrapper } from './optimizerWrapper.js';
import { globalKeys, routeKeys, takeRows, takeScores } from './route.js';
import type { SokVariable } from './variable.js';

/**
 * SOK's dump format, per variable in one folder: `<name>-key` (keys, little-endian
 * int64; int32 for a keyType 'int32' DynamicVariable; a Variable's global row ids),
 * `<name>-weight` (float32 [n, dim]), `<name>-<Opt>-<slot>` per optimizer slot
 * (float32 [n, width]; e.g. `emb-Adam-momenta`), `<name>-score` (uint64, only for
 * evictStrategy 'customized'), and `<name>-meta.json` (dimension, key type, row count,
 * optimizer and slots, and each data file's size and CRC-32C: what `load` checks before
 * touching anything). `<name>` is the variable's name percent-encoded (core's
 * `fileNameOf`: `emb/user` -> `emb%2Fuser`), so no name reaches outside the folder.
 * Rows are in device order; `load` routes each key to its owner under the current
 * device count, so a dump from 4 devices loads on 2.
 *
 * A dump replaces its folder as a whole (see `dump`): a crash at any point leaves either
 * the whole previous dump or the whole new one.
 */
export const DUMP_FORMAT = 'embedstack-sok-dump';

/** Size and CRC-32C of one data file. */
interface FileSum {
  bytes: number;
  crc32c: number;
}

interface DumpMeta {
  format: string;
  /** 1: no checksums (dumps before stop 32, still loaded); 2: `files` and `metaCrc32c`. */
  version: 1 | 2;
  name: string;
  kind: 'dynamic' | 'static';
  dimension: number;
  keyType: 'int64' | 'int32';
  rows: number;
  optimizer: string | null;
  slots: { name: string; width: number }[];
  scores: boolean;
  /** The optimizer's step count at dump time (restored by load with an optimizer). */
  iterations: number;
  /** Version 2: size and CRC-32C per data file name. */
  files?: Record<string, FileSum>;
}

const BATCH = 65536;
/** Bytes per read while checksumming a file. */
const CHUNK = 1 << 22;

function files(dir: string, v: { name: string }) {
  const base = join(dir, fileNameOf(v.name, 'the variable name'));
  return { key: `${base}-key`, weight: `${base}-weight`, score: `${base}-score`, meta: `${base}-meta.json`, slot: (opt: string, slot: string) => `${base}-${opt}-${slot}` };
}

function bytes(a: BigInt64Array | Int32Array | Float32Array | BigUint64Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

async function io<T>(what: string, path: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof IOError) throw e;
    throw new IOError(`Could not ${what} "${path}": ${(e as Error).message}`, { cause: e });
  }
}

const exists = (path: string) => stat(path).then(
  () => true,
  () => false,
);

/** fsync of a file or folder. */
async function syncPath(path: string): Promise<void> {
  const h = await io('open', path, () => open(path, 'r'));
  try {
    await io('sync', path, () => h.sync());
  } finally {
    await h.close();
  }
}

function checkArgs(dir: unknown, vars: unknown, opt: unknown): { dir: string; vars: SokVariable[]; opt: OptimizerWrapper | null } {
  context();
  if (typeof dir !== 'string' || dir.length === 0 || dir.includes('\u0000')) throw invalidParameter('dir', 'a non-empty folder path', dir, InvalidTypeError);
  if (basename(resolve(dir)) === '') throw invalidParameter('dir', 'a folder below the file system root', dir);
  if (!Array.isArray(vars) || vars.length === 0) throw invalidParameter('vars', 'a non-empty array of SOK variables', vars, InvalidTypeError);
  const list = vars.map((v, i) => checkVariable(v, `vars[${i}]`));
  const names = new Set<string>();
  for (const [i, v] of list.entries()) {
    if (names.has(v.name)) throw invalidParameter('vars', 'variables with distinct names (the names prefix the files)', `two named "${v.name}"`);
    names.add(v.name);
    fileNameOf(v.name, `vars[${i}].name`);
  }
  if (opt !== undefined && opt !== null && !(opt instanceof OptimizerWrapper)) throw invalidParameter('optimizer', 'a sok.OptimizerWrapper', opt, InvalidTypeError);
  return { dir, vars: list, opt: (opt as OptimizerWrapper | null | undefined) ?? null };
}

/** The slots of `v` the dump holds: the optimizer's, when `v` has been trained by it. */
function dumpedSlots(v: SokVariable, opt: OptimizerWrapper | null): { opt: string; slots: { name: string; width: number }[] } | null {
  if (!opt || v.boundOptimizer !== opt.optimizer.name) return null;
  const l = v.slotLayout;
  return { opt: opt.optimizer.name, slots: l.names.map((name, i) => ({ name, width: l.widths[i] === 'dim' ? v.dimension : 1 })) };
}

// ---- the folder swap ---------------------------------------------------------------

/** The folder's paths: the dump folder itself, its aside name while it is replaced, and the prefix of temporary folders. */
interface FolderPaths {
  dir: string;
  parent: string;
  aside: string;
  tmpPrefix: string;
}

/** `dir` with symbolic links resolved (a link to a folder replaces the folder it points to), and its sibling names. */
async function folderPaths(dir: string): Promise<FolderPaths> {
  let abs = resolve(dir);
  abs = await realpath(abs).catch(() => abs);
  const parent = dirname(abs);
  const base = basename(abs);
  return { dir: abs, parent, aside: join(parent, `.${base}.sok-old`), tmpPrefix: `.${base}.sok-tmp-` };
}

/** Dumps and loads of one folder in this process run one after another. */
const queues = new Map<string, Promise<unknown>>();
function serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const run = (queues.get(key) ?? Promise.resolve()).then(fn);
  const tail = run.catch(() => undefined);
  queues.set(key, tail);
  void tail.then(() => {
    if (queues.get(key) === tail) queues.delete(key);
  });
  return run;
}

/**
 * Finishes a swap a crash interrupted: the aside folder without the dump folder is the
 * last complete dump (renamed back); beside a dump folder it is the previous one (removed).
 */
async function recoverFolder(p: FolderPaths, removeStale: boolean): Promise<void> {
  if (!(await exists(p.aside))) return;
  if (!(await exists(p.dir))) {
    await io('recover the interrupted dump', p.aside, () => rename(p.aside, p.dir));
    await syncPath(p.parent);
  } else if (removeStale) {
    await io('remove the previous dump', p.aside, () => rm(p.aside, { recursive: true, force: true }));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the temporary folders of dumps whose process is gone (a crash mid-dump). */
async function removeDeadTemps(p: FolderPaths): Promise<void> {
  const entries = await readdir(p.parent).catch(() => [] as string[]);
  for (const name of entries) {
    if (!name.startsWith(p.tmpPrefix)) continue;
    const pid = Number(name.slice(p.tmpPrefix.length).split('-')[0]);
    if (Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && !alive(pid)) {
      await io('remove the leftover', join(p.parent, name), () => rm(join(p.parent, name), { recursive: true, force: true }));
    }
  }
}

/** The entries of the current folder to keep (other variables' files, anything else that is a file or a link). @throws FailedPreconditionError for a subfolder */
async function entriesToKeep(p: FolderPaths, vars: SokVariable[]): Promise<Dirent[]> {
  let entries: Dirent[];
  try {
    entries = await readdir(p.dir, { withFileTypes: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return [];
    if (code === 'ENOTDIR') throw invalidParameter('dir', 'a folder', `the file ${p.dir}`);
    throw new IOError(`Could not read the folder "${p.dir}": ${(e as Error).message}`, { cause: e });
  }
  const replaced = new Set<string>();
  for (const v of vars) for (const f of await filesOfOldDump(p.dir, v)) replaced.add(f);
  const keep: Dirent[] = [];
  for (const e of entries) {
    if (replaced.has(e.name)) continue;
    if (!e.isFile() && !e.isSymbolicLink()) {
      throw new FailedPreconditionError(
        `Expected dir to hold only files but "${join(p.dir, e.name)}" is not a file: sok.dump replaces the whole folder (keeping the other files), so dump into a folder of its own`,
        { argument: 'dir' },
      );
    }
    keep.push(e);
  }
  return keep;
}

/** The file names a dump of `v` in `dir` may hold: the fixed ones, and its slot files by its meta. */
async function filesOfOldDump(dir: string, v: SokVariable): Promise<string[]> {
  const f = files(dir, v);
  const names = [f.key, f.weight, f.score, f.meta].map((x) => basename(x));
  const meta = await readFile(f.meta, 'utf8').then(
    (t) => JSON.parse(t) as Partial<DumpMeta>,
    () => null,
  ).catch(() => null);
  if (meta && typeof meta.optimizer === 'string' && Array.isArray(meta.slots)) {
    for (const s of meta.slots) if (s && typeof s.name === 'string') names.push(basename(f.slot(meta.optimizer, s.name)));
  }
  if (meta && meta.files && typeof meta.files === 'object') names.push(...Object.keys(meta.files));
  return names;
}

/** Copies a kept entry of the old folder into the new one: a hard link (a copy where links fail). */
async function carryOver(from: string, to: string, e: Dirent): Promise<void> {
  const src = join(from, e.name);
  const dst = join(to, e.name);
  if (e.isSymbolicLink()) {
    await io('copy the link', src, async () => symlink(await readlink(src), dst));
    return;
  }
  try {
    await link(src, dst);
  } catch {
    await io('copy', src, () => copyFile(src, dst));
    await syncPath(dst);
  }
}

/** One data file being written: every byte written (short writes retried), its size and CRC-32C. */
class SumWriter {
  bytes = 0;
  crc = 0;
  constructor(
    readonly path: string,
    readonly handle: Awaited<ReturnType<typeof open>>,
  ) {}

  async write(p: Uint8Array): Promise<void> {
    let off = 0;
    while (off < p.length) {
      const { bytesWritten } = await io('write', this.path, () => this.handle.write(p, off, p.length - off));
      if (!(bytesWritten > 0)) {
        throw new IOError(`Could not write "${this.path}": only ${this.bytes + off} of ${this.bytes + p.length} bytes were written (is the disk full?)`);
      }
      off += bytesWritten;
    }
    this.crc = crc32c(p, this.crc);
    this.bytes += p.length;
  }
}

/** JSON of a meta with `metaCrc32c`, the CRC-32C of the JSON without it. */
function metaText(meta: DumpMeta): string {
  const crc = crc32c(new TextEncoder().encode(JSON.stringify(meta, null, 2)));
  return JSON.stringify({ ...meta, metaCrc32c: crc }, null, 2);
}

/**
 * Writes every row of `vars` (and the slots of `optimizer`, when given and the
 * variable was trained by it) to the folder `dir`, streamed in batches.
 *
 * The folder is replaced as a whole (the protocol the sok README describes): the new
 * dump is written into a temporary sibling folder (`.<dir>.sok-tmp-<pid>-<random>`),
 * every file fully written, checksummed and fsynced, together with the files of the
 * current folder that belong to other variables (hard links); then the current folder
 * is renamed to `.<dir>.sok-old`, the new one renamed to `dir`, the parent fsynced, and
 * the old one removed. A process killed at any point leaves either the whole previous
 * dump or the whole new one (`dump` and `load` finish an interrupted swap). A failed
 * dump leaves the previous one as it was.
 *
 * @throws InvalidTypeError / InvalidArgumentError naming the argument;
 *   FailedPreconditionError when `dir` holds a subfolder; IOError naming the file
 *   (a short write on a full disk included)
 */
export async function dump(dir: string, vars: readonly SokVariable[], optimizer?: OptimizerWrapper | null): Promise<void> {
  const a = checkArgs(dir, vars, optimizer);
  const p0 = await folderPaths(a.dir);
  return serial(p0.dir, async () => {
    await io('create folder', p0.parent, () => mkdir(p0.parent, { recursive: true }));
    const p = await folderPaths(a.dir);
    await recoverFolder(p, true);
    await removeDeadTemps(p);
    const keep = await entriesToKeep(p, a.vars);
    const tmp = join(p.parent, `${p.tmpPrefix}${process.pid}-${randomBytes(6).toString('hex')}`);
    await io('create folder', tmp, () => mkdir(tmp));
    try {
      for (const v of a.vars) await dumpOne(tmp, v, a.opt);
      const old = await stat(p.dir).catch(() => null);
      for (const e of keep) await carryOver(p.dir, tmp, e);
      if (old) await io('set the mode of', tmp, () => chmod(tmp, old.mode & 0o7777));
      await syncPath(tmp);
      if (old) await io('move aside', p.dir, () => rename(p.dir, p.aside));
      try {
        await io('rename', tmp, () => rename(tmp, p.dir));
      } catch (e) {
        if (old) await rename(p.aside, p.dir).catch(() => undefined);
        throw e;
      }
    } catch (e) {
      await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
      throw e;
    }
    await syncPath(p.parent);
    await io('remove the previous dump', p.aside, () => rm(p.aside, { recursive: true, force: true }));
  });
}

async function dumpOne(dir: string, v: SokVariable, opt: OptimizerWrapper | null): Promise<void> {
  const f = files(dir, v);
  const slots = dumpedSlots(v, opt);
  const withScores = (v as { evictStrategy?: string }).evictStrategy === 'customized';
  const targets = [f.key, f.weight, ...(slots ? slots.slots.map((s) => f.slot(slots.opt, s.name)) : []), ...(withScores ? [f.score] : [])];
  const writers: SumWriter[] = [];
  let rows = 0;
  const keyType = v.kind === 'static' ? 'int64' : v.keyDtype;
  try {
    for (const t of targets) writers.push(new SumWriter(t, await io('create', t, () => open(t, 'wx'))));
    for (const s of v.shards) {
      for await (const b of s.table.exportBatches(BATCH)) {
        rows += b.keys.length;
        const keys = globalKeys(v, s.device, b.keys);
        const k = keyType === 'int64' && !(keys instanceof BigInt64Array) ? BigInt64Array.from(keys as Int32Array, (x) => BigInt(x)) : keys;
        const parts: Uint8Array[] = [bytes(k), bytes(b.values), ...(slots ? b.slots.map(bytes) : []), ...(withScores ? [bytes(b.scores)] : [])];
        await Promise.all(parts.map((part, i) => writers[i]!.write(part)));
      }
    }
    await Promise.all(writers.map((w) => io('sync', w.path, () => w.handle.sync())));
  } finally {
    await Promise.all(writers.map((w) => w.handle.close()));
  }
  const sums: Record<string, FileSum> = {};
  for (const w of writers) sums[basename(w.path)] = { bytes: w.bytes, crc32c: w.crc };
  const meta: DumpMeta = {
    format: DUMP_FORMAT,
    version: 2,
    name: v.name,
    kind: v.kind,
    dimension: v.dimension,
    keyType,
    rows,
    optimizer: slots?.opt ?? null,
    slots: slots?.slots ?? [],
    scores: withScores,
    iterations: opt?.iterations ?? 0,
    files: sums,
  };
  const h = await io('create', f.meta, () => open(f.meta, 'wx'));
  try {
    const w = new SumWriter(f.meta, h);
    await w.write(new TextEncoder().encode(metaText(meta)));
    await io('sync', f.meta, () => h.sync());
  } finally {
    await h.close();
  }
}

/** A checked plan of one variable's load: its files and their row count. */
interface LoadPlan {
  v: SokVariable;
  meta: DumpMeta;
  slotFiles: string[] | null;
  /** Floats per row of each slot file. */
  slotWidths: number[];
  /** Every file the load reads: key, weight, the slots, the scores. */
  paths: string[];
}

async function sizeOf(path: string, what: string, v: SokVariable): Promise<number> {
  const st = await stat(path).catch(() => null);
  if (!st) throw new NotFoundError(`The dump is missing the ${what} file of variable "${v.name}": ${path}`, { argument: 'dir' });
  return st.size;
}

/** The meta of a dump, its own CRC checked (version 2). */
function parseMeta(text: string, path: string): DumpMeta {
  let parsed: DumpMeta & { metaCrc32c?: unknown };
  try {
    parsed = JSON.parse(text) as DumpMeta & { metaCrc32c?: unknown };
  } catch (e) {
    throw new CheckpointCorruptError(`Could not read ${path}: ${(e as Error).message}`, { cause: e });
  }
  if (typeof parsed !== 'object' || parsed === null || parsed.format !== DUMP_FORMAT || (parsed.version !== 1 && parsed.version !== 2)) {
    throw new CheckpointCorruptError(`${path} is not a sok dump (format ${String(parsed?.format)} version ${String(parsed?.version)})`);
  }
  if (parsed.version === 2) {
    const { metaCrc32c, ...meta } = parsed;
    const crc = crc32c(new TextEncoder().encode(JSON.stringify(meta, null, 2)));
    if (metaCrc32c !== crc || typeof meta.files !== 'object' || meta.files === null) {
      throw new CheckpointCorruptError(`${path} is corrupt: its CRC-32C does not match its content`);
    }
    return meta;
  }
  return parsed;
}

/** Reads and checks everything `load` needs for `v` before any variable is touched. */
async function planLoad(dir: string, v: SokVariable, opt: OptimizerWrapper | null): Promise<LoadPlan> {
  const f = files(dir, v);
  const st = await stat(f.meta).catch(() => null);
  if (!st) throw new NotFoundError(`The dump in "${dir}" has no files of variable "${v.name}" (missing ${f.meta})`, { argument: 'dir' });
  const meta = parseMeta(await io('read', f.meta, () => readFile(f.meta, 'utf8')), f.meta);
  if (meta.dimension !== v.dimension) throw invalidParameter(`dir (the dump of "${v.name}")`, `rows of dimension ${v.dimension} (the variable's)`, `dimension ${meta.dimension}`);
  if (meta.kind !== v.kind) throw invalidParameter(`dir (the dump of "${v.name}")`, `a ${v.kind} variable's rows`, `a ${meta.kind} variable's`);
  const rows = v.staticRows;
  if (rows !== null && meta.rows > rows) throw invalidParameter(`dir (the dump of "${v.name}")`, `at most ${rows} rows`, meta.rows);
  if (v.kind === 'dynamic' && meta.keyType !== v.keyDtype && v.keyDtype === 'int32') throw invalidParameter(`dir (the dump of "${v.name}")`, "int32 keys (keyType 'int32')", `${meta.keyType} keys`);
  const keyBytes = meta.keyType === 'int32' ? 4 : 8;
  const expect = async (path: string, what: string, n: number) => {
    const size = await sizeOf(path, what, v);
    if (size !== n) throw new CheckpointCorruptError(`${path} holds ${size} bytes; the dump's ${meta.rows} rows need ${n}`);
  };
  await expect(f.key, 'key', meta.rows * keyBytes);
  await expect(f.weight, 'weight', meta.rows * v.dimension * 4);
  if (meta.scores) await expect(f.score, 'score', meta.rows * 8);
  let slotFiles: string[] | null = null;
  const slotWidths: number[] = [];
  if (opt) {
    const spec = opt.optimizer.spec;
    v.checkSlots(spec, opt.optimizer.name);
    if (meta.optimizer !== null && meta.optimizer !== opt.optimizer.name) {
      throw new FailedPreconditionError(`The dump of "${v.name}" holds the slots of ${meta.optimizer}; it cannot be loaded with ${opt.optimizer.name}`, { argument: 'optimizer' });
    }
    if (meta.optimizer !== null) {
      slotFiles = [];
      for (const [i, name] of spec.slots.names.entries()) {
        const width = spec.slots.widths[i] === 'dim' ? v.dimension : 1;
        const path = f.slot(meta.optimizer, name);
        await expect(path, `${meta.optimizer} slot "${name}"`, meta.rows * width * 4);
        slotFiles.push(path);
        slotWidths.push(width);
      }
    }
  }
  const paths = [f.key, f.weight, ...(slotFiles ?? []), ...(meta.scores ? [f.score] : [])];
  if (meta.files) {
    for (const path of paths) {
      if (!meta.files[basename(path)]) throw new CheckpointCorruptError(`${f.meta} has no checksum of ${path}`);
    }
  }
  return { v, meta, slotFiles, slotWidths, paths };
}

type Handle = Awaited<ReturnType<typeof open>>;

/** Fills `buf` from `pos` (loops on short reads). @throws CheckpointCorruptError when the file ends first */
async function readFull(h: Handle, path: string, buf: Uint8Array, pos: number): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    const { bytesRead } = await io('read', path, () => h.read(buf, off, buf.length - off, pos + off));
    if (bytesRead === 0) throw new CheckpointCorruptError(`${path} ended early`);
    off += bytesRead;
  }
}

/**
 * Reads every file of a plan once before anything is loaded: its CRC-32C against the
 * meta's (version 2), and a Variable's row ids against its rows (every version).
 */
async function verifyPlan(p: LoadPlan, handles: Handle[]): Promise<void> {
  const { meta, v } = p;
  const keyBytes = meta.keyType === 'int32' ? 4 : 8;
  for (const [i, path] of p.paths.entries()) {
    const size = (await handles[i]!.stat()).size;
    const sum = meta.files?.[basename(path)];
    if (sum && sum.bytes !== size) throw new CheckpointCorruptError(`${path} holds ${size} bytes; the dump wrote ${sum.bytes}`);
    const step = i === 0 ? BATCH * keyBytes : CHUNK;
    const buf = new Uint8Array(Math.min(step, size));
    let crc = 0;
    // A bad row id is reported once the file's checksum passed (a flipped bit is corruption, not a bad id).
    let badRow: unknown = null;
    for (let at = 0; at < size; at += step) {
      const chunk = buf.subarray(0, Math.min(step, size - at));
      await readFull(handles[i]!, path, chunk, at);
      if (sum) crc = crc32c(chunk, crc);
      const rows = v.staticRows;
      if (i === 0 && rows !== null && badRow === null) {
        const keys = new BigInt64Array(chunk.slice().buffer);
        try {
          checkRowIndices(keys, rows, `the row ids in ${path} (from row ${at / keyBytes})`, v.name);
        } catch (e) {
          badRow = e;
        }
      }
    }
    if (sum && crc !== sum.crc32c) throw new CheckpointCorruptError(`${path} is corrupt: its CRC-32C ${crc} does not match ${sum.crc32c} in the dump's meta`);
    if (badRow !== null) throw badRow;
  }
}

/**
 * Loads what `dump` wrote into `vars` (and the optimizer slots, with `optimizer`):
 * each variable's rows are replaced by the dump's, every key routed to its owner under
 * the current device count (re-sharding), streamed in batches. Every file of every
 * variable is checked and read once first (present, sizes, dimension, key type,
 * optimizer, each file's CRC-32C, a Variable's row ids): a refused load changes
 * nothing. Dumps written before the checksums (meta version 1) load without the CRC
 * check. A dump whose swap a crash interrupted is recovered first (see `dump`).
 *
 * @throws NotFoundError (missing files), InvalidArgumentError (other dimension or kind),
 *   CheckpointCorruptError (sizes, checksums, row ids) naming the file,
 *   FailedPreconditionError (other optimizer), IOError
 */
export async function load(dir: string, vars: readonly SokVariable[], optimizer?: OptimizerWrapper | null): Promise<void> {
  const a = checkArgs(dir, vars, optimizer);
  const p0 = await folderPaths(a.dir);
  return serial(p0.dir, async () => {
    await recoverFolder(await folderPaths(a.dir), false);
    const root = (await folderPaths(a.dir)).dir;
    const plans: LoadPlan[] = [];
    for (const v of a.vars) plans.push(await planLoad(root, v, a.opt));
    // The files stay open from the check to the load: a dump replacing the folder meanwhile changes nothing here.
    const handles: Handle[][] = [];
    try {
      for (const p of plans) {
        const hs: Handle[] = [];
        handles.push(hs);
        for (const path of p.paths) hs.push(await io('open', path, () => open(path, 'r')));
      }
      for (const [i, p] of plans.entries()) await verifyPlan(p, handles[i]!);
      // Staged: every variable's rows go into new device tables, swapped in together once all
      // loaded, so a failure while loading (a backend or a read error) changes nothing.
      const spec = a.opt?.optimizer.spec ?? null;
      const epoch = peekScore(context());
      const staged: EmbeddingTable[][] = [];
      try {
        for (const [i, p] of plans.entries()) {
          staged.push(await stageTables(p.v, spec, epoch));
          await loadOne(p, staged[i]!, handles[i]!);
        }
      } catch (e) {
        for (const t of staged.flat()) t.dispose();
        throw e;
      }
      if (a.vars.some((v) => v.scoredByClock)) nextScore(context());
      for (const [i, p] of plans.entries()) p.v.adoptTables(staged[i]!, spec, a.opt?.optimizer.name ?? null);
    } finally {
      await Promise.all(handles.flat().map((h) => h.close()));
    }
    if (a.opt) a.opt.restoreIterations(Math.max(a.opt.iterations, ...plans.map((p) => (p.meta.optimizer !== null ? p.meta.iterations : 0))));
  });
}

/**
 * The tables a load fills for `v` (one per shard): a dynamic variable's start empty (the
 * dump replaces its rows), a static variable's with a copy of its rows (rows the dump does
 * not hold keep theirs; slots too while the optimizer's slots stay the same). The slots
 * are `spec`'s (null: the current ones); tables scored by the clock get `epoch`.
 */
async function stageTables(v: SokVariable, spec: OptimizerSpec | null, epoch: number): Promise<EmbeddingTable[]> {
  const sameSlots = spec === null || sameSlotLayout(spec.slots, v.slotLayout);
  const tables = await v.freshTables(spec, v.kind === 'dynamic' ? 'none' : sameSlots ? 'rowsAndSlots' : 'rows');
  if (v.scoredByClock) for (const t of tables) t.setEpoch(epoch);
  return tables;
}

/** Reads the dump's rows of `p.v` into `tables` (stageTables's, in shard order), batch by batch. */
async function loadOne(p: LoadPlan, tables: EmbeddingTable[], handles: Handle[]): Promise<void> {
  const { v, meta, paths } = p;
  const dim = v.dimension;
  const widths = p.slotWidths;
  const keyBytes = meta.keyType === 'int32' ? 4 : 8;
  for (let at = 0; at < meta.rows; at += BATCH) {
    const n = Math.min(BATCH, meta.rows - at);
    const read = async (i: number, width: number) => {
      const buf = new Uint8Array(n * width);
      await readFull(handles[i]!, paths[i]!, buf, at * width);
      return buf.buffer;
    };
    const rawKeys = await read(0, keyBytes);
    let keys: Keys = meta.keyType === 'int32' ? new Int32Array(rawKeys) : new BigInt64Array(rawKeys);
    if (v.staticRows !== null) keys = Int32Array.from(keys as BigInt64Array, (k) => Number(k));
    const values = new Float32Array(await read(1, dim * 4));
    const slots = p.slotFiles ? await Promise.all(p.slotFiles.map(async (_, j) => new Float32Array(await read(2 + j, widths[j]! * 4)))) : null;
    const scores = meta.scores ? new BigUint64Array(await read(paths.length - 1, 8)) : null;
    await importRouted(v, tables, { keys, values, slots: slots ?? [], scores: scores ?? new BigUint64Array(0) }, slots !== null, scores !== null, widths);
  }
}

/** importRows of a batch of global rows into `tables` (one per shard of `v`) on their owning devices, concurrently. */
async function importRouted(v: SokVariable, tables: EmbeddingTable[], b: ExportBatch, withSlots: boolean, withScores: boolean, widths: number[]): Promise<void> {
  await Promise.all(routeKeys(v, b.keys).map((r) => {
    if (r.local.length === 0) return undefined;
    const slots = withSlots ? b.slots.map((s, j) => takeRows(s, r.positions, widths[j]!)) : null;
    return tables[v.shards.indexOf(r.shard)]!.importRows(r.local, takeRows(b.values, r.positions, v.dimension), slots, withScores ? takeScores(b.scores, r.positions) : null);
  }));
}
