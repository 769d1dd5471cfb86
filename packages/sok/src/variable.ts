import {
  createTable,
  DisposedError,
  EmbeddingTable,
  FailedPreconditionError,
  fnv1a32,
  initialRow,
  InvalidTypeError,
  invalidParameter,
  isOptimizerSpec,
  type KeyDtype,
  type OptimizerSpec,
  resolveInitializer,
  sameSlotLayout,
  type ShardPlan,
  type SlotLayout,
  type TableOptions,
} from '@embedstack/core';
import { context, nextScore, type SokContext } from './context.js';

/** `'distributed'` (rows/keys spread over every device) or `'localized:k'` (the whole table on device k). */
export type VariableMode = 'distributed' | `localized:${number}`;

/** One device's part of a variable: its core table and its shard plan (null when it is the only table and needs none). */
export interface DeviceShard {
  readonly device: number;
  table: EmbeddingTable;
  readonly plan: ShardPlan | null;
}

const NO_SLOTS: SlotLayout = { names: [], widths: [], initial: [] };
const names = new Map<string, number>();

/**
 * The next default name of `base` in this process (`DynamicVariable`, `DynamicVariable_1`, ...), not
 * taken yet: a constructor takes it with {@link takeDefaultName} once it has succeeded, so that a
 * rejected one, or one given a name, uses up no default name (the name also seeds the initial values).
 */
export function defaultName(base: string): string {
  const n = names.get(base) ?? 0;
  return n === 0 ? base : `${base}_${n}`;
}

/** Takes `base`'s next default name (see {@link defaultName}). */
export function takeDefaultName(base: string): void {
  names.set(base, (names.get(base) ?? 0) + 1);
}

/**
 * What every SOK variable shares: the tables on the devices of one `sok.init`, their
 * shard plans, and the optimizer slots stored beside the rows. Placement:
 * dynamic key k on device floorMod(k, N); static global row i on device i mod N at
 * local row floor(i / N); `localized:k` the whole table on device k.
 */
export abstract class SokVariable {
  /** Prefix of the dump files. */
  readonly name: string;
  /** Floats per row. */
  readonly dimension: number;
  /** Key type of the tables ('int64' or 'int32'). */
  readonly keyDtype: KeyDtype;
  /** Placement: 'distributed' or 'localized:k'. */
  readonly mode: VariableMode;
  /** @internal */
  readonly ctx: SokContext;
  /** @internal the devices holding a table, in device order */
  shards: DeviceShard[];
  #slots: SlotLayout = NO_SLOTS;
  /** The optimizer spec whose slots the tables hold (undefined: none). */
  #spec: OptimizerSpec | undefined = undefined;
  /** @internal the optimizer whose slots the tables hold */
  boundOptimizer: string | null = null;

  protected constructor(name: string, dimension: number, keyDtype: KeyDtype, mode: VariableMode) {
    this.ctx = context();
    this.name = name;
    this.dimension = dimension;
    this.keyDtype = keyDtype;
    this.mode = mode;
    this.shards = [];
  }

  /** Same as `dimension` (the project's `variable.dim`). */
  get dim(): number {
    return this.dimension;
  }

  /** 'dynamic' ({@link DynamicVariable}) or 'static' ({@link Variable}). */
  abstract get kind(): 'dynamic' | 'static';

  /** @internal Global rows of a static {@link Variable} (its `rows`); null for a {@link DynamicVariable}. */
  abstract get staticRows(): number | null;

  /** @internal True when the device tables score rows by the facade's clock (epochLru). */
  get scoredByClock(): boolean {
    return false;
  }

  /** @internal Table options of device `device` (slots given by `optimizer`). */
  protected abstract tableOptions(device: number, optimizer: OptimizerSpec | undefined): TableOptions;

