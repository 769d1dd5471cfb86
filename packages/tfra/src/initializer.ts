import {
  type InitializerSpec,
  initializers,
  InvalidTypeError,
  invalidParameter,
  isInitializerSpec,
} from '@embedstack/core';

/** What `Variable({ initializer })` accepts. */
export type VariableInitializer = number | readonly number[] | Float32Array | InitializerSpec | null | undefined;

/**
 * TFRA's `_convert_anything_to_init`: undefined -> zeros; a number or an array of
 * exactly `dim` numbers -> that row for every key; an array of another length -> its
 * first element repeated; an initializer object (`de.initializers.normal()`, ...) ->
 * drawn per key from core's counter-based generator (deterministic per key, so
 * shards agree).
 * @throws InvalidArgumentError / InvalidTypeError naming `initializer`
 */
export function toCoreInitializer(init: VariableInitializer, dim: number): InitializerSpec {
  if (init === undefined || init === null) return initializers.zeros();
  if (typeof init === 'number') {
    if (!Number.isFinite(init)) throw invalidParameter('initializer', 'a finite number', init);
    return initializers.constant(init);
  }
  if (init instanceof Float32Array || Array.isArray(init)) {
    const arr = init as ArrayLike<unknown>;
    if (arr.length === 0) throw invalidParameter('initializer', 'a non-empty array of numbers', init);
    for (let i = 0; i < arr.length; i++) {
      const v = arr[i];
      if (typeof v !== 'number' || !Number.isFinite(v)) {
        throw invalidParameter(`initializer[${i}]`, 'a finite number', v, InvalidTypeError);
      }
    }
    if (arr.length === dim) return initializers.row(arr as ArrayLike<number>);
    return initializers.constant(arr[0] as number);
  }
  if (typeof init === 'string') {
    // an upstream spelling ('zeros', 'random_normal'): the right JS type for Keras, not here
    throw invalidParameter('initializer', "a number, an array of numbers or an initializer from de.initializers (e.g. de.initializers.zeros(), not 'zeros')", init);
  }
  if (isInitializerSpec(init)) {
    if (init.kind === 'array' || init.kind === 'function') {
      throw invalidParameter('initializer', 'a per-key initializer (zeros, ones, constant, row, uniform, normal, truncatedNormal)', init.kind);
    }
    if (init.kind === 'row' && init.values.length !== dim) return initializers.constant(init.values[0] ?? 0);
    return init;
  }
  throw invalidParameter(
    'initializer',
    'undefined, a number, an array of numbers or an initializer from de.initializers',
    init,
    InvalidTypeError,
  );
}
