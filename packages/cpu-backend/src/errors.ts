import {
  BackendUnavailableError,
  DisposedError,
  EmbeddingError,
  type EmbeddingErrorOptions,
  ErrorCodes,
  FailedPreconditionError,
  InternalError,
  InvalidArgumentError,
  InvalidTypeError,
  OutOfRangeError,
  ShapeMismatchError,
  UnsupportedError,
} from '@embedstack/core';

type ErrorClass = new (message: string, options?: EmbeddingErrorOptions) => EmbeddingError;

const CLASSES: Partial<Record<string, ErrorClass>> = {
  [ErrorCodes.INVALID_ARGUMENT]: InvalidArgumentError,
  [ErrorCodes.INVALID_TYPE]: InvalidTypeError,
  [ErrorCodes.SHAPE_MISMATCH]: ShapeMismatchError,
  [ErrorCodes.OUT_OF_RANGE]: OutOfRangeError,
  [ErrorCodes.UNSUPPORTED]: UnsupportedError,
  [ErrorCodes.DISPOSED]: DisposedError,
  [ErrorCodes.FAILED_PRECONDITION]: FailedPreconditionError,
  [ErrorCodes.BACKEND_UNAVAILABLE]: BackendUnavailableError,
  [ErrorCodes.INTERNAL]: InternalError,
};

/**
 * A native failure (any thrown value) as core's EmbeddingError subclass of its code (same message;
 * the native error, with its `nativeLocation`, as `cause`; its stack, which the
 * addon captured at the call site, kept).
 */
export function fromNative(e: unknown): EmbeddingError {
  if (e instanceof EmbeddingError) return e;
  const native = e as { code?: unknown; message?: unknown; stack?: unknown };
  const code = typeof native?.code === 'string' ? native.code : ErrorCodes.INTERNAL;
  const Cls = CLASSES[code] ?? InternalError;
  const message = typeof native?.message === 'string' ? native.message : safeString(e);
  const err = new Cls(message, { cause: e });
  if (typeof native?.stack === 'string') {
    const frames = native.stack.indexOf('\n');
    if (frames >= 0) err.stack = `${err.name}: ${message}${native.stack.slice(frames)}`;
  }
  return err;
}

/** String(x), or its tag when it has no string form (an object without a prototype). */
function safeString(x: unknown): string {
  try {
    return String(x);
  } catch {
    return Object.prototype.toString.call(x);
  }
}

/** Runs a native call, rethrowing its failure as an EmbeddingError. */
export function call<R>(fn: () => R): R {
  try {
    return fn();
  } catch (e) {
    throw fromNative(e);
  }
}

/** The same for a native promise (or a synchronous throw while starting it). */
export function callAsync<R>(fn: () => Promise<R>): Promise<R> {
  try {
    return fn().catch((e: unknown) => {
      throw fromNative(e);
    });
  } catch (e) {
    return Promise.reject(fromNative(e));
  }
}
