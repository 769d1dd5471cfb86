import { open, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CheckpointCorruptError,
  type ExportBatch,
  checkRowIndices,
  FailedPreconditionError,
  InvalidTypeError,
  IOError,
  invalidParameter,
  type Keys,
  NotFoundError,
} from '@embedstack/core';
import { context } from './context.js';
import { checkVariable } from './lookup.js';
import { OptimizerWrapper } from './optimizerWrapper.js';
import { globalKeys, routeKeys, takeRows, takeScores } from './route.js';
import { type SokVariable, stamp } from './variable.js';

/**
 * SOK's dump format, per variable in one folder: `<name>-key` (keys, little-endian
 * int64; int32 for a keyType 'int32' DynamicVariable; a Variable's global row ids),
 * `<name>-weight` (float32 [n, dim]), `<name>-<Opt>-<slot>` per optimizer slot
 * (float32 [n, width]; e.g. `emb-Adam-momenta`), `<name>-score` (uint64, only for
 * evictStrategy 'customized'), and `<name>-meta.json` (dimension, key type, row count,
 * optimizer and slots: what `load` checks before touching anything). Rows are in device
 * order; `load` routes each key to its owner under the current device count, so a dump
 * from 4 devices loads on 2.
 */
export const DUMP_FORMAT = 'embedstack-sok-dump';

interface DumpMeta {
  format: string;
  version: 1;
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
}

const BATCH = 65536;

function files(dir: string, v: { name: string }) {
  const base = join(dir, v.name);
  return { key: `${base}-key`, weight: `${base}-weight`, score: `${base}-score`, meta: `${base}-meta.json`, slot: (opt: string, slot: string) => `${base}-${opt}-${slot}` };
}

function bytes(a: BigInt64Array | Int32Array | Float32Array | BigUint64Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

async function io<T>(what: string, path: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw new IOError(`Could not ${what} "${path}": ${(e as Error).message}`, { cause: e });
  }
}

function checkArgs(dir: unknown, vars: unknown, opt: unknown): { dir: string; vars: SokVariable[]; opt: OptimizerWrapper | null } {
  context();
  if (typeof dir !== 'string' || dir.length === 0 || dir.includes('\u0000')) throw invalidParameter('dir', 'a non-empty folder path', dir, InvalidTypeError);
  if (!Array.isArray(vars) || vars.length === 0) throw invalidParameter('vars', 'a non-empty array of SOK variables', vars, InvalidTypeError);
  const list = vars.map((v, i) => checkVariable(v, `vars[${i}]`));
  const names = new Set<string>();
  for (const v of list) {
    if (names.has(v.name)) throw invalidParameter('vars', 'variables with distinct names (the names prefix the files)', `two named "${v.name}"`);
    names.add(v.name);
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

/**
 * Writes every row of `vars` (and the slots of `optimizer`, when given and the
 * variable was trained by it) to `dir`, streamed in batches. Each file is written under
 * a temporary name and renamed into place once complete.
 *
 * @throws InvalidTypeError / InvalidArgumentError naming the argument; IOError
 */
export async function dump(dir: string, vars: readonly SokVariable[], optimizer?: OptimizerWrapper | null): Promise<void> {
  const a = checkArgs(dir, vars, optimizer);
  await io('create folder', a.dir, () => mkdir(a.dir, { recursive: true }));
  for (const v of a.vars) await dumpOne(a.dir, v, a.opt);
}

async function dumpOne(dir: string, v: SokVariable, opt: OptimizerWrapper | null): Promise<void> {
  const f = files(dir, v);
  const slots = dumpedSlots(v, opt);
  const withScores = (v as { evictStrategy?: string }).evictStrategy === 'customized';
  const targets = [f.key, f.weight, ...(slots ? slots.slots.map((s) => f.slot(slots.opt, s.name)) : []), ...(withScores ? [f.score] : [])];
  const tmp = targets.map((t) => `${t}.tmp-${process.pid}`);
  const handles = await Promise.all(tmp.map((t) => io('create', t, () => open(t, 'w'))));
  let rows = 0;
  const keyType = v.kind === 'static' ? 'int64' : v.keyDtype;
  try {
    for (const s of v.shards) {
      for await (const b of s.table.exportBatches(BATCH)) {
        rows += b.keys.length;
        const keys = globalKeys(v, s.device, b.keys);
        const k = keyType === 'int64' && !(keys instanceof BigInt64Array) ? BigInt64Array.from(keys as Int32Array, (x) => BigInt(x)) : keys;
        const parts: Uint8Array[] = [bytes(k), bytes(b.values), ...(slots ? b.slots.map(bytes) : []), ...(withScores ? [bytes(b.scores)] : [])];
        await Promise.all(parts.map((p, i) => io('write', tmp[i]!, () => handles[i]!.write(p))));
      }
    }
    await Promise.all(handles.map((h, i) => io('sync', tmp[i]!, () => h.sync())));
  } finally {
    await Promise.all(handles.map((h) => h.close()));
  }
  for (let i = 0; i < targets.length; i++) await io('rename', tmp[i]!, () => rename(tmp[i]!, targets[i]!));
  const meta: DumpMeta = { format: DUMP_FORMAT, version: 1, name: v.name, kind: v.kind, dimension: v.dimension, keyType, rows, optimizer: slots?.opt ?? null, slots: slots?.slots ?? [], scores: withScores, iterations: opt?.iterations ?? 0 };
  await io('write', f.meta, () => writeFile(f.meta, JSON.stringify(meta, null, 2)));
}

/** A checked plan of one variable's load: its files and their row count. */
interface LoadPlan {
  v: SokVariable;
  meta: DumpMeta;
  slotFiles: string[] | null;
}

async function sizeOf(path: string, what: string, v: SokVariable): Promise<number> {
  const st = await stat(path).catch(() => null);
  if (!st) throw new NotFoundError(`The dump is missing the ${what} file of variable "${v.name}": ${path}`, { argument: 'dir' });
  return st.size;
}

/** Reads and checks everything `load` needs for `v` before any variable is touched. */
async function planLoad(dir: string, v: SokVariable, opt: OptimizerWrapper | null): Promise<LoadPlan> {
  const f = files(dir, v);
  const st = await stat(f.meta).catch(() => null);
  if (!st) throw new NotFoundError(`The dump in "${dir}" has no files of variable "${v.name}" (missing ${f.meta})`, { argument: 'dir' });
  let meta: DumpMeta;
  try {
    meta = JSON.parse(await readFile(f.meta, 'utf8')) as DumpMeta;
  } catch (e) {
    throw new CheckpointCorruptError(`Could not read ${f.meta}: ${(e as Error).message}`, { cause: e });
  }
  if (meta.format !== DUMP_FORMAT || meta.version !== 1) throw new CheckpointCorruptError(`${f.meta} is not a sok dump (format ${String(meta.format)} version ${String(meta.version)})`);
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
      }
    }
  }
  return { v, meta, slotFiles };
}

