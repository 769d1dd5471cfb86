import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AlreadyExistsError,
  BackendUnavailableError,
  CheckpointCorruptError,
  check,
  createTable,
  describeValue,
  DisposedError,
  EmbeddingError,
  ErrorCodes,
  FailedPreconditionError,
  getBackend,
  importHugeCTR,
  InternalError,
  InvalidArgumentError,
  InvalidTypeError,
  invalidParameter,
  IOError,
  normalizeKeys,
  NotFoundError,
  OutOfRangeError,
  referenceBackend,
  registerBackend,
  resolveTableOptions,
  saveTable,
  ShapeMismatchError,
  StoreUnavailableError,
  Tensor,
  UnsupportedError,
  unregisterBackend,
  type ErrorCode,
} from '@embedstack/core';

/** Runs `fn` and returns what it threw (or rejected with). */
async function caught(fn: () => unknown): Promise<EmbeddingError> {
  try {
    await fn();
  } catch (e) {
    expect(e).toBeInstanceOf(EmbeddingError);
    return e as EmbeddingError;
  }
  throw new Error('expected a throw');
}

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'embedstack-core-errors-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('ErrorCodes', () => {
  it('has exactly the documented stable codes, each equal to its name', () => {
    expect(Object.keys(ErrorCodes).sort()).toEqual(
      [
        'INVALID_ARGUMENT',
        'INVALID_TYPE',
        'SHAPE_MISMATCH',
        'OUT_OF_RANGE',
        'NOT_FOUND',
        'ALREADY_EXISTS',
        'FAILED_PRECONDITION',
        'UNSUPPORTED',
        'DISPOSED',
        'CHECKPOINT_CORRUPT',
        'IO_ERROR',
        'BACKEND_UNAVAILABLE',
        'STORE_UNAVAILABLE',
        'INTERNAL',
      ].sort(),
    );
    for (const [k, v] of Object.entries(ErrorCodes)) expect(v).toBe(k);
  });

  // Every code raised by a real core call where core can raise it. FAILED_PRECONDITION
  // and IO_ERROR are also raised by src/checkpoint/protocol.test.ts and corrupt.test.ts.
  const triggers: Record<ErrorCode, [new (...a: never[]) => EmbeddingError, string, () => unknown]> = {
    INVALID_ARGUMENT: [InvalidArgumentError, 'InvalidArgumentError', () => resolveTableOptions({ dim: 0 })],
    INVALID_TYPE: [InvalidTypeError, 'InvalidTypeError', () => normalizeKeys(['x'], 'int64')],
    SHAPE_MISMATCH: [ShapeMismatchError, 'ShapeMismatchError', () => new Tensor(new Float32Array(3), [2, 2])],
    OUT_OF_RANGE: [
      OutOfRangeError,
      'OutOfRangeError',
      () => createTable({ kind: 'static', dim: 1, vocabularySize: 2 }, { backend: referenceBackend }).findSync([2]),
    ],
    NOT_FOUND: [NotFoundError, 'NotFoundError', () => getBackend('no-such-backend')],
    ALREADY_EXISTS: [AlreadyExistsError, 'AlreadyExistsError', () => { throw new AlreadyExistsError('Table "t" already exists', { argument: 'name' }); }],
    FAILED_PRECONDITION: [FailedPreconditionError, 'FailedPreconditionError', () => { throw new FailedPreconditionError('dequeue before enqueue'); }],
    UNSUPPORTED: [
      UnsupportedError,
      'UnsupportedError',
      () => createTable({ kind: 'static', dim: 1, vocabularySize: 2 }, { backend: referenceBackend }).restrictSync(1),
    ],
    DISPOSED: [
      DisposedError,
      'DisposedError',
      () => {
        const t = createTable({ dim: 1 }, { backend: referenceBackend });
        t.dispose();
        return t.findSync([1]);
      },
    ],
    CHECKPOINT_CORRUPT: [
      CheckpointCorruptError,
      'CheckpointCorruptError',
      async () => {
        const d = join(dir, 'bad-hugectr');
        await rm(d, { recursive: true, force: true });
        const { mkdir } = await import('node:fs/promises');
        await mkdir(d);
        await writeFile(join(d, 'key'), new Uint8Array(3)); // not a multiple of 8 bytes
        await writeFile(join(d, 'emb_vector'), new Uint8Array(4));
        return importHugeCTR(d, createTable({ dim: 1 }, { backend: referenceBackend }));
      },
    ],
    IO_ERROR: [
      IOError,
      'IOError',
      async () => {
        const file = join(dir, 'a-file');
        await writeFile(file, 'x');
        return saveTable(createTable({ dim: 1 }, { backend: referenceBackend }), join(file, 'ckpt'));
      },
    ],
    BACKEND_UNAVAILABLE: [
      BackendUnavailableError,
      'BackendUnavailableError',
      () => {
        registerBackend({ ...referenceBackend, name: 'errors-test-broken', isUsable: () => false, createTable: referenceBackend.createTable, capabilities: referenceBackend.capabilities, devices: referenceBackend.devices, priority: 0 });
        try {
          return getBackend('errors-test-broken');
        } finally {
          unregisterBackend('errors-test-broken');
        }
      },
    ],
    STORE_UNAVAILABLE: [StoreUnavailableError, 'StoreUnavailableError', () => { throw new StoreUnavailableError('Redis at 127.0.0.1:1 refused the connection'); }],
    INTERNAL: [InternalError, 'InternalError', () => { throw new InternalError('invariant broken'); }],
  };

  for (const [code, [Cls, name, trigger]] of Object.entries(triggers) as [ErrorCode, (typeof triggers)[ErrorCode]][]) {
    it(`${code}: ${name} (instanceof EmbeddingError and Error, stable name and code)`, async () => {
      const e = await caught(trigger);
      expect(e).toBeInstanceOf(Cls);
      expect(e).toBeInstanceOf(EmbeddingError);
      expect(e).toBeInstanceOf(Error);
      expect(e.code).toBe(code);
      expect(e.name).toBe(name);
      expect(e.message.length).toBeGreaterThan(0);
    });
  }
});

