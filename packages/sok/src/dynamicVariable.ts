import {
  checkInteger,
  checkName,
  checkNumber,
  checkOptions,
  fnv1a32,
  type InitializerSpec,
  invalidParameter,
  InvalidTypeError,
  type OptimizerSpec,
  type TableOptions,
} from '@embedstack/core';
import { type InitializerName, resolveSokInitializer } from './initializer.js';
import { checkMode } from './mode.js';
import { defaultName, SokVariable, takeDefaultName, type VariableMode } from './variable.js';

/** `new sok.DynamicVariable(options)`. Defaults in brackets. */
export interface DynamicVariableOptions {
  /** Floats per row. Required, integer >= 1. */
  dimension: number;
  /** 'random' | 'normal' | 'uniform' | 'zeros' | 'ones' | a float string such as '13' ['random']; see resolveSokInitializer. */
  initializer?: InitializerName | InitializerSpec;
  /** 'hbm': an uncapped table growing by doubling; 'hybrid': capped at maxCapacity, evicting by score ['hbm']. Both are host memory on the CPU backend. */
  varType?: 'hbm' | 'hybrid';
  /** Key type: 'int64' keys are BigInt64Array, 'int32' keys Int32Array ['int64']. */
  keyType?: 'int64' | 'int32';
  /** Value type; only 'float32' ['float32']. */
  dtype?: 'float32';
  /** Rows reserved up front over all devices (each device ceil(initCapacity / N)) [1024 per device]. */
  initCapacity?: number;
  /** 'hybrid' only, required there: the most rows over all devices (each device floor(maxCapacity / N), at least 1). */
  maxCapacity?: number;
  /** 'hybrid' only (refused on 'hbm'): which rows a full table evicts. 'lru': the least recently used; 'customized': the lowest caller score (sok.assign's `scores`) ['lru']. */
  evictStrategy?: 'lru' | 'customized';
  /**
   * 'hybrid' only (refused on 'hbm'): after a training lookup fills a device table to its cap, the lowest-score
   * rows are evicted down to filterRatio * cap (core `restrict`), making room for the
   * next batch's new keys in one eviction. 1 = evict only as needed. In (0, 1] [1].
   */
  filterRatio?: number;
  /** Prefix of the dump files and stream of the random initializer [unique per process: 'DynamicVariable', 'DynamicVariable_1', ...]. */
  name?: string;
  /** 'distributed' (key k on device floorMod(k, N)) or 'localized:k' (every key on device k) ['distributed']. */
  mode?: VariableMode;
}

const KNOWN = ['dimension', 'initializer', 'varType', 'keyType', 'dtype', 'initCapacity', 'maxCapacity', 'evictStrategy', 'filterRatio', 'name', 'mode'];

/**
 * SOK v2's DynamicVariable: a hash table from int64 (or int32) keys to rows, split
 * over the devices of `sok.init` (one core dynamic table per device, host memory on
 * the CPU backend). Every key value is valid. `shape` is `[size, dimension]`.
 *
 * @throws FailedPreconditionError before sok.init; InvalidArgumentError / InvalidTypeError naming the option
 */
export class DynamicVariable extends SokVariable {
  /** 'hbm' (uncapped) or 'hybrid' (capped at maxCapacity). */
  readonly varType: 'hbm' | 'hybrid';
  /** Key type, as `keyType` in the options. */
  readonly keyType: 'int64' | 'int32';
  /** Value type: always 'float32'. */
  readonly dtype = 'float32' as const;
  /** 'hybrid': which rows a full table evicts ('lru' or 'customized'). */
  readonly evictStrategy: 'lru' | 'customized';
  /** Rows reserved up front over all devices; 0 when unset (each device then reserves the default). */
  readonly initCapacity: number;
  /** The most rows over all devices ('hybrid'); Infinity for 'hbm'. */
  readonly maxCapacity: number;
  /** 'hybrid': fraction of the cap kept after an eviction, in (0, 1]. */
  readonly filterRatio: number;
  /** The resolved initializer of new rows. */
  readonly initializer: InitializerSpec;

