import { describe, expect, it } from 'vitest';
import { createTable, ErrorCodes, optimizers, RaggedTensor, resolveTableOptions, setDefaultBackend } from '@embedstack/core';
import { throwsCode } from './util.js';

/** Junk a user passes to core's public API (stop 33 try): each case once gave a raw error, the wrong code or silently did nothing. */
describe('core public API: junk a user might pass', () => {
  it('a static reference table too large to allocate is FAILED_PRECONDITION (out of memory), not a raw RangeError', () => {
    const e = throwsCode(() => createTable({ dim: 2, kind: 'static', vocabularySize: 1e12 }, { backend: 'reference' }), ErrorCodes.FAILED_PRECONDITION, 'Out of memory');
    expect(e.message).toBe('Out of memory: could not allocate 8000000000000 bytes for the static table');
  });

  it('dim is at most 2^20 on every backend (the reference backend made a table whose first read threw a raw RangeError)', () => {
    throwsCode(() => createTable({ dim: 2 ** 40 }, { backend: 'reference' }), ErrorCodes.INVALID_ARGUMENT, 'Expected dim to be an integer in [1, 1048576] but received 1099511627776');
    throwsCode(() => resolveTableOptions({ dim: 2 ** 20 + 1 }), ErrorCodes.INVALID_ARGUMENT, 'dim');
    expect(resolveTableOptions({ dim: 2 ** 20 }).dim).toBe(2 ** 20);
  });

  it('options of write calls and export that are not objects are INVALID_TYPE (they were ignored); nothing changes', () => {
    const t = createTable({ dim: 2 }, { backend: 'reference' });
    t.upsertSync([1n], [1, 2]);
    throwsCode(() => t.upsertSync([2n], [3, 4], 5 as never), ErrorCodes.INVALID_TYPE, 'options');
    throwsCode(() => t.assignSync([1n], [3, 4], 'x' as never), ErrorCodes.INVALID_TYPE, 'options');
    throwsCode(() => t.accumSync([1n], [3, 4], [true], true as never), ErrorCodes.INVALID_TYPE, 'options');
    throwsCode(() => t.exportSync(5 as never), ErrorCodes.INVALID_TYPE, 'options');
    expect(Array.from(t.exportSync().keys as ArrayLike<bigint | number>)).toEqual([1n]);
    expect(Array.from(t.exportSync().values)).toEqual([1, 2]);
    expect(() => t.upsertSync([2n], [3, 4], null as never)).not.toThrow(); // null: no options
  });

  it('an unknown optimizer option is INVALID_ARGUMENT naming it (a misspelt learning_rate was silently the default)', () => {
    const e = throwsCode(() => optimizers.sgd({ learning_rate: 0.5 } as never), ErrorCodes.INVALID_ARGUMENT, 'options.learning_rate');
    expect(e.message).toContain('learningRate');
    throwsCode(() => optimizers.adam({ lr: 0.5 } as never), ErrorCodes.INVALID_ARGUMENT, 'options.lr');
    expect(optimizers.adam({ learningRate: 0.5, beta1: 0.8, clipvalue: 1 }).hyper.beta1).toBe(0.8);
    expect(optimizers.sgd({ momentum: 0.5 }).kind).toBe('sgd'); // a hyperparameter of another kind is known (ignored by sgd), as before
  });

  it('a negative row split is INVALID_ARGUMENT (a number, a bad value), as in an Int32Array; a fraction or a string stays INVALID_TYPE', () => {
    throwsCode(() => RaggedTensor.fromRowSplits([1n], [0, -1]), ErrorCodes.INVALID_ARGUMENT, 'rowSplits[1]');
    throwsCode(() => RaggedTensor.fromRowSplits([1n], [0n, -1n] as never), ErrorCodes.INVALID_ARGUMENT, 'rowSplits[1]');
    throwsCode(() => RaggedTensor.fromRowSplits([1n], Int32Array.from([0, -1])), ErrorCodes.INVALID_ARGUMENT, 'rowSplits');
    throwsCode(() => RaggedTensor.fromRowSplits([1n], [0, 0.5]), ErrorCodes.INVALID_TYPE, 'rowSplits[1]');
    throwsCode(() => RaggedTensor.fromRowSplits([1n], [0, '1'] as never), ErrorCodes.INVALID_TYPE, 'rowSplits[1]');
  });

  it('setDefaultBackend of a non-string is INVALID_TYPE (was NOT_FOUND for "5")', () => {
    throwsCode(() => setDefaultBackend(5 as never), ErrorCodes.INVALID_TYPE, 'name');
    throwsCode(() => setDefaultBackend('no-such-backend'), ErrorCodes.NOT_FOUND, 'no-such-backend');
  });

  it('an optional table option set to null is omitted (its default), as scorePolicy, kind, name and keyDtype already were', () => {
    const nulls = { initCapacity: null, maxCapacity: null, initializer: null, optimizer: null, slotInitialValues: null, seed: null, stream: null, storageDtype: null, vocabularySize: null };
    expect(resolveTableOptions({ dim: 3, ...nulls } as never)).toEqual(resolveTableOptions({ dim: 3 }));
    const { vocabularySize: _v, ...forStatic } = nulls;
    expect(resolveTableOptions({ dim: 3, kind: 'static', vocabularySize: 5, ...forStatic } as never)).toEqual(resolveTableOptions({ dim: 3, kind: 'static', vocabularySize: 5 }));
  });
});
