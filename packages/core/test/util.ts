import { expect } from 'vitest';
import { EmbeddingError, type ErrorCode } from '@embedstack/core';

/** Calls `fn`, checks it throws an EmbeddingError with `code` whose message names `argument`; returns it. */
export function throwsCode(fn: () => unknown, code: ErrorCode, argument: string): EmbeddingError {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error, `expected ${code} naming ${argument}`).toBeInstanceOf(EmbeddingError);
  const e = error as EmbeddingError;
  expect(e.code, e.message).toBe(code);
  expect(e.message).toContain(argument);
  return e;
}

/** Plain array of any typed or plain array (numbers or bigints), for comparisons. */
export function list(a: ArrayLike<number | bigint> | Iterable<number | bigint>): (number | bigint)[] {
  return Array.from(a as ArrayLike<number | bigint>);
}