describe('EmbeddingError helpers', () => {
  it('keeps cause and argument', () => {
    const cause = new Error('root');
    const e = new EmbeddingError(ErrorCodes.IO_ERROR, 'boom', { cause, argument: 'dir' });
    expect(e.cause).toBe(cause);
    expect(e.argument).toBe('dir');
    expect(e.name).toBe('EmbeddingError');
    expect(new EmbeddingError(ErrorCodes.INTERNAL, 'x').cause).toBeUndefined();
  });

  it('invalidParameter names the argument, the expectation and the received value', () => {
    const e = invalidParameter('dim', 'an integer >= 1', 0);
    expect(e).toBeInstanceOf(InvalidArgumentError);
    expect(e.message).toBe('Expected dim to be an integer >= 1 but received 0');
    expect(e.argument).toBe('dim');
    const t = invalidParameter('keys', 'ids', 'abc', InvalidTypeError);
    expect(t).toBeInstanceOf(InvalidTypeError);
    expect(t.message).toBe('Expected keys to be ids but received "abc"');
  });

  it('describeValue is short and bounded for every kind of value', () => {
    expect(describeValue(null)).toBe('null');
    expect(describeValue(undefined)).toBe('undefined');
    expect(describeValue(5n)).toBe('5n');
    expect(describeValue(NaN)).toBe('NaN');
    expect(describeValue(1.5)).toBe('1.5');
    expect(describeValue('hi')).toBe('"hi"');
    expect(describeValue('x'.repeat(100))).toBe(JSON.stringify('x'.repeat(40) + '...'));
    expect(describeValue(true)).toBe('true');
    expect(describeValue(function named() {})).toBe('function named');
    expect(describeValue(() => 1)).toMatch(/^function /);
    expect(describeValue(new Float32Array(3))).toBe('Float32Array(3)');
    expect(describeValue(new DataView(new ArrayBuffer(4)))).toBe('DataView(4)');
    expect(describeValue([1, 2])).toBe('array of length 2');
    expect(describeValue({ a: 1 })).toBe('object');
    expect(describeValue(new Map())).toBe('Map object');
    expect(describeValue(Symbol('s'))).toBe('symbol');
  });

  it('check builds the error only when the condition fails', () => {
    let built = 0;
    const make = () => (built++, new InvalidArgumentError('bad'));
    expect(() => check(true, make)).not.toThrow();
    expect(built).toBe(0);
    expect(() => check(0, make)).toThrow(InvalidArgumentError);
    expect(built).toBe(1);
  });
});
