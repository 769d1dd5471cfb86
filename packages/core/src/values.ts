import { InvalidTypeError, invalidParameter, ShapeMismatchError } from './errors.js';
import { formatShape, validateShape } from './shape.js';
import { Tensor } from './tensor.js';

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
  if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 1) throw invalidParameter('dim', 'an integer >= 1', dim);
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
  let v: Float32Array;
  if (input instanceof Float32Array) v = input;
  else if (Array.isArray(input) && input.every((x) => typeof x === 'number')) v = Float32Array.from(input as number[]);
  else throw invalidParameter(argument, 'a Float32Array, number[] or float32 Tensor', input, InvalidTypeError);
  const floats = keyShape.reduce((a, b) => a * b, 1) * dim;
  if (v.length !== floats) {
    throw new ShapeMismatchError(
      `Expected shape ${formatShape(expected)} (${floats} floats) for ${argument} but received ${v.length} floats`,
      { argument },
    );
  }
  return v;
}

/**
 * Validates one exists flag per key (boolean[] or Uint8Array of length n).
 * @throws InvalidTypeError / ShapeMismatchError naming `argument`
 */
export function validateExists(input: unknown, n: number, argument = 'exists'): Uint8Array {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw invalidParameter('n', 'an integer >= 0', n);
  if (typeof argument !== 'string') throw invalidParameter('argument', 'a string', argument, InvalidTypeError);
  let e: Uint8Array;
  if (input instanceof Uint8Array) e = input;
  else if (Array.isArray(input) && input.every((x) => typeof x === 'boolean')) e = Uint8Array.from(input as boolean[], (x) => (x ? 1 : 0));
  else throw invalidParameter(argument, 'a Uint8Array or boolean[]', input, InvalidTypeError);
  if (e.length !== n) throw new ShapeMismatchError(`Expected ${n} ${argument} flags but received ${e.length}`, { argument });
  return e;
}
