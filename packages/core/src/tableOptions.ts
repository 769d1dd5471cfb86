import type { KeyDtype } from './dtypes.js';
import { InvalidArgumentError, InvalidTypeError, invalidParameter } from './errors.js';
import { type InitializerSpec, type ResolvedInitializer, resolveInitializer } from './initializers.js';
import { isOptimizerSpec, type OptimizerSpec, type SlotLayout } from './optimizers.js';
import { fnv1a32 } from './random.js';
import { type ScorePolicy, validateScorePolicy } from './scores.js';
import { checkStorageDtype, type StorageDtype } from './storageDtype.js';
import { checkInteger, errorClassFor } from './validation.js';

/**
 * The one options type of a table. Every field, its unit and default; defaults
 * are resolved in {@link resolveTableOptions} and nowhere else.
 */
export interface TableOptions {
  /** 'dynamic' (hash table, default) or 'static' (rows 0..vocabularySize-1). */
  kind?: 'dynamic' | 'static';
  /** Floats per row. Required, an integer in [1, 2^20]. */
  dim: number;
  /** Name, for messages, checkpoints and the initializer stream. Default 'table'. */
  name?: string;
  /** Key type. Default 'int64'. Static tables take row indices of either type. */
  keyDtype?: KeyDtype;
  /** Static only: number of rows, integer >= 1. Required for static tables. */
  vocabularySize?: number;
  /** Dynamic only: rows reserved up front. Default 1024. The table doubles as it grows. */
  initCapacity?: number;
  /** Dynamic only: hard cap on rows; when reached, inserts evict by score. Default Infinity. */
  maxCapacity?: number;
  /** Initial value of new rows. Default zeros. */
  initializer?: InitializerSpec;
  /** Optimizer whose slots live beside each row. Default none (no slots; SGD needs none). */
  optimizer?: OptimizerSpec;
  /** Override the slots' initial values (TPU's slotVariableCreationFn). Length = slot count. */
  slotInitialValues?: readonly number[];
  /** Score policy of a dynamic table. Default 'lru'. */
  scorePolicy?: ScorePolicy;
  /** Seed of the random initializers, uint32. Default 0. */
  seed?: number;
  /** Initializer stream id, uint32. Default: FNV-1a 32 of `name`, so shards of one table agree. */
  stream?: number;
  /**
   * How values are stored: 'float32' (default, 4 bytes per value), 'bfloat16' or 'float16' (2 bytes).
   * Values are computed and returned as float32; every stored value is rounded to the storage type
   * (to nearest, ties to even); optimizer slots stay float32. See {@link StorageDtype}. A backend
   * that cannot store a dtype (see `capabilities().storageDtypes`) rejects the table with UNSUPPORTED.
   */
  storageDtype?: StorageDtype;
}

/** Fully resolved options: what a backend receives. Plain data only. */
export interface ResolvedTableOptions {
  /** 'dynamic' (hash table) or 'static' (rows 0..vocabularySize-1). */
  kind: 'dynamic' | 'static';
  /** Floats per row, >= 1. */
  dim: number;
  /** The table's name (default 'table'). */
  name: string;
  /** Key type. */
  keyDtype: KeyDtype;
  /** static: vocabularySize; dynamic: 0 */
  vocabularySize: number;
  /** dynamic: rows reserved up front (default 1024, at most maxCapacity); static: 0 */
  initCapacity: number;
  /** Infinity when uncapped */
  maxCapacity: number;
  /** Initializer of new rows (`function` ones already evaluated to `array`). */
  initializer: ResolvedInitializer;
  /** Optimizer slots beside each row (empty without an optimizer), with slotInitialValues applied. */
  slots: SlotLayout;
  /** Score policy. */
  scorePolicy: ScorePolicy;
  /** Seed of the random initializers, uint32. */
  seed: number;
  /** Initializer stream id, uint32. */
  stream: number;
  /** How values are stored ('float32' unless asked). */
  storageDtype: StorageDtype;
}

const KNOWN = new Set([
  'kind',
  'dim',
  'name',
  'keyDtype',
  'vocabularySize',
  'initCapacity',
  'maxCapacity',
  'initializer',
  'optimizer',
  'slotInitialValues',
  'scorePolicy',
  'seed',
  'stream',
  'storageDtype',
]);

