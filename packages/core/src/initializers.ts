import { InvalidArgumentError, InvalidTypeError, invalidParameter } from './errors.js';
import { asTypedArray } from './typed.js';
import { errorClassFor, unknownKeys } from './validation.js';
import {
  keyWords,
  randomWord,
  standardNormal,
  TRUNCATION_ATTEMPTS,
  TRUNCATION_STDS,
  uniform01,
} from './random.js';

/**
 * How a new row gets its first value. Random kinds draw from the counter-based
 * generator in `random.ts`, keyed by (seed, table stream, key, column).
 * `array` and `function` are for static tables (the function is evaluated once by
 * core and handed to the backend as an `array`).
 */
export type InitializerSpec =
  | {
      /** Every value 0. */
      kind: 'zeros';
    }
  | {
      /** Every value 1. */
      kind: 'ones';
    }
  | {
      /** Every value `value`. */
      kind: 'constant';
      /** The value, finite. */
      value: number;
    }
  /** The same row for every key (TFRA's default value). length = dim. */
  | {
      /** The same row for every key. */
      kind: 'row';
      /** The row, [dim] floats. */
      values: Float32Array;
    }
  | {
      /** Uniform between min and max. */
      kind: 'uniform';
      /** Lower bound (inclusive). */
      min: number;
      /** Upper bound, >= min. */
      max: number;
    }
  | {
      /** Normal distribution. */
      kind: 'normal';
      /** Mean. */
      mean: number;
      /** Standard deviation, >= 0. */
      std: number;
    }
  | {
      /** Normal distribution truncated at 2 std (TF's truncated_normal). */
      kind: 'truncatedNormal';
      /** Mean. */
      mean: number;
      /** Standard deviation, >= 0. */
      std: number;
    }
  /** Static tables: the whole table, [vocabularySize * dim] row-major. */
  | {
      /** Static tables: one given value per element. */
      kind: 'array';
      /** The whole table, [vocabularySize * dim] row-major. */
      values: Float32Array;
    }
  /** Static tables: called once with [vocabularySize, dim]. */
  | {
      /** Static tables: values computed once by a function. */
      kind: 'function';
      /** Called once with [vocabularySize, dim]; returns vocabularySize * dim finite numbers, row-major. */
      fn: (shape: [number, number]) => Float32Array | ArrayLike<number>;
    };

/** What a backend receives: functions are already evaluated to arrays. */
export type ResolvedInitializer = Exclude<
  InitializerSpec,
  {
    /** `function` initializers are evaluated to `array` before a backend sees them. */
    kind: 'function';
  }
>;

function finite(value: unknown, argument: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalidParameter(argument, 'a finite number', value, errorClassFor(value, 'number'));
  return value;
}

/**
 * Finite numbers as a Float32Array: a copy of an array or typed array of numbers, or (copy
 * false) a real Float32Array itself. A plain array's holes are refused.
 */
function floats(values: unknown, argument: string, copy = true): Float32Array {
  const own = asTypedArray(values, Float32Array, argument);
  const list = own ?? asTypedArray(values, Float64Array, argument) ?? asTypedArray(values, Int32Array, argument) ?? (Array.isArray(values) ? values : undefined);
  const bad = list ? firstNonFinite(list as ArrayLike<unknown>) : 0;
  if (!list || bad >= 0) {
    // NaN / ±Infinity are numbers with a bad value; anything else (a string, a hole, not an array) is the wrong type
    const badNumber = list !== undefined && typeof list[bad] === 'number' && (!Array.isArray(list) || bad in list);
    throw invalidParameter(argument, 'an array of finite numbers', values, badNumber ? InvalidArgumentError : InvalidTypeError);
  }
  return own && !copy ? own : Float32Array.from(list as ArrayLike<number>);
}

/** Index of the first element that is not a finite number (or a hole), or -1. */
function firstNonFinite(list: ArrayLike<unknown>): number {
  for (let i = 0; i < list.length; i++) {
    const v = list[i];
    if (typeof v !== 'number' || !Number.isFinite(v) || (Array.isArray(list) && !(i in list))) return i;
  }
  return -1;
}

/** The fields of each kind's spec. */
const FIELDS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  zeros: ['kind'],
  ones: ['kind'],
  constant: ['kind', 'value'],
  row: ['kind', 'values'],
  array: ['kind', 'values'],
  uniform: ['kind', 'min', 'max'],
  normal: ['kind', 'mean', 'std'],
  truncatedNormal: ['kind', 'mean', 'std'],
  function: ['kind', 'fn'],
});

