import { InvalidTypeError, invalidParameter, type ValuesInput } from '@embedstack/core';

/** What a Variable takes as values: flat [n*dim], number[], or a float32 Tensor of shape keys.shape + [dim]. */
export type VariableValues = ValuesInput;

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
