/**
 * One error type for the whole toolkit. Every error thrown or rejected by an
 * embedstack package is an `EmbeddingError` (or a subclass) with a stable `code`
 * from {@link ErrorCodes}. Messages name the argument, what was expected and what
 * was received; they are built only when the check fails.
 */

/** Stable error codes. Never rename one: users branch on them. */
export const ErrorCodes = {
  /** A value has the right type but a wrong value (TF's ValueError). */
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  /** A value has the wrong type or dtype (TF's TypeError). */
  INVALID_TYPE: 'INVALID_TYPE',
  /** Shapes or lengths do not agree. */
  SHAPE_MISMATCH: 'SHAPE_MISMATCH',
  /** A key or index outside the table's range (static tables, int32 keys). */
  OUT_OF_RANGE: 'OUT_OF_RANGE',
  /** A named object (variable, model, table, backend) does not exist. */
  NOT_FOUND: 'NOT_FOUND',
  /** A named object already exists. */
  ALREADY_EXISTS: 'ALREADY_EXISTS',
  /** The call is valid but not in this state (dequeue before enqueue, ...). */
  FAILED_PRECONDITION: 'FAILED_PRECONDITION',
  /** The operation is not supported by this table kind or backend. */
  UNSUPPORTED: 'UNSUPPORTED',
  /** The table (or server) was disposed. */
  DISPOSED: 'DISPOSED',
  /** A checkpoint or model file is corrupt, truncated or of an unknown format. */
  CHECKPOINT_CORRUPT: 'CHECKPOINT_CORRUPT',
  /** File-system failure while reading or writing a checkpoint. */
  IO_ERROR: 'IO_ERROR',
  /** No usable backend, or a native build is missing. */
  BACKEND_UNAVAILABLE: 'BACKEND_UNAVAILABLE',
  /** A remote store (Redis, ...) is unreachable or answered with an error. */
  STORE_UNAVAILABLE: 'STORE_UNAVAILABLE',
  /** A bug: an invariant of embedstack itself was broken. */
  INTERNAL: 'INTERNAL',
} as const;

/** One of the {@link ErrorCodes} values (`'INVALID_ARGUMENT'`, `'NOT_FOUND'`, ...). */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** Options of an {@link EmbeddingError}'s constructor. */
export interface EmbeddingErrorOptions {
  /** The underlying error, kept as the standard `Error.cause`. */
  cause?: unknown;
  /** The argument the error is about, when there is one. */
  argument?: string;
}

/**
 * Base class of every error embedstack throws or rejects with. Branch on `code`
 * (stable) rather than on the class or the message.
 */
export class EmbeddingError extends Error {
  /** Stable code from {@link ErrorCodes}. */
  readonly code: ErrorCode;
  /** The argument the error is about (`'keys'`, `'options.dim'`, ...), or undefined. */
  readonly argument: string | undefined;
  /** The class name (`'EmbeddingError'`, `'InvalidArgumentError'`, ...), stable across minification. */
  override readonly name: string = 'EmbeddingError';

  /**
   * @param code - the stable code
   * @param message - the message (a non-string is described, not thrown on)
   * @param options - `cause` and `argument`; a non-object is read as `{}`
   */
  constructor(code: ErrorCode, message: string, options: EmbeddingErrorOptions | null = {}) {
    const o: EmbeddingErrorOptions = typeof options === 'object' && options !== null ? options : {};
    super(typeof message === 'string' ? message : describeValue(message), o.cause === undefined ? undefined : { cause: o.cause });
    this.code = code;
    this.argument = o.argument;
  }

  /**
   * `instanceof` that also holds across copies of core (the ESM and CommonJS builds
   * loaded side by side, or two installed versions): besides the usual prototype
   * check, a value is an instance of one of core's error classes when its prototype
   * chain carries that class's brand (registered under `Symbol.for('embedstack.error')`
   * on each class's prototype, see below). A subclass outside core has no brand of
   * its own and keeps the plain prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    if (typeof value !== 'object' || value === null || !Object.hasOwn(this.prototype, ERROR_BRAND)) return false;
    const brand = (this.prototype as unknown as Record<symbol, unknown>)[ERROR_BRAND];
    for (let p: object | null = Object.getPrototypeOf(value); p !== null; p = Object.getPrototypeOf(p)) {
      if (Object.hasOwn(p, ERROR_BRAND) && (p as Record<symbol, unknown>)[ERROR_BRAND] === brand) return true;
    }
    return false;
  }
}

/** Key of the class-name brand on the prototypes of core's error classes, shared by every copy of core. */
const ERROR_BRAND = Symbol.for('embedstack.error');

/** Wrong value (TF's ValueError). code INVALID_ARGUMENT. */
export class InvalidArgumentError extends EmbeddingError {
  override readonly name = 'InvalidArgumentError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.INVALID_ARGUMENT, message, options);
  }
}

/** Wrong type or dtype (TF's TypeError). code INVALID_TYPE. */
export class InvalidTypeError extends EmbeddingError {
  override readonly name = 'InvalidTypeError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.INVALID_TYPE, message, options);
  }
}

/** Shapes or lengths do not agree. code SHAPE_MISMATCH. */
export class ShapeMismatchError extends EmbeddingError {
  override readonly name = 'ShapeMismatchError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.SHAPE_MISMATCH, message, options);
  }
}