/**
 * A spec of `kind` with its fields checked, each error naming `at(field)`: what every builder
 * returns, and what resolveInitializer makes of a spec written as a plain object. Arrays are
 * copied when `copy` (a builder's), else a Float32Array is kept.
 */
function checkedSpec(spec: Record<string, unknown>, at: (field: string) => string, copy: boolean): InitializerSpec {
  switch (spec.kind) {
    case 'zeros':
    case 'ones':
      return { kind: spec.kind };
    case 'constant':
      return { kind: 'constant', value: finite(spec.value, at('value')) };
    case 'row':
    case 'array':
      return { kind: spec.kind, values: floats(spec.values, at('values'), copy) };
    case 'uniform': {
      const min = finite(spec.min, at('min'));
      const max = finite(spec.max, at('max'));
      if (!(min <= max)) throw invalidParameter(at('max'), `>= min (${min})`, max);
      return { kind: 'uniform', min, max };
    }
    case 'normal':
    case 'truncatedNormal': {
      const mean = finite(spec.mean, at('mean'));
      const std = finite(spec.std, at('std'));
      if (std < 0) throw invalidParameter(at('std'), 'a number >= 0', std);
      return { kind: spec.kind, mean, std };
    }
    case 'function':
      if (typeof spec.fn !== 'function') throw invalidParameter(at('fn'), 'a function', spec.fn, InvalidTypeError);
      return { kind: 'function', fn: spec.fn as (shape: [number, number]) => Float32Array | ArrayLike<number> };
    default:
      throw invalidParameter(at('kind'), 'a known initializer kind', spec.kind, InvalidTypeError);
  }
}

const asBuilt = (field: string): string => field;

/**
 * Builders of initializer specs (the `initializer` table option), each checking its arguments: `zeros()`, `ones()`, `constant(value)`, `row(values)` (one row repeated, [dim]), `uniform(min = -0.05, max = 0.05)`, `normal(mean = 0, std = 1)`, `truncatedNormal(mean = 0, std = 1)` (draws beyond 2 std are redrawn, up to 16 times, then clamped), `fromArray(values)` (static tables: [rows * dim] row-major), `fromFunction(fn)` (static tables: called once with [rows, dim] when the table is created, returns rows * dim finite numbers). A spec written as a plain object (`{ kind: 'uniform', min, max }`) is checked the same way when a table is created.
 * @throws InvalidArgumentError / InvalidTypeError naming the argument (non-finite numbers, max < min, std < 0, a non-function fn)
 */
export const initializers = {
  /** Every value 0 (the default initializer). */
  zeros: (): InitializerSpec => ({ kind: 'zeros' }),
  /** Every value 1. */
  ones: (): InitializerSpec => ({ kind: 'ones' }),
  /** Every value `value` (finite). */
  constant: (value: number): InitializerSpec => checkedSpec({ kind: 'constant', value }, asBuilt, true),
  /** The same row for every key: `values` has dim finite numbers (copied to a Float32Array). */
  row: (values: ArrayLike<number>): InitializerSpec => checkedSpec({ kind: 'row', values }, asBuilt, true),
  /** Uniform between min and max; defaults -0.05, 0.05. Throws InvalidArgumentError when max < min. */
  uniform: (min = -0.05, max = 0.05): InitializerSpec => checkedSpec({ kind: 'uniform', min, max }, asBuilt, true),
  /** Normal(mean, std); defaults 0, 1. Throws InvalidArgumentError when std < 0. */
  normal: (mean = 0, std = 1): InitializerSpec => checkedSpec({ kind: 'normal', mean, std }, asBuilt, true),
  /** Normal(mean, std) truncated at 2 std (redrawn up to 16 times, then clamped); defaults 0, 1. */
  truncatedNormal: (mean = 0, std = 1): InitializerSpec => checkedSpec({ kind: 'truncatedNormal', mean, std }, asBuilt, true),
  /** Static tables: the whole table, vocabularySize * dim finite numbers row-major (copied). */
  fromArray: (values: ArrayLike<number>): InitializerSpec => checkedSpec({ kind: 'array', values }, asBuilt, true),
  /** Static tables: `fn([vocabularySize, dim])` is called once when the table is created and returns its rows. */
  fromFunction: (fn: (shape: [number, number]) => Float32Array | ArrayLike<number>): InitializerSpec => checkedSpec({ kind: 'function', fn }, asBuilt, true),
} as const;

const KINDS = new Set(Object.keys(FIELDS));