  constructor(options: DynamicVariableOptions) {
    const o = checkOptions<DynamicVariableOptions>(options, KNOWN, 'options', { required: true, expected: 'DynamicVariable options ({ dimension, ... })' });
    const dimension = checkInteger(o.dimension, 'dimension', { min: 1, max: 1 << 20 });
    const varType = o.varType ?? 'hbm';
    if (varType !== 'hbm' && varType !== 'hybrid') throw invalidParameter('varType', "'hbm' or 'hybrid'", varType);
    const keyType = o.keyType ?? 'int64';
    if (keyType !== 'int64' && keyType !== 'int32') throw invalidParameter('keyType', "'int64' or 'int32'", keyType, InvalidTypeError);
    if ((o.dtype ?? 'float32') !== 'float32') throw invalidParameter('dtype', "'float32'", o.dtype, InvalidTypeError);
    const evictStrategy = o.evictStrategy ?? 'lru';
    if (evictStrategy !== 'lru' && evictStrategy !== 'customized') throw invalidParameter('evictStrategy', "'lru' or 'customized'", evictStrategy);
    const initializer = resolveSokInitializer(o.initializer, dimension);
    const mode = checkMode(o.mode);
    const name = checkName(o.name, 'name', defaultName('DynamicVariable'));
    const initCapacity = checkInteger(o.initCapacity, 'initCapacity', { min: 1, fallback: 0 });
    let maxCapacity = Infinity;
    if (varType === 'hybrid') maxCapacity = checkInteger(o.maxCapacity, 'maxCapacity', { min: 1 });
    else {
      // The cap, its eviction policy and its trim ratio belong to 'hybrid' tables: refused on 'hbm' rather than ignored.
      for (const key of ['maxCapacity', 'evictStrategy', 'filterRatio'] as const) {
        if (o[key] !== undefined && o[key] !== null) throw invalidParameter(key, "unset for varType 'hbm' (uncapped: it applies to 'hybrid' tables); use varType 'hybrid'", o[key]);
      }
    }
    const filterRatio = checkNumber(o.filterRatio, 'filterRatio', { min: Number.MIN_VALUE, max: 1, fallback: 1 });
    super(name, dimension, keyType, mode);
    this.varType = varType;
    this.keyType = keyType;
    this.evictStrategy = evictStrategy;
    this.initCapacity = initCapacity;
    this.maxCapacity = maxCapacity;
    this.filterRatio = filterRatio;
    this.initializer = initializer;
    this.createShards();
    if (o.name === undefined || o.name === null) takeDefaultName('DynamicVariable');
  }

  /** Always 'dynamic'. */
  get kind(): 'dynamic' {
    return 'dynamic';
  }

  /** @internal Null: a dynamic variable has keys, not a fixed number of rows. */
  get staticRows(): null {
    return null;
  }

  override get scoredByClock(): boolean {
    return this.evictStrategy !== 'customized';
  }

  /** `[size, dimension]` (size: rows over every device now). */
  get shape(): [number, number] {
    this.checkUsable();
    return [this.shards.reduce((n, s) => n + s.table.size(), 0), this.dimension];
  }

  /** @internal the per-device row cap (Infinity for 'hbm') */
  get deviceCapacity(): number {
    return this.maxCapacity === Infinity ? Infinity : Math.max(1, Math.floor(this.maxCapacity / this.shards.length));
  }

  protected tableOptions(_device: number, optimizer: OptimizerSpec | undefined): TableOptions {
    const n = this.shards.length || this.devicePlans().length;
    const cap = this.maxCapacity === Infinity ? undefined : Math.max(1, Math.floor(this.maxCapacity / n));
    const init = this.initCapacity > 0 ? Math.ceil(this.initCapacity / n) : undefined;
    return {
      kind: 'dynamic',
      dim: this.dimension,
      name: this.name,
      keyDtype: this.keyType,
      initCapacity: init === undefined ? undefined : cap === undefined ? init : Math.min(init, cap),
      maxCapacity: cap,
      initializer: this.initializer,
      optimizer,
      // 'lru' by the facade's clock (the epoch, set by `stamp` before each call) so that scores agree across devices.
      scorePolicy: this.evictStrategy === 'customized' ? 'customized' : 'epochLru',
      stream: fnv1a32(this.name),
    };
  }
}
