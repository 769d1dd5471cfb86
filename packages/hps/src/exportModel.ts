import { mkdir, open, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import {
  checkKnownKeys,
  checkOptions,
  createTable,
  DisposedError,
  type EmbeddingBackend,
  EmbeddingError,
  EmbeddingTable,
  exportHugeCTR,
  InternalError,
  InvalidArgumentError,
  invalidParameter,
  InvalidTypeError,
  IOError,
  loadDefaultBackend,
  saveVersionedDir,
  Tensor,
} from '@embedstack/core';
import { resolvePsConfig } from './config.js';
import { checkHpsName } from './configKeys.js';

/** What {@link exportModel} exports as one HPS table. */
export type ExportableTable = EmbeddingTable | readonly EmbeddingTable[] | Tensor;

/** The vector size of an exportable table. */
function dimOf(t: ExportableTable): number {
  if (t instanceof EmbeddingTable) return t.dim;
  if (t instanceof Tensor) return t.shape[1]!;
  return (t as readonly EmbeddingTable[])[0]!.dim;
}

/** Writes `text` to `path` crash-safely: a temporary sibling, fsynced, renamed over it, the folder fsynced. */
async function writeFileAtomic(path: string, text: string, outcome = ''): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}`);
  try {
    const h = await open(tmp, 'w');
    try {
      await h.writeFile(text);
      await h.sync();
    } finally {
      await h.close();
    }
    await rename(tmp, path);
    await syncDir(dirname(path));
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw new IOError(`Could not write the ps config "${path}": ${(e as Error).message}${outcome}`, { cause: e });
  }
}

/** Per key (a `<dir>/<model>` path, or FOLDERS): the last call queued in this process (see {@link inTurn}). */
const turns = new Map<string, Promise<unknown>>();

/** The key of {@link inTurn} under which exports create and remove their folders, one at a time (no path is ''). */
const FOLDERS = '';

/**
 * Runs `fn` once every earlier call of this process with the same `key` has ended (queued in call
 * order). Exports into one `<dir>/<model>` run one at a time, so that a failed one removes the
 * folders it created before the next one looks at them; creating and removing folders runs one at
 * a time, so that a failed export never removes a parent folder another export is creating below.
 */
function inTurn<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const run = (turns.get(key) ?? Promise.resolve()).then(fn);
  const done = run.then(
    () => undefined,
    () => undefined,
  );
  turns.set(key, done);
  void done.then(() => turns.get(key) === done && turns.delete(key));
  return run;
}

/** Removes `root` and its parents up to `top`, from `root` up, each only while empty (rmdir). */
async function removeEmpty(root: string, top: string): Promise<void> {
  for (let d = root; ; d = dirname(d)) {
    const removed = await rmdir(d).then(
      () => true,
      () => false,
    );
    if (!removed || d === top || dirname(d) === d) return;
  }
}

/**
 * After a failed export that created `root` and its parents up to `top`: removes them again, each
 * only while empty, so nothing another export wrote there since is touched.
 */
function removeCreated(root: string, top: string): Promise<void> {
  return inTurn(FOLDERS, () => removeEmpty(root, top));
}

/**
 * Creates `root` and its missing parents, each new folder's entry made durable (its parent
 * fsynced, as core does for the folders a save creates).
 * @returns the topmost folder created, or null when `root` existed
 * @throws IOError (nothing created is left)
 */
function createRoot(root: string): Promise<string | null> {
  return inTurn(FOLDERS, async () => {
    let top: string | undefined;
    try {
      top = await mkdir(root, { recursive: true });
      for (let d = root; top !== undefined; d = dirname(d)) {
        await syncDir(dirname(d));
        if (d === top) break;
      }
      return top ?? null;
    } catch (e) {
      if (top !== undefined) await removeEmpty(root, top);
      throw new IOError(`Could not create the folder "${root}": ${(e as Error).message}; nothing was exported`, { cause: e });
    }
  });
}

/** fsyncs folder `dir` (its entries). */
async function syncDir(dir: string): Promise<void> {
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

function isExportable(t: unknown): t is ExportableTable {
  if (t instanceof EmbeddingTable) return true;
  if (t instanceof Tensor) return t.dtype === 'float32' && t.shape.length === 2 && (t.shape[1] ?? 0) >= 1;
  return Array.isArray(t) && t.length > 0 && t.every((x) => x instanceof EmbeddingTable && x.dim === (t[0] as EmbeddingTable).dim);
}

/** The one core table to export (a temporary one on `backend`, disposed by the caller, for tensors and shards). */
async function asTable(t: ExportableTable, backend: EmbeddingBackend | null): Promise<{ table: EmbeddingTable; temporary: boolean }> {
  if (t instanceof EmbeddingTable) return { table: t, temporary: false };
  if (backend === null) throw new InternalError('exportModel: no backend resolved for a tensor or shards');
  if (t instanceof Tensor) {
    const [rows, dim] = t.shape as [number, number];
    const table = createTable({ kind: 'static', vocabularySize: rows, dim, initializer: { kind: 'array', values: t.data as Float32Array } }, { backend });
    return { table, temporary: true };
  }
  const shards = t as readonly EmbeddingTable[];
  const table = createTable({ kind: 'dynamic', dim: shards[0]!.dim, keyDtype: 'int64', initializer: { kind: 'zeros' } }, { backend });
  for (const shard of shards) for await (const b of shard.exportBatches()) await table.importRows(b.keys, b.values);
  return { table, temporary: true };
}

/** Options of {@link exportModel}. */
export interface ExportModelOptions {
  /** Model name in the ps config (`[a-zA-Z0-9_-]{1,120}`). Required. */
  model: string;
  /**
   * Trained tables, in table-id order, each with an optional HPS table name (default
   * `sparse_embedding<i>`): a core `EmbeddingTable` (sok's, a dynamic table); an array of
   * them, the shards of one table (a tfra `Variable`'s `tables`), merged; or a dense
   * float32 Tensor `[vocabularySize, dim]` (tpu-embedding's `embeddingTables.get(config)`),
   * whose keys are the row indices.
   */
  tables: readonly (
    | ExportableTable
    | {
        /** The table (as above). */
        table: ExportableTable;
        /** HPS table name. Default `sparse_embedding<i>`. */
        name?: string;
      }
  )[];
  /** Folder receiving `<model>/<table>/{key,emb_vector}`. Required. */
  dir: string;
  /** Write this ps.json (the returned config) too. Default none. */
  psConfigFile?: string | null;
  /** Extra keys of the model entry (gpucacheper, hit_rate_threshold, max_batch_size, ...). Default none. */
  modelOptions?: Record<string, unknown> | null;
  /** Extra global keys (volatile_db, persistent_db, update_source). Default none. */
  globalOptions?: Record<string, unknown> | null;
  /** `supportlonglong`: false writes uint32 keys (they must then fit). Default true. */
  supportlonglong?: boolean;
}

/**
 * Exports trained tables to HugeCTR's sparse model layout (one `key` / `emb_vector`
 * folder per table, written by core's `exportHugeCTR`) and returns the ps config
 * (HugeCTR JSON) that serves them: `HPS.create({ psConfig })` loads it.
 * The tables of one call are one commit (core's `saveVersionedDir`): they are written
 * to `<dir>/<model>/ckpt-N/<table>/` and `<dir>/<model>/CURRENT` is switched to the new
 * `ckpt-N` only once every table is durable, then the previous version is deleted. The
 * config's `sparse_files` name `<dir>/<model>/<table>`, which HPS resolves through
 * `CURRENT` once per model load, so a server loading it sees the whole previous export
 * or the whole new one, never a mix, whenever the export stops (a kill included).
 * Every option is checked before anything is written: live (not disposed) tables, distinct table names, and the
 * returned config (with `modelOptions` / `globalOptions` merged in) passes the ps config
 * checks `HPS.create` runs. `psConfigFile` is written crash-safely (temporary file, fsync,
 * rename) after the tables and before the switch of `CURRENT`: a failed write of it commits
 * nothing (the previous version stays live); should the switch fail after it, the file's
 * previous content is put back (or the new file removed). A failed export leaves no folder it
 * created (`<dir>/<model>`, and `<dir>` and its parents when new: removed again while empty); one that
 * existed stays as it was. Exports into one `<dir>/<model>` run one at a time in this process.
 * @throws InvalidArgumentError / InvalidTypeError for bad options (an invalid merged config
 *   names options.modelOptions or options.globalOptions), DisposedError for a disposed table
 *   or shard (before anything is created, or naming `options.tables[i]` when disposed while the
 *   export runs), core's export errors, IOError
 */
export async function exportModel(options: ExportModelOptions): Promise<Record<string, unknown>> {
  const o = checkOptions<ExportModelOptions>(options, ['model', 'tables', 'dir', 'psConfigFile', 'modelOptions', 'globalOptions', 'supportlonglong'], 'options', { required: true });
  const model = checkHpsName(o.model, 'options.model');
  if (typeof o.dir !== 'string' || o.dir.length === 0) throw invalidParameter('options.dir', 'a folder path', o.dir, InvalidTypeError);
  if (!Array.isArray(o.tables) || o.tables.length === 0) throw invalidParameter('options.tables', 'a non-empty array of tables', o.tables, InvalidTypeError);
  const tables = o.tables.map((t, i) => {
    const bare = isExportable(t);
    // { table, name }: a misspelt name would export under sparse_embedding<i>, silently
    if (!bare && typeof t === 'object' && t !== null && Object.getPrototypeOf(t) === Object.prototype) checkKnownKeys(t, ['table', 'name'], `options.tables[${i}]`, 'fields');
    const table = bare ? t : (t as { table?: unknown })?.table;
    const given: unknown = Array.isArray(t) ? t : table;
    if (Array.isArray(given) && given.length > 0 && given.every((x) => x instanceof EmbeddingTable)) {
      const shards = given as readonly EmbeddingTable[];
      const odd = shards.findIndex((x) => x.dim !== shards[0]!.dim);
      if (odd > 0) {
        throw new InvalidArgumentError(
          `Expected the shards of options.tables[${i}] to have one dim (they are one table) but shard 0 has dim ${shards[0]!.dim} and shard ${odd} dim ${shards[odd]!.dim}`,
          { argument: `options.tables[${i}]` },
        );
      }
    }
    if (!isExportable(table)) {
      throw invalidParameter(`options.tables[${i}]`, 'an EmbeddingTable, an array of shards, a float32 Tensor [rows, dim], or { table, name }', t, InvalidTypeError);
    }
    // a disposed table (or shard) is refused here, before the export creates <dir>/<model>
    const parts = table instanceof EmbeddingTable ? [table] : Array.isArray(table) ? (table as readonly EmbeddingTable[]) : [];
    const dead = parts.findIndex((x) => x.disposed);
    if (dead >= 0) {
      const what = parts.length === 1 && !Array.isArray(table) ? `options.tables[${i}]` : `shard ${dead} of options.tables[${i}]`;
      throw new DisposedError(`Expected ${what} to be a live (not disposed) EmbeddingTable but received disposed table ${JSON.stringify(parts[dead]!.name)}`, {
        argument: `options.tables[${i}]`,
      });
    }
    const name = bare || (t as { name?: unknown }).name == null ? `sparse_embedding${i}` : checkHpsName((t as { name?: unknown }).name, `options.tables[${i}].name`);
    return { table, name };
  });
  const seen = new Map<string, number>();
  for (const [i, t] of tables.entries()) {
    const first = seen.get(t.name);
    if (first !== undefined) {
      throw new InvalidArgumentError(`Expected options.tables to have distinct names but tables ${first} and ${i} are both named ${JSON.stringify(t.name)}`, {
        argument: `options.tables[${i}].name`,
      });
    }
    seen.set(t.name, i);
  }
  for (const [k, v] of [['modelOptions', o.modelOptions], ['globalOptions', o.globalOptions]] as const) {
    if (v != null && (typeof v !== 'object' || Array.isArray(v))) throw invalidParameter(`options.${k}`, 'an object', v, InvalidTypeError);
  }
  const longKeys = o.supportlonglong ?? true;
  if (typeof longKeys !== 'boolean') throw invalidParameter('options.supportlonglong', 'a boolean', longKeys, InvalidTypeError);
  if (o.psConfigFile != null && (typeof o.psConfigFile !== 'string' || o.psConfigFile.length === 0)) {
    throw invalidParameter('options.psConfigFile', 'a file path', o.psConfigFile, InvalidTypeError);
  }
  const root = resolve(o.dir, model);
  const sparseFiles = tables.map((t) => join(root, t.name));
  const config: Record<string, unknown> = {
    supportlonglong: longKeys,
    ...(o.globalOptions ?? {}),
    models: [
      {
        model,
        sparse_files: sparseFiles,
        embedding_table_names: tables.map((t) => t.name),
        embedding_vecsize_per_table: tables.map((t) => dimOf(t.table)),
        maxnum_catfeature_query_per_table_per_sample: tables.map(() => 1),
        default_value_for_each_table: tables.map(() => 0),
        deployed_device_list: [0],
        max_batch_size: 65536,
        ...(o.modelOptions ?? {}),
      },
    ],
  };
  // The config HPS.create will read, checked before anything is written (a misspelled key of modelOptions / globalOptions included).
  try {
    resolvePsConfig(config, dirname(root));
  } catch (e) {
    if (!(e instanceof EmbeddingError)) throw e;
    const arg = e.argument?.startsWith('models') || e.argument?.startsWith('psConfig.models') ? 'options.modelOptions' : 'options.globalOptions';
    const Cls = e.constructor as new (message: string, options: { argument: string; cause: unknown }) => EmbeddingError;
    throw new Cls(`Expected ${arg} to give a valid ps config: ${e.message}`, { argument: arg, cause: e });
  }
  // the backend of the temporary tables (tensors, shards), resolved before anything is created: an unknown or unusable one (EMBEDSTACK_BACKEND) rejects here
  const backend = tables.some((t) => !(t.table instanceof EmbeddingTable)) ? loadDefaultBackend({ from: import.meta.url }) : null;
  // psConfigFile is written after the tables and before CURRENT switches (the commit): a failed
  // write commits nothing; if the commit fails after it, the file's previous content is put back
  const configFile = o.psConfigFile == null ? null : resolve(o.psConfigFile);
  const text = JSON.stringify(config, null, 2) + '\n';
  let previousConfig: string | null = null;
  let configWritten = false;
  // one export into <dir>/<model> at a time in this process: a failed one removes what it created before the next one looks
  await inTurn(root, async () => {
    // the folders this export creates (<dir>/<model>, and <dir> and its parents when missing): a failed export removes them again
    const created = await createRoot(root);
    try {
      await saveVersionedDir(root, async ({ tmp }) => {
        for (const [i, { table: t, name }] of tables.entries()) {
          try {
            const { table, temporary } = await asTable(t, backend);
            try {
              await exportHugeCTR(table, join(tmp, name), { keyFormat: longKeys ? 'int64' : 'uint32' });
            } finally {
              if (temporary) table.dispose();
            }
          } catch (e) {
            // core names its own argument ("table"): say which of the caller's tables it was
            if (!(e instanceof DisposedError)) throw e;
            throw new DisposedError(`Expected options.tables[${i}] to stay live (not disposed) until exportModel returns but it was disposed while the export ran: nothing was exported`, {
              argument: `options.tables[${i}]`,
              cause: e,
            });
          }
        }
        if (configFile !== null) {
          // read under the export's lock, so that it is the config of the version live now
          previousConfig = await readFile(configFile, 'utf8').catch((e: NodeJS.ErrnoException) => {
            if (e.code === 'ENOENT') return null;
            throw new IOError(`Could not read the ps config "${configFile}" (to put it back should the export fail): ${e.message}; nothing was exported`, { cause: e });
          });
          await writeFileAtomic(configFile, text, `; nothing was exported: the previous version of "${root}" stays live`);
          configWritten = true;
        }
      });
    } catch (e) {
      // put back unless another export (its lock taken once this one's was released) wrote the file meanwhile
      if (configWritten && configFile !== null && (await readFile(configFile, 'utf8').catch(() => null)) === text) {
        const restored = await (previousConfig === null ? rm(configFile, { force: true }) : writeFileAtomic(configFile, previousConfig)).then(
          () => true,
          () => false,
        );
        if (!restored && e instanceof EmbeddingError) {
          e.message += ` (the previous version of "${root}" stays live, but putting the previous ps config "${configFile}" back failed: it holds this export's config)`;
        }
      }
      if (created !== null) await removeCreated(root, created);
      throw e;
    }
  });
  return config;
}
