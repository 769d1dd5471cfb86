import { InvalidTypeError, invalidParameter } from './errors.js';
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
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalidParameter(argument, 'a finite number', value);
  return value;
}

/** A copy of finite numbers as a Float32Array (an array or a typed array of numbers). */
function floats(values: unknown, argument: string): Float32Array {
  const ok = (values instanceof Float32Array || values instanceof Float64Array || values instanceof Int32Array || Array.isArray(values)) && Array.from(values as ArrayLike<unknown>).every((v) => typeof v === 'number' && Number.isFinite(v));
  if (!ok) throw invalidParameter(argument, 'an array of finite numbers', values, InvalidTypeError);
  return Float32Array.from(values as ArrayLike<number>);
}

/**
 * Builders of initializer specs (the `initializer` table option), each checking its arguments: `zeros()`, `ones()`, `constant(value)`, `row(values)` (one row repeated, [dim]), `uniform(min = -0.05, max = 0.05)`, `normal(mean = 0, std = 1)`, `truncatedNormal(mean = 0, std = 1)` (draws beyond 2 std are redrawn, up to 16 times, then clamped), `fromArray(values)` (static tables: [rows * dim] row-major), `fromFunction(fn)` (static tables: called once with [rows, dim] when the table is created, returns rows * dim finite numbers).
 * @throws InvalidArgumentError / InvalidTypeError naming the argument (non-finite numbers, max < min, std < 0, a non-function fn)
 */
export const initializers = {
  /** Every value 0 (the default initializer). */
  zeros: (): InitializerSpec => ({ kind: 'zeros' }),
  /** Every value 1. */
  ones: (): InitializerSpec => ({ kind: 'ones' }),
  /** Every value `value` (finite). */
  constant: (value: number): InitializerSpec => ({ kind: 'constant', value: finite(value, 'value') }),
  /** The same row for every key: `values` has dim finite numbers (copied to a Float32Array). */
  row: (values: ArrayLike<number>): InitializerSpec => ({ kind: 'row', values: floats(values, 'values') }),
  /** Uniform between min and max; defaults -0.05, 0.05. Throws InvalidArgumentError when max < min. */
  uniform: (min = -0.05, max = 0.05): InitializerSpec => {
    finite(min, 'min');
    finite(max, 'max');
    if (!(min <= max)) throw invalidParameter('max', `>= min (${min})`, max);
    return { kind: 'uniform', min, max };
  },
  /** Normal(mean, std); defaults 0, 1. Throws InvalidArgumentError when std < 0. */
  normal: (mean = 0, std = 1): InitializerSpec => {
    finite(mean, 'mean');
    if (finite(std, 'std') < 0) throw invalidParameter('std', 'a number >= 0', std);
    return { kind: 'normal', mean, std };
  },
  /** Normal(mean, std) truncated at 2 std (redrawn up to 16 times, then clamped); defaults 0, 1. */
  truncatedNormal: (mean = 0, std = 1): InitializerSpec => {
    finite(mean, 'mean');
    if (finite(std, 'std') < 0) throw invalidParameter('std', 'a number >= 0', std);
    return { kind: 'truncatedNormal', mean, std };
  },
  /** Static tables: the whole table, vocabularySize * dim finite numbers row-major (copied). */
  fromArray: (values: ArrayLike<number>): InitializerSpec => ({ kind: 'array', values: floats(values, 'values') }),
  /** Static tables: `fn([vocabularySize, dim])` is called once when the table is created and returns its rows. */
  fromFunction: (fn: (shape: [number, number]) => Float32Array | ArrayLike<number>): InitializerSpec => {
    if (typeof fn !== 'function') throw invalidParameter('fn', 'a function', fn, InvalidTypeError);
    return { kind: 'function', fn };
  },
} as const;

const KINDS = new Set(['zeros', 'ones', 'constant', 'row', 'uniform', 'normal', 'truncatedNormal', 'array', 'function']);

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
      if (!out || typeof (out as ArrayLike<number>).length !== 'number' || out.length !== rows * dim) {
        throw invalidParameter(`the result of ${argument}([${rows}, ${dim}])`, `an array of ${rows * dim} numbers`, out);
      }
      const values = Float32Array.from(out);
      const bad = values.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) {
        throw invalidParameter(`the result of ${argument}([${rows}, ${dim}])[${bad}]`, 'a finite number', out[bad]);
      }
      return { kind: 'array', values };
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