/** A key or index outside the table's range (static tables, int32 keys). code OUT_OF_RANGE. */
export class OutOfRangeError extends EmbeddingError {
  override readonly name = 'OutOfRangeError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.OUT_OF_RANGE, message, options);
  }
}

/** A named object (variable, model, table, backend) does not exist. code NOT_FOUND. */
export class NotFoundError extends EmbeddingError {
  override readonly name = 'NotFoundError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.NOT_FOUND, message, options);
  }
}

/** A named object already exists. code ALREADY_EXISTS. */
export class AlreadyExistsError extends EmbeddingError {
  override readonly name = 'AlreadyExistsError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.ALREADY_EXISTS, message, options);
  }
}

/** The call is valid but not in this state (dequeue before enqueue, ...). code FAILED_PRECONDITION. */
export class FailedPreconditionError extends EmbeddingError {
  override readonly name = 'FailedPreconditionError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.FAILED_PRECONDITION, message, options);
  }
}

/** The operation is not supported by this table kind or backend. code UNSUPPORTED. */
export class UnsupportedError extends EmbeddingError {
  override readonly name = 'UnsupportedError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.UNSUPPORTED, message, options);
  }
}

/** The table (or server) was disposed. code DISPOSED. */
export class DisposedError extends EmbeddingError {
  override readonly name = 'DisposedError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.DISPOSED, message, options);
  }
}

/** A checkpoint or model file is corrupt, truncated or of an unknown format. code CHECKPOINT_CORRUPT. */
export class CheckpointCorruptError extends EmbeddingError {
  override readonly name = 'CheckpointCorruptError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.CHECKPOINT_CORRUPT, message, options);
  }
}

/** File-system failure while reading or writing a checkpoint. code IO_ERROR. */
export class IOError extends EmbeddingError {
  override readonly name = 'IOError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.IO_ERROR, message, options);
  }
}

/** No usable backend, or a native build is missing. code BACKEND_UNAVAILABLE. */
export class BackendUnavailableError extends EmbeddingError {
  override readonly name = 'BackendUnavailableError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.BACKEND_UNAVAILABLE, message, options);
  }
}

/** A remote store (Redis, ...) is unreachable or answered with an error. code STORE_UNAVAILABLE. */
export class StoreUnavailableError extends EmbeddingError {
  override readonly name = 'StoreUnavailableError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.STORE_UNAVAILABLE, message, options);
  }
}

/** A bug: an invariant of embedstack itself was broken. code INTERNAL. */
export class InternalError extends EmbeddingError {
  override readonly name = 'InternalError';
  constructor(message: string, options?: EmbeddingErrorOptions) {
    super(ErrorCodes.INTERNAL, message, options);
  }
}

// Brands each class's prototype with its stable name (not the constructor's `name`, which minifiers rename).
for (const [name, errorClass] of Object.entries({
  EmbeddingError,
  InvalidArgumentError,
  InvalidTypeError,
  ShapeMismatchError,
  OutOfRangeError,
  NotFoundError,
  AlreadyExistsError,
  FailedPreconditionError,
  UnsupportedError,
  DisposedError,
  CheckpointCorruptError,
  IOError,
  BackendUnavailableError,
  StoreUnavailableError,
  InternalError,
})) {
  Object.defineProperty(errorClass.prototype, ERROR_BRAND, { value: name });
}

/** Short, bounded description of a received value for error messages. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : String(value);
  if (typeof value === 'string') {
    return value.length > 40 ? JSON.stringify(value.slice(0, 40) + '...') : JSON.stringify(value);
  }
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'function') return `function ${value.name || '(anonymous)'}`;
  if (ArrayBuffer.isView(value)) {
    const len = 'length' in value && typeof value.length === 'number' ? value.length : value.byteLength;
    return `${value.constructor.name}(${len})`;
  }
  if (Array.isArray(value)) return `array of length ${value.length}`;
  if (typeof value === 'object') {
    const ctor = (value as object).constructor;
    return ctor && ctor !== Object ? `${ctor.name} object` : 'object';
  }
  return typeof value;
}

/** An argument name for messages: `argument` when it is a string, else `fallback` (junk never breaks a message). */
export function argName(argument: unknown, fallback: string): string {
  return typeof argument === 'string' ? argument : fallback;
}

/** A constructor of an `EmbeddingError` subclass (what `invalidParameter` throws). */
export type ErrorClass = new (message: string, options?: EmbeddingErrorOptions) => EmbeddingError;

/**
 * The one helper for parameter errors: names the argument, what was expected and
 * what was received. `Cls` defaults to InvalidArgumentError.
 */
export function invalidParameter(
  argument: string,
  expected: string,
  received: unknown,
  Cls: ErrorClass = InvalidArgumentError,
): EmbeddingError {
  const arg = typeof argument === 'string' ? argument : describeValue(argument);
  const exp = typeof expected === 'string' ? expected : describeValue(expected);
  const C = typeof Cls === 'function' && Cls.prototype instanceof EmbeddingError ? Cls : InvalidArgumentError;
  return new C(`Expected ${arg} to be ${exp} but received ${describeValue(received)}`, { argument: arg });
}

/** tfjs-style assert: the message is built only when the check fails. */
export function check(
  condition: unknown,
  makeError: () => EmbeddingError,
): asserts condition {
  if (condition) return;
  const e: unknown = typeof makeError === 'function' ? makeError() : undefined;
  throw e instanceof EmbeddingError ? e : new InternalError(`check failed and makeError did not return an EmbeddingError (received ${describeValue(e)})`);
}
