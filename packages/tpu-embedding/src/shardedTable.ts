import {
  type Bag,
  type Combiner,
  createTable,
  type EmbeddingBackend,
  EmbeddingTable,
  type ExportBatch,
  fnv1a32,
  initialRow,
  initializers,
  makeKeys,
  type InitializerSpec,
  invalidParameter,
  isInitializerSpec,
  type KeyDtype,
  type Keys,
  type OptimizerSpec,
  type RawTable,
  type ResolvedInitializer,
  type ResolvedTableOptions,
  resolveInitializer,
  type ShardPlan,
  Tensor,
  UnsupportedError,
} from '@embedstack/core';
import type { TableConfig } from './config.js';
import type { EmbeddingOptimizer, SlotValue } from './optimizers.js';
import { type ShardRange, shardOf, shardRanges } from './strategy.js';

/** Everything needed to create one logical table. */
export interface TableSetup {
  /** Resolved name (`table_{i}` when the config has none). */
  name: string;
  config: TableConfig;
  /** The table's optimizer (its own or the global one); undefined = inference only. */
  optimizer: EmbeddingOptimizer | undefined;
}

interface Shard extends ShardRange {
  table: EmbeddingTable;
  keyDtype: KeyDtype;
  /** The rows [start, start + size) of the logical table, under local row id - start; null for the only shard. */
  plan: ShardPlan | null;
}

const RANDOM_KINDS = new Set(['uniform', 'normal', 'truncatedNormal']);
const INT32_MAX = 2147483647;

function localKeys(ids: ArrayLike<number>, positions: ArrayLike<number> | null, n: number, start: number, dtype: KeyDtype): Keys {
  if (dtype === 'int32') {
    const k = new Int32Array(n);
    for (let i = 0; i < n; i++) k[i] = ids[positions ? positions[i]! : i]! - start;
    return k;
  }
  const k = new BigInt64Array(n);
  for (let i = 0; i < n; i++) k[i] = BigInt(ids[positions ? positions[i]! : i]! - start);
  return k;
}

/** The per-shard part of a batch of (row id, payload) entries, order kept. */
interface Part {
  shard: Shard;
  /** positions of the entries in the input */
  positions: Int32Array;
}

/**
 * One logical `[vocabularySize, dim]` table stored as row shards: one static core
 * table per non-empty shard of {@link shardRanges}, rows with their optimizer slots.
 * Row ids here are global (validated by the caller); each shard sees local ids
 * (`id - start`). Memory lives in the backend; results are fresh host arrays.
 *
 * Initial values never depend on the sharding: a function initializer is evaluated
 * once for the whole table and sliced; a random initializer draws per (table name,
 * global row, column) from core's counter-based generator.
 */