  /** @internal The devices and plans this variable uses. */
  protected devicePlans(): { device: number; plan: ShardPlan | null }[] {
    const n = this.ctx.numDevices;
    const local = /^localized:(\d+)$/.exec(this.mode);
    if (local) return [{ device: Number(local[1]), plan: null }];
    if (n === 1) return [{ device: 0, plan: null }];
    return Array.from({ length: n }, (_, d) => ({ device: d, plan: { placement: 'mod' as const, numShards: n, shard: d } }));
  }

  /** @internal Creates the device tables (called once by the subclass constructor). */
  protected createShards(): void {
    const shards: DeviceShard[] = [];
    try {
      for (const { device, plan } of this.devicePlans()) {
        const opts = this.tableOptions(device, undefined);
        if (opts.kind === 'static' && (opts.vocabularySize ?? 0) === 0) continue;
        shards.push({ device, plan, table: createTable(opts, { backend: this.ctx.backend }) });
      }
    } catch (e) {
      for (const s of shards) s.table.dispose();
      throw e;
    }
    this.shards = shards;
  }

  /** @internal Whether {@link checkUsable} passes (a loop, no closure: the lookups' fast path). */
  usable(): boolean {
    if (!this.ctx.live) return false;
    const s = this.shards;
    for (let i = 0; i < s.length; i++) if (s[i]!.table.disposed) return false;
    return true;
  }

  /** @internal @throws DisposedError after dispose() (as every package's disposed objects); FailedPreconditionError after `sok.shutdown()` */
  checkUsable(): void {
    if (this.shards.some((s) => s.table.disposed)) throw new DisposedError(`Variable "${this.name}" was disposed`);
    if (!this.ctx.live) throw new FailedPreconditionError(`Variable "${this.name}" was created under a sok.init that was shut down; create it again after sok.init`);
  }

  /** The slot layout the tables hold (none until an optimizer with slots is applied). */
  get slotLayout(): SlotLayout {
    return this.#slots;
  }