/** Whether `value` looks like an initializer spec (an object whose `kind` is a known initializer kind). */
export function isInitializerSpec(value: unknown): value is InitializerSpec {
  return typeof value === 'object' && value !== null && KINDS.has((value as { kind?: string }).kind ?? '');
}

/**
 * Validates an initializer against a table and evaluates `function` ones.
 * `rows` is the vocabulary size for static tables, undefined for dynamic ones.
 */
export function resolveInitializer(
  spec: InitializerSpec | undefined,
  dim: number,
  rows: number | undefined,
  argument = 'initializer',
): ResolvedInitializer {
  if (spec === undefined) return { kind: 'zeros' };
  if (!isInitializerSpec(spec)) {
    throw invalidParameter(argument, 'an initializer spec (see `initializers`)', spec, InvalidTypeError);
  }
  // A spec may be a plain object: a field of another kind or misspelt (stddev, minval, seed) would be
  // ignored, silently, so it is refused; then the builders' checks again (a Float32Array is not copied).
  unknownKeys(spec, FIELDS[spec.kind]!, argument, 'fields');
  spec = checkedSpec(spec as unknown as Record<string, unknown>, (field) => `${argument}.${field}`, false);
  switch (spec.kind) {
    case 'row':
      if (spec.values.length !== dim) throw invalidParameter(`${argument}.values`, `length ${dim} (dim)`, spec.values);
      return spec;
    case 'array':
      if (rows === undefined) throw invalidParameter(argument, 'a per-key initializer for a dynamic table', 'array');
      if (spec.values.length !== rows * dim) {
        throw invalidParameter(`${argument}.values`, `length ${rows * dim} (rows * dim)`, spec.values);
      }
      return spec;
    case 'function': {
      if (rows === undefined) throw invalidParameter(argument, 'a per-key initializer for a dynamic table', 'function');
      const out = spec.fn([rows, dim]);
      const result = `the result of ${argument}([${rows}, ${dim}])`;
      if (!out || typeof (out as ArrayLike<number>).length !== 'number') throw invalidParameter(result, `an array of ${rows * dim} numbers`, out, InvalidTypeError);
      if (out.length !== rows * dim) throw invalidParameter(result, `an array of ${rows * dim} numbers`, out);
      // a string element would be converted by Float32Array.from: the wrong type, refused
      let bad = firstNonFinite(out);
      if (bad < 0 || typeof out[bad] === 'number') {
        const values = Float32Array.from(out);
        bad = values.findIndex((v) => !Number.isFinite(v));
        if (bad < 0) return { kind: 'array', values };
      }
      throw invalidParameter(`${result}[${bad}]`, 'a finite number', out[bad], errorClassFor(out[bad], 'number'));
    }
    default:
      return spec;
  }
}

/**
 * Fills `out[0..dim)` with the initial row of `key` (reference implementation; the
 * backends reproduce it). `row` is the key's row index for `array` initializers.
 */
export function initialRow(
  init: ResolvedInitializer,
  seed: number,
  stream: number,
  key: bigint | number,
  dim: number,
  out: Float32Array,
  offset = 0,
  row = 0,
): void {
  const [lo, hi] = keyWords(key);
  for (let c = 0; c < dim; c++) {
    let v: number;
    switch (init.kind) {
      case 'zeros':
        v = 0;
        break;
      case 'ones':
        v = 1;
        break;
      case 'constant':
        v = init.value;
        break;
      case 'row':
        v = init.values[c]!;
        break;
      case 'array':
        v = init.values[row * dim + c]!;
        break;
      case 'uniform':
        v = init.min + (init.max - init.min) * uniform01(randomWord(seed, stream, lo, hi, c, 0));
        break;
      case 'normal':
        v =
          init.mean +
          init.std *
            standardNormal(uniform01(randomWord(seed, stream, lo, hi, c, 0)), uniform01(randomWord(seed, stream, lo, hi, c, 1)));
        break;
      case 'truncatedNormal': {
        let z = 0;
        for (let a = 0; a < TRUNCATION_ATTEMPTS; a++) {
          z = standardNormal(
            uniform01(randomWord(seed, stream, lo, hi, c, 2 * a)),
            uniform01(randomWord(seed, stream, lo, hi, c, 2 * a + 1)),
          );
          if (Math.abs(z) <= TRUNCATION_STDS) break;
        }
        z = Math.max(-TRUNCATION_STDS, Math.min(TRUNCATION_STDS, z));
        v = init.mean + init.std * z;
        break;
      }
    }
    out[offset + c] = v;
  }
}
