import { InvalidArgumentError, InvalidTypeError, invalidParameter, ShapeMismatchError, argName } from './errors.js';

/** Number of elements of a shape (1 for a scalar shape `[]`). */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * A copy of `shape` after checking it is an array of non-negative safe integers.
 * @throws InvalidTypeError (not an array, an element not a number) / InvalidArgumentError (a negative
 * or fractional dimension) naming `argument` (default 'shape')
 */
export function validateShape(shape: unknown, argument: string): number[] {
  argument = argName(argument, 'shape');
  if (!Array.isArray(shape)) throw invalidParameter(argument, 'an array of non-negative integers', shape, InvalidTypeError);
  for (const d of shape) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw invalidParameter(argument, 'an array of non-negative integers', shape, typeof d === 'number' ? InvalidArgumentError : InvalidTypeError);
    }
  }
  return shape.slice() as number[];
}

export function shapesEqual(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

export function assertShape(
  actual: readonly number[],
  expected: readonly number[],
  argument: string,
): void {
  if (!shapesEqual(actual, expected)) {
    throw new ShapeMismatchError(
      `Expected shape ${formatShape(expected)} for ${argument} but received shape ${formatShape(actual)}`,
      { argument },
    );
  }
}