/** Waits for every promise to settle, then throws the first rejection (none is left running when it throws). */
export async function settleAll(jobs: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(jobs)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

export class ShardedTable {
  readonly name: string;
  readonly config: TableConfig;
  readonly optimizer: EmbeddingOptimizer | undefined;
  readonly vocabularySize: number;
  readonly dim: number;
  readonly hosts: number;
  /** Key dtype of row ids (global and in every shard): int32 unless the table has more than 2^31 - 1 rows. */
  readonly keyDtype: KeyDtype;
  readonly shards: readonly Shard[];
  readonly #initializer: ResolvedInitializer;
  readonly #backend: EmbeddingBackend;
  #view: EmbeddingTable | null = null;
  #allRows: Keys | null = null;

  /**
   * Creates the shard tables on `backend` (synchronously). With `blankOf` (see
   * {@link blankCopy}) the shards start at zeros and the initializer and
   * slotVariableCreationFn are not called.
   * @throws InvalidArgumentError when the initializer or slotVariableCreationFn returns bad values
   */
  constructor(setup: TableSetup, hosts: number, backend: EmbeddingBackend, blankOf: ShardedTable | null = null) {
    const { config, optimizer } = setup;
    this.#backend = backend;
    this.name = setup.name;
    this.config = config;
    this.optimizer = optimizer;
    this.vocabularySize = config.vocabularySize;
    this.dim = config.dim;
    this.hosts = hosts;
    const dim = this.dim;
    const vocab = this.vocabularySize;
    const spec: InitializerSpec = blankOf
      ? { kind: 'zeros' }
      : isInitializerSpec(config.initializer)
        ? config.initializer
        : initializers.fromFunction(config.initializer as (shape: [number, number]) => Float32Array);
    const init = resolveInitializer(spec, dim, vocab, `initializer of table "${this.name}"`);
    this.#initializer = blankOf ? blankOf.#initializer : init.kind === 'array' ? { kind: 'array', values: new Float32Array(0) } : init;
    const stream = fnv1a32(this.name);
    const ranges = shardRanges(vocab, hosts);
    const slotSetup = blankOf ? null : this.#slotSetup();
    this.keyDtype = vocab <= INT32_MAX ? 'int32' : 'int64';
    const shards: Shard[] = [];
    try {
      for (const [s, r] of ranges.entries()) {
        let shardInit: InitializerSpec = init;
        if (init.kind === 'array') shardInit = { kind: 'array', values: init.values.subarray(r.start * dim, (r.start + r.size) * dim) };
        else if (RANDOM_KINDS.has(init.kind) && ranges.length > 1) {
          const values = new Float32Array(r.size * dim);
          for (let i = 0; i < r.size; i++) initialRow(init, 0, stream, r.start + i, dim, values, i * dim);
          shardInit = { kind: 'array', values };
        }
        const keyDtype = this.keyDtype;
        const table = createTable(
          {
            kind: 'static',
            dim,
            name: ranges.length === 1 ? this.name : `${this.name}/shard_${s}_of_${ranges.length}`,
            keyDtype,
            vocabularySize: r.size,
            initializer: shardInit,
            optimizer: optimizer?.spec,
            slotInitialValues: slotSetup?.initial,
            stream,
          },
          { backend },
        );
        shards.push({ ...r, table, keyDtype, plan: ranges.length === 1 ? null : { placement: 'range', start: r.start, end: r.start + r.size } });
        if (slotSetup?.arrays) this.#importSlots(shards[shards.length - 1]!, slotSetup.arrays);
      }
    } catch (e) {
      for (const s of shards) s.table.dispose();
      throw e;
    }
    this.shards = shards;
  }

  /**
   * A new table of the same name, shape, sharding, optimizer and backend whose rows and
   * slots are zeros, to be filled whole (restore loads a checkpoint into it, then it
   * replaces this one). Its checkpoint view describes this table's initializer.
   */
  blankCopy(): ShardedTable {
    return new ShardedTable({ name: this.name, config: this.config, optimizer: this.optimizer }, this.hosts, this.#backend, this);
  }

  /** Evaluates the optimizer's slotVariableCreationFn: constants -> slotInitialValues, arrays -> loaded after creation. */
  #slotSetup(): { initial: number[]; arrays: (Float32Array | null)[] | null } | null {
    const opt = this.optimizer;
    const fn = opt?.slotVariableCreationFn;
    if (!opt || !fn) return null;
    const names = opt.slotNames;
    const argument = `slotVariableCreationFn(${this.name})`;
    const out = fn({ name: this.name, vocabularySize: this.vocabularySize, dim: this.dim, config: this.config }, names, opt.slotInitialValues);
    if (typeof out !== 'object' || out === null) throw invalidParameter(argument, `an object with the slots [${names.join(', ')}]`, out);
    const extra = Object.keys(out).filter((k) => !names.includes(k));
    if (extra.length > 0) throw invalidParameter(argument, `an object with only the slots [${names.join(', ')}]`, `key "${extra[0]}"`);
    const n = this.vocabularySize * this.dim;
    const initial: number[] = [];
    const arrays: (Float32Array | null)[] = [];
    for (const [i, name] of names.entries()) {
      const v: SlotValue | undefined = out[name];
      const at = `${argument}.${name}`;
      if (typeof v === 'number') {
        if (!Number.isFinite(v)) throw invalidParameter(at, 'a finite number or the slot table', v);
        initial.push(v);
        arrays.push(null);
        continue;
      }
      let data: Float32Array | null = null;
      if (v instanceof Tensor) {
        if (v.data instanceof Float32Array && v.shape.length === 2 && v.shape[0] === this.vocabularySize && v.shape[1] === this.dim) data = v.data;
      } else if (v instanceof Float32Array) data = v;
      else if (Array.isArray(v) && v.every((x) => typeof x === 'number')) data = Float32Array.from(v);
      if (!data || data.length !== n) {
        throw invalidParameter(at, `a finite number or ${n} floats ([${this.vocabularySize}, ${this.dim}])`, v);
      }
      initial.push(opt.slotInitialValues[i]!);
      arrays.push(data);
    }
    return { initial, arrays: arrays.some((a) => a !== null) ? arrays : null };
  }

  #importSlots(shard: Shard, arrays: (Float32Array | null)[]): void {
    const dim = this.dim;
    const b = shard.table.exportSync();
    const slots = arrays.map((a, i) => {
      if (!a) return b.slots[i]!;
      const out = new Float32Array(b.keys.length * dim);
      for (let j = 0; j < b.keys.length; j++) {
        const row = shard.start + Number(b.keys[j]);
        out.set(a.subarray(row * dim, (row + 1) * dim), j * dim);
      }
      return out;
    });
    shard.table.importRowsSync(b.keys, b.values, slots);
  }

  /** Groups entry positions by shard (order kept); a single shard takes everything. */
  #partition(ids: ArrayLike<number>, from: number, to: number): Part[] {
    if (to === from) return [];
    if (this.shards.length === 1) {
      const positions = new Int32Array(to - from);
      for (let i = 0; i < positions.length; i++) positions[i] = from + i;
      return [{ shard: this.shards[0]!, positions }];
    }
    const which = new Int32Array(to - from);
    const counts = new Int32Array(this.shards.length);
    for (let j = from; j < to; j++) counts[(which[j - from] = shardOf(ids[j]!, this.vocabularySize, this.hosts))]!++;
    const parts = this.shards.map((shard, s) => ({ shard, positions: new Int32Array(counts[s]!) }));
    const fill = new Int32Array(this.shards.length);
    for (let j = from; j < to; j++) {
      const s = which[j - from]!;
      parts[s]!.positions[fill[s]!++] = j;
    }
    return parts.filter((p) => p.positions.length > 0);
  }

  /**
   * The rows of `keys` (global row ids, validated) into `out` [keys.length * dim]
   * (null: the backend's own result on one shard, else a fresh array): one `find`
   * with the caller's arrays on the only shard; with several shards, each shard
   * writes the rows it owns (a 'range' shard plan), concurrently.
   */
  async gather(keys: Keys, out: Float32Array | null): Promise<Float32Array> {
    if (this.shards.length === 1 && this.shards[0]!.plan === null) return (await this.shards[0]!.table.find(keys, out ? { out: { values: out } } : undefined)).values;
    const values = out ?? new Float32Array(keys.length * this.dim);
    const exists = new Uint8Array(keys.length);
    await Promise.all(this.shards.map((s) => s.table.find(keys, { out: { values, exists }, plan: s.plan })));
    return values;
  }

  /**
   * The embedding bag of `bag` with `combiner` into `out` [nrows * dim] (core's
   * lookupCombined, in the backend's native code; null: the backend's own result on
   * one shard, else a fresh array). With several shards, each adds its part (its
   * rows, over the whole row's denominator) to one float64 sum, in shard order,
   * rounded to float32 once: the same bits as one shard whenever the float64 sums
   * are exact (so results do not depend on numHosts; otherwise within float64 rounding).
   */
  async pool(bag: Bag<Keys>, combiner: Combiner, out: Float32Array | null): Promise<Float32Array> {
    if (this.shards.length === 1) return this.shards[0]!.table.lookupCombined(bag, { combiner, out });
    const sum = new Float64Array((bag.rowSplits.length - 1) * this.dim);
    for (const s of this.shards) await s.table.lookupCombinedPartial(bag, { combiner, plan: s.plan!, out: sum });
    const r = out ?? new Float32Array(sum.length);
    r.set(sum);
    return r;
  }

  /**
   * One fused optimizer step from pooled gradients `grads` [nrows * dim] of `bag`:
   * core's applyCombinedGradients on every shard (each updates the rows it owns by
   * their per-entry gradients w_j / denom_r * g_r, duplicates summed), concurrently.
   * `done[s]` (one flag per shard) marks the shards that already took this step: they
   * are skipped, and each shard whose call succeeds is marked, so a step that failed on
   * some shards can be completed by calling again without updating any shard twice.
   * Every shard's call settles before a failure is thrown (the first one).
   */
  async train(bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, spec: OptimizerSpec, step: number, done: boolean[]): Promise<void> {
    await settleAll(
      this.shards.map(async (s, i) => {
        if (done[i]) return;
        await s.table.applyCombinedGradients(bag, grads, spec, step, { combiner, plan: s.plan });
        done[i] = true;
      }),
    );
  }

  /** {@link train} through the backend's synchronous operations (stops at the first failure). */
  trainSync(bag: Bag<Keys>, grads: Float32Array, combiner: Combiner, spec: OptimizerSpec, step: number, done: boolean[]): void {
    this.shards.forEach((s, i) => {
      if (done[i]) return;
      s.table.applyCombinedGradientsSync(bag, grads, spec, step, { combiner, plan: s.plan });
      done[i] = true;
    });
  }

  /** Every row id of the table, [vocabularySize] (non-lazy Adam updates every row each step). */
  allRows(): Keys {
    if (this.#allRows) return this.#allRows;
    this.#allRows = makeKeys(this.keyDtype, this.vocabularySize, (i) => i);
    return this.#allRows;
  }

  /** The whole table's parameters, [vocabularySize * dim] row-major (a fresh copy). Needs a sync backend. */
  snapshotSync(): Float32Array {
    const dim = this.dim;
    const out = new Float32Array(this.vocabularySize * dim);
    for (const s of this.shards) {
      const b = s.table.exportSync();
      for (let j = 0; j < b.keys.length; j++) out.set(b.values.subarray(j * dim, (j + 1) * dim), (s.start + Number(b.keys[j])) * dim);
    }
    return out;
  }

  /**
   * The logical, unsharded table as a core `EmbeddingTable` for core's checkpoint
   * functions (`saveTable`/`loadTable`): int64 global row keys; export concatenates
   * the shards; importRows routes rows to their shards; clear resets every shard.
   * Other operations are unsupported. The checkpoint therefore never depends on
   * the number of hosts.
   */
  checkpointView(): EmbeddingTable {
    if (this.#view) return this.#view;
    const first = this.shards[0]!.table.options;
    const options: ResolvedTableOptions = {
      kind: 'static',
      dim: this.dim,
      name: this.name,
      keyDtype: 'int64',
      vocabularySize: this.vocabularySize,
      initCapacity: 0,
      maxCapacity: Infinity,
      initializer: this.#initializer,
      slots: first.slots,
      scorePolicy: first.scorePolicy,
      storageDtype: first.storageDtype,
      seed: first.seed,
      stream: first.stream,
    };
    const unsupported = (op: string) => () =>
      Promise.reject(new UnsupportedError(`${op} is not supported on the checkpoint view of table "${this.name}"`));
    const raw: RawTable = {
      sync: null,
      async: {
        find: unsupported('find'),
        findOrInsert: unsupported('findOrInsert'),
        upsert: unsupported('upsert'),
        assign: unsupported('assign'),
        accum: unsupported('accum'),
        remove: unsupported('remove'),
        restrict: unsupported('restrict'),
        lookupCombined: unsupported('lookupCombined'),
        lookupCombinedPartial: unsupported('lookupCombinedPartial'),
        lookupCombinedBackward: unsupported('lookupCombinedBackward'),
        applyCombinedGradients: unsupported('applyCombinedGradients'),
        applyGradients: unsupported('applyGradients'),
        clear: async () => {
          await Promise.all(this.shards.map((s) => s.table.clear()));
        },
        exportBatch: (offset, limit) => this.#exportBatch(offset, limit),
        importRows: (keys, values, slots) => this.#importRows(keys, values, slots),
      },
      size: () => this.vocabularySize,
      capacity: () => this.vocabularySize,
      memoryUsage: () => this.shards.reduce((a, s) => a + s.table.memoryUsage(), 0),
      setEpoch: () => undefined,
      dispose: () => undefined,
    };
    this.#view = new EmbeddingTable(raw, options, this.shards[0]!.table.backendName);
    return this.#view;
  }

  async #exportBatch(offset: number, limit: number): Promise<ExportBatch> {
    const dim = this.dim;
    const widths = this.shards[0]!.table.slotWidths;
    const parts: ExportBatch[] = [];
    const starts: number[] = [];
    let at = 0;
    for (const s of this.shards) {
      const lo = Math.max(offset, at);
      const hi = Math.min(offset + limit, at + s.size);
      if (lo < hi) {
        parts.push(await s.table.export({ offset: lo - at, limit: hi - lo }));
        starts.push(s.start);
      }
      at += s.size;
    }
    const n = parts.reduce((a, p) => a + p.keys.length, 0);
    const out: ExportBatch = {
      keys: new BigInt64Array(n),
      values: new Float32Array(n * dim),
      slots: widths.map((w) => new Float32Array(n * w)),
      scores: new BigUint64Array(n),
    };
    let o = 0;
    parts.forEach((p, i) => {
      for (let j = 0; j < p.keys.length; j++) (out.keys as BigInt64Array)[o + j] = BigInt(starts[i]! + Number(p.keys[j]));
      out.values.set(p.values, o * dim);
      p.slots.forEach((s, k) => out.slots[k]!.set(s, o * widths[k]!));
      o += p.keys.length;
    });
    return out;
  }

  async #importRows(keys: Keys, values: Float32Array, slots: Float32Array[] | null): Promise<void> {
    const dim = this.dim;
    const ids = Float64Array.from(keys as ArrayLike<number | bigint>, Number);
    const widths = this.shards[0]!.table.slotWidths;
    await Promise.all(
      this.#partition(ids, 0, ids.length).map((p) => {
        const n = p.positions.length;
        const gather = (src: Float32Array, w: number): Float32Array => {
          const out = new Float32Array(n * w);
          for (let i = 0; i < n; i++) out.set(src.subarray(p.positions[i]! * w, (p.positions[i]! + 1) * w), i * w);
          return out;
        };
        const k = localKeys(ids, p.positions, n, p.shard.start, p.shard.keyDtype);
        return p.shard.table.importRows(k, gather(values, dim), slots ? slots.map((s, i) => gather(s, widths[i]!)) : null);
      }),
    );
  }

  /** Frees every shard. Idempotent. */
  dispose(): void {
    for (const s of this.shards) s.table.dispose();
  }
}