/**
 * Loads what `dump` wrote into `vars` (and the optimizer slots, with `optimizer`):
 * each variable's rows are replaced by the dump's, every key routed to its owner under
 * the current device count (re-sharding), streamed in batches. Every file of every
 * variable is checked first (present, sizes, dimension, key type, optimizer): a
 * refused load changes nothing.
 *
 * @throws NotFoundError (missing files), InvalidArgumentError (other dimension or kind),
 *   CheckpointCorruptError (sizes), FailedPreconditionError (other optimizer), IOError
 */
export async function load(dir: string, vars: readonly SokVariable[], optimizer?: OptimizerWrapper | null): Promise<void> {
  const a = checkArgs(dir, vars, optimizer);
  const plans: LoadPlan[] = [];
  for (const v of a.vars) plans.push(await planLoad(a.dir, v, a.opt));
  if (a.opt) for (const p of plans) await p.v.bindSlots(a.opt.optimizer.spec, a.opt.optimizer.name);
  stamp(a.vars);
  for (const p of plans) await loadOne(a.dir, p);
  if (a.opt) a.opt.restoreIterations(Math.max(a.opt.iterations, ...plans.map((p) => (p.meta.optimizer !== null ? p.meta.iterations : 0))));
}

async function loadOne(dir: string, p: LoadPlan): Promise<void> {
  const { v, meta } = p;
  const f = files(dir, v);
  const dim = v.dimension;
  const widths = v.slotLayout.widths.map((w) => (w === 'dim' ? dim : 1));
  const paths = [f.key, f.weight, ...(p.slotFiles ?? []), ...(meta.scores ? [f.score] : [])];
  const handles = await Promise.all(paths.map((path) => io('open', path, () => open(path, 'r'))));
  const keyBytes = meta.keyType === 'int32' ? 4 : 8;
  try {
    if (v.kind === 'dynamic') await Promise.all(v.shards.map((s) => s.table.clear()));
    for (let at = 0; at < meta.rows; at += BATCH) {
      const n = Math.min(BATCH, meta.rows - at);
      const read = async (i: number, width: number) => {
        const buf = new Uint8Array(n * width);
        const { bytesRead } = await io('read', paths[i]!, () => handles[i]!.read(buf, 0, buf.length, at * width));
        if (bytesRead !== buf.length) throw new CheckpointCorruptError(`${paths[i]} ended early`);
        return buf.buffer;
      };
      const rawKeys = await read(0, keyBytes);
      let keys: Keys = meta.keyType === 'int32' ? new Int32Array(rawKeys) : new BigInt64Array(rawKeys);
      const rows = v.staticRows;
      if (rows !== null) {
        checkRowIndices(keys, rows, `the row ids in ${paths[0]}`, v.name);
        keys = Int32Array.from(keys as BigInt64Array, (k) => Number(k));
      }
      const values = new Float32Array(await read(1, dim * 4));
      const slots = p.slotFiles ? await Promise.all(p.slotFiles.map(async (_, j) => new Float32Array(await read(2 + j, widths[j]! * 4)))) : null;
      const scores = meta.scores ? new BigUint64Array(await read(paths.length - 1, 8)) : null;
      await importRouted(v, { keys, values, slots: slots ?? [], scores: scores ?? new BigUint64Array(0) }, slots !== null, scores !== null, widths);
    }
  } finally {
    await Promise.all(handles.map((h) => h.close()));
  }
}

/** importRows of a batch of global rows on their owning devices, concurrently. */
async function importRouted(v: SokVariable, b: ExportBatch, withSlots: boolean, withScores: boolean, widths: number[]): Promise<void> {
  await Promise.all(routeKeys(v, b.keys).map((r) => {
    if (r.local.length === 0) return undefined;
    const slots = withSlots ? b.slots.map((s, j) => takeRows(s, r.positions, widths[j]!)) : null;
    return r.shard.table.importRows(r.local, takeRows(b.values, r.positions, v.dimension), slots, withScores ? takeScores(b.scores, r.positions) : null);
  }));
}