  /**
   * @internal Gives the tables the slots of `spec` (rows and scores kept, slots at their
   * initial values), once: a variable trained by one optimizer keeps its slots.
   * @throws FailedPreconditionError when the tables already hold another optimizer's slots
   */
  checkSlots(spec: OptimizerSpec, optimizerName: string): boolean {
    if (!isOptimizerSpec(spec)) throw invalidParameter('spec', 'a core optimizer spec', spec, InvalidTypeError);
    if (typeof optimizerName !== 'string') throw invalidParameter('optimizerName', 'a string', optimizerName, InvalidTypeError);
    if (sameSlotLayout(spec.slots, this.#slots)) return false;
    if (this.#slots.names.length > 0) {
      throw new FailedPreconditionError(
        `Variable "${this.name}" holds the slots of optimizer ${this.boundOptimizer} [${this.#slots.names.join(', ')}]; it cannot be trained by ${optimizerName} [${spec.slots.names.join(', ')}]`,
      );
    }
    return true;
  }

  /** @internal Rebuilds the device tables with the slots of `spec` (see {@link checkSlots}). */
  async bindSlots(spec: OptimizerSpec, optimizerName: string): Promise<void> {
    if (!this.checkSlots(spec, optimizerName)) return;
    this.adoptTables(await this.freshTables(spec, 'rows'), spec, optimizerName);
  }

  /**
   * @internal New device tables (one per shard, in shard order) holding the slots of
   * `spec` (null: the slots the tables hold now): empty (`'none'`), or a copy of the
   * current rows (`'rows'`: values, and scores of a dynamic variable; slots at their
   * initial values) or also of their slots (`'rowsAndSlots'`, same layout only). The
   * caller owns them: it passes them to {@link adoptTables} or disposes them.
   */
  async freshTables(spec: OptimizerSpec | null, copy: 'none' | 'rows' | 'rowsAndSlots'): Promise<EmbeddingTable[]> {
    if (spec !== null && !isOptimizerSpec(spec)) throw invalidParameter('spec', 'a core optimizer spec or null', spec, InvalidTypeError);
    if (copy !== 'none' && copy !== 'rows' && copy !== 'rowsAndSlots') throw invalidParameter('copy', "'none', 'rows' or 'rowsAndSlots'", copy);
    this.checkUsable();
    const target = spec ?? this.#spec;
    const fresh: EmbeddingTable[] = [];
    try {
      for (const s of this.shards) {
        const t = createTable(this.tableOptions(s.device, target), { backend: this.ctx.backend });
        fresh.push(t);
        if (copy === 'none') continue;
        for await (const b of s.table.exportBatches()) {
          await t.importRows(b.keys, b.values, copy === 'rowsAndSlots' ? b.slots : null, this.kind === 'dynamic' ? b.scores : null);
        }
      }
    } catch (e) {
      for (const t of fresh) t.dispose();
      throw e;
    }
    return fresh;
  }

  /**
   * @internal Swaps in tables from {@link freshTables} (synchronous; the current ones are
   * disposed) and, when `spec` brings other slots than the tables held, binds them.
   */
  adoptTables(fresh: EmbeddingTable[], spec: OptimizerSpec | null, optimizerName: string | null): void {
    if (!Array.isArray(fresh) || fresh.length !== this.shards.length || !fresh.every((t) => t instanceof EmbeddingTable && !t.disposed)) {
      throw invalidParameter('fresh', `${this.shards.length} live tables from freshTables`, fresh, InvalidTypeError);
    }
    if (spec !== null && !isOptimizerSpec(spec)) throw invalidParameter('spec', 'a core optimizer spec or null', spec, InvalidTypeError);
    if (optimizerName !== null && typeof optimizerName !== 'string') throw invalidParameter('optimizerName', 'a string or null', optimizerName, InvalidTypeError);
    this.shards.forEach((s, i) => {
      s.table.dispose();
      s.table = fresh[i]!;
    });
    if (spec && optimizerName !== null && !sameSlotLayout(spec.slots, this.#slots)) {
      this.#slots = spec.slots;
      this.#spec = spec;
      this.boundOptimizer = optimizerName;
    }
  }

  /** Rows held over every device (a static variable: its row count). */
  async size(): Promise<number> {
    this.checkUsable();
    return this.shards.reduce((n, s) => n + s.table.size(), 0);
  }

  /** Frees every device's table. Idempotent. */
  dispose(): void {
    for (const s of this.shards) s.table.dispose();
  }

  /** Same as `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** The initial rows of the global rows a static device table holds, drawn per global row (so any N gives the same values). */
export function staticDeviceInitializer(
  spec: TableOptions['initializer'],
  name: string,
  rows: number,
  dim: number,
  device: number,
  numShards: number,
): TableOptions['initializer'] {
  const init = resolveInitializer(spec, dim, rows, 'initializer');
  if (numShards === 1) return init;
  const local = Math.max(0, Math.ceil((rows - device) / numShards));
  if (init.kind === 'zeros' || init.kind === 'ones' || init.kind === 'constant' || init.kind === 'row') return init;
  const values = new Float32Array(local * dim);
  if (init.kind === 'array') {
    for (let l = 0; l < local; l++) values.set(init.values.subarray((l * numShards + device) * dim, (l * numShards + device + 1) * dim), l * dim);
  } else {
    const stream = fnv1a32(name);
    for (let l = 0; l < local; l++) initialRow(init, 0, stream, l * numShards + device, dim, values, l * dim);
  }
  return { kind: 'array', values };
}

/**
 * Starts a call touching rows of `vars`: advances the score clock and gives its value
 * to the device tables scoring by it (core 'epochLru': score = clock * 2^32 + the
 * table's own counter), so the rows a call touches score alike on every device.
 */
export function stamp(vars: Iterable<SokVariable>): void {
  let epoch = -1;
  for (const v of vars) {
    if (!v.scoredByClock) continue;
    if (epoch < 0) epoch = nextScore(v.ctx);
    for (const s of v.shards) s.table.setEpoch(epoch);
  }
}
