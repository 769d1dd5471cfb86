import {
  formatShape,
  InvalidTypeError,
  invalidParameter,
  ShapeMismatchError,
  Tensor,
} from '@embedstack/core';

/** What a Variable takes as values: flat [n*dim], number[], or a float32 Tensor of shape keys.shape + [dim]. */
export type VariableValues = Float32Array | Tensor<Float32Array> | readonly number[];

/**
 * Validates values for keys of shape `keyShape` (n keys) and width `dim`.
 * @throws ShapeMismatchError ("Expected shape ...") / InvalidTypeError naming `argument`
 */
export function checkValues(input: unknown, keyShape: readonly number[], n: number, dim: number, argument = 'values'): Float32Array {
  if (input instanceof Tensor) {
    if (!(input.data instanceof Float32Array)) throw invalidParameter(argument, 'float32 values', `${input.dtype} values`, InvalidTypeError);
    const expected = [...keyShape, dim];
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
  if (v.length !== n * dim) {
    throw new ShapeMismatchError(
      `Expected shape ${formatShape([...keyShape, dim])} (${n * dim} floats) for ${argument} but received ${v.length} floats`,
      { argument },
    );
  }
  return v;
}

/** exists flags: boolean[] or Uint8Array of length n. */
export function checkExists(input: unknown, n: number, argument = 'exists'): Uint8Array {
  let e: Uint8Array;
  if (input instanceof Uint8Array) e = input;
  else if (Array.isArray(input) && input.every((x) => typeof x === 'boolean')) e = Uint8Array.from(input as boolean[], (x) => (x ? 1 : 0));
  else throw invalidParameter(argument, 'a boolean[] or Uint8Array', input, InvalidTypeError);
  if (e.length !== n) throw new ShapeMismatchError(`Expected ${n} ${argument} flags but received ${e.length}`, { argument });
  return e;
}

export function checkBoolean(v: unknown, argument: string, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw invalidParameter(argument, 'a boolean', v, InvalidTypeError);
  return v;
}

export function checkOptionsObject(options: unknown, argument: string, known: readonly string[]): Record<string, unknown> {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalidParameter(argument, 'an options object', options, InvalidTypeError);
  }
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) throw invalidParameter(`${argument}.${k}`, `one of the known options (${known.join(', ')})`, k);
  }
  return options as Record<string, unknown>;
}