const posInt = (value: unknown, argument: string): number => checkInteger(value, argument, { min: 1 });

/** The widest row a table takes (2^20 floats, as the CPU and CUDA addons and caches). */
const MAX_DIM = 1 << 20;

function uint32(value: unknown, argument: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw invalidParameter(argument, 'an integer in [0, 2^32)', value, errorClassFor(value, 'number'));
  }
  return value;
}

/**
 * Every option checked, defaults filled in; an option set to null is omitted (its default).
 * @throws InvalidArgumentError / InvalidTypeError naming the option
 */
export function resolveTableOptions(options: TableOptions): ResolvedTableOptions {
  if (typeof options !== 'object' || options === null) {
    throw invalidParameter('options', 'a TableOptions object', options, InvalidTypeError);
  }
  for (const k of Object.keys(options)) {
    if (!KNOWN.has(k)) throw invalidParameter(`options.${k}`, `one of the known options (${[...KNOWN].join(', ')})`, k);
  }
  const kind = options.kind ?? 'dynamic';
  if (kind !== 'dynamic' && kind !== 'static') throw invalidParameter('kind', "'dynamic' or 'static'", kind, errorClassFor(kind, 'string'));
  const dim = checkInteger(options.dim, 'dim', { min: 1, max: MAX_DIM });
  const name = options.name ?? 'table';
  if (typeof name !== 'string' || name.length === 0) throw invalidParameter('name', 'a non-empty string', name, errorClassFor(name, 'string'));
  const keyDtype = options.keyDtype ?? 'int64';
  if (keyDtype !== 'int64' && keyDtype !== 'int32') throw invalidParameter('keyDtype', "'int64' or 'int32'", keyDtype, errorClassFor(keyDtype, 'string'));
  let vocabularySize = 0;
  let initCapacity = 0;
  let maxCapacity = Infinity;
  if (kind === 'static') {
    vocabularySize = posInt(options.vocabularySize, 'vocabularySize');
    if (options.initCapacity != null || options.maxCapacity != null) {
      throw invalidParameter('initCapacity/maxCapacity', 'unset for a static table', options.initCapacity ?? options.maxCapacity);
    }
  } else {
    if (options.vocabularySize != null) throw invalidParameter('vocabularySize', 'unset for a dynamic table', options.vocabularySize);
    initCapacity = options.initCapacity == null ? 1024 : posInt(options.initCapacity, 'initCapacity');
    if (options.maxCapacity != null && options.maxCapacity !== Infinity) {
      maxCapacity = posInt(options.maxCapacity, 'maxCapacity');
      if (initCapacity > maxCapacity) initCapacity = maxCapacity;
    }
  }
  const initializer = resolveInitializer(options.initializer ?? undefined, dim, kind === 'static' ? vocabularySize : undefined);
  if (options.optimizer != null && !isOptimizerSpec(options.optimizer)) {
    throw invalidParameter('optimizer', 'an optimizer spec (see `optimizers`)', options.optimizer, InvalidTypeError);
  }
  let slots: SlotLayout = options.optimizer?.slots ?? { names: [], widths: [], initial: [] };
  if (options.slotInitialValues != null) {
    const v = options.slotInitialValues;
    const wrongType = !Array.isArray(v) || v.some((x) => typeof x !== 'number');
    if (wrongType || v.length !== slots.names.length || v.some((x) => !Number.isFinite(x))) {
      throw invalidParameter('slotInitialValues', `${slots.names.length} finite numbers`, v, wrongType ? InvalidTypeError : InvalidArgumentError);
    }
    slots = { ...slots, initial: v.slice() };
  }
  const scorePolicy = validateScorePolicy(options.scorePolicy ?? 'lru');
  const seed = options.seed == null ? 0 : uint32(options.seed, 'seed');
  const stream = options.stream == null ? fnv1a32(name) : uint32(options.stream, 'stream');
  const storageDtype = options.storageDtype == null ? 'float32' : checkStorageDtype(options.storageDtype);
  return { kind, dim, name, keyDtype, vocabularySize, initCapacity, maxCapacity, initializer, slots, scorePolicy, seed, stream, storageDtype };
}
