import { InvalidTypeError, invalidParameter, ShapeMismatchError } from './errors.js';
import { formatShape, validateShape } from './shape.js';
import { Tensor } from './tensor.js';
import { asTypedArray } from './typed.js';
import { checkInteger } from './validation.js';

/** Row values for n keys: flat Float32Array [n*dim], number[], or a float32 Tensor of shape keys.shape + [dim]. */
export type ValuesInput = Float32Array | Tensor<Float32Array> | readonly number[];
/** One flag per key. */
export type ExistsInput = Uint8Array | readonly boolean[];

/**
 * Validates row values for keys of shape `keyShape` and rows of width `dim`; a Tensor
 * must have shape keyShape + [dim], a flat array prod(keyShape) * dim floats.
 * Returns the caller's Float32Array itself when it has one (no copy).
 * @throws ShapeMismatchError ("Expected shape ...") / InvalidTypeError naming `argument`
 */
export function validateValues(input: unknown, keyShape: readonly number[], dim: number, argument = 'values'): Float32Array {
  validateShape(keyShape, 'keyShape');
  checkInteger(dim, 'dim', { min: 1 });
  if (typeof argument !== 'string') throw invalidParameter('argument', 'a string', argument, InvalidTypeError);
  const expected = [...keyShape, dim];
  if (input instanceof Tensor) {
    if (!(input.data instanceof Float32Array)) {
      throw invalidParameter(argument, 'float32 values', `${input.dtype} values`, InvalidTypeError);
    }
    if (input.shape.length !== expected.length || input.shape.some((d, i) => d !== expected[i])) {
      throw new ShapeMismatchError(
        `Expected shape ${formatShape(expected)} for ${argument} but received shape ${formatShape(input.shape)}`,
        { argument },
      );
    }
    return input.data;
  }
  const floats = keyShape.reduce((a, b) => a * b, 1) * dim;
  const typed = asTypedArray(input, Float32Array, argument);
  if (!typed && !Array.isArray(input)) throw invalidParameter(argument, 'a Float32Array, number[] or float32 Tensor', input, InvalidTypeError);
  // A plain array's length first: a sparse array may claim 2^32 - 1 elements.
  const length = typed ? typed.length : (input as unknown[]).length;
  if (length !== floats) {
    throw new ShapeMismatchError(
      `Expected shape ${formatShape(expected)} (${floats} floats) for ${argument} but received ${length} floats`,
      { argument },
    );
  }
  if (typed) return typed;
  const list = input as unknown[];
  for (let i = 0; i < list.length; i++) {
    if (typeof list[i] !== 'number') denseElement(list, i, argument, 'a number');
  }
  return Float32Array.from(list as number[]);
}

/**
 * Validates one exists flag per key (boolean[] or Uint8Array of length n).
 * @throws InvalidTypeError / ShapeMismatchError naming `argument`
 */
export function validateExists(input: unknown, n: number, argument = 'exists'): Uint8Array {
  checkInteger(n, 'n', { min: 0 });
  if (typeof argument !== 'string') throw invalidParameter('argument', 'a string', argument, InvalidTypeError);
  const typed = asTypedArray(input, Uint8Array, argument);
  if (!typed && !Array.isArray(input)) throw invalidParameter(argument, 'a Uint8Array or boolean[]', input, InvalidTypeError);
  const length = typed ? typed.length : (input as unknown[]).length;
  if (length !== n) throw new ShapeMismatchError(`Expected ${n} ${argument} flags but received ${length}`, { argument });
  if (typed) return typed;
  const list = input as unknown[];
  for (let i = 0; i < list.length; i++) {
    if (typeof list[i] !== 'boolean') denseElement(list, i, argument, 'a boolean');
  }
  return Uint8Array.from(list as boolean[], (x) => (x ? 1 : 0));
}

/** Throws for element i of a plain array that is not `expected`: a hole (sparse array) or a value of another type. */
function denseElement(list: readonly unknown[], i: number, argument: string, expected: string): never {
  const at = `${argument}[${i}]`;
  if (!(i in list)) throw new InvalidTypeError(`Expected ${at} to be ${expected} but it is a hole (a sparse array)`, { argument: at });
  throw invalidParameter(at, expected, list[i], InvalidTypeError);
}
