import { describe, expect, it } from 'vitest';
import {
  COMBINERS,
  ErrorCodes,
  fnv1a32,
  initializers,
  isCombiner,
  optimizers,
  resolveTableOptions,
  SCORE_POLICIES,
  scoresOnRead,
  validateCombiner,
  validateMaxNorm,
  validateScorePolicy,
} from '@embedstack/core';
import { throwsCode } from './util.js';

describe('resolveTableOptions', () => {
  it('resolves every default in one place', () => {
    expect(resolveTableOptions({ dim: 4 })).toEqual({
      kind: 'dynamic',
      dim: 4,
      name: 'table',
      keyDtype: 'int64',
      vocabularySize: 0,
      initCapacity: 1024,
      maxCapacity: Infinity,
      initializer: { kind: 'zeros' },
      slots: { names: [], widths: [], initial: [] },
      scorePolicy: 'lru',
      seed: 0,
      stream: 0x4a9c9bdf,
      storageDtype: 'float32',
    });
    expect(fnv1a32('table')).toBe(0x4a9c9bdf);
  });

  it('takes every option', () => {
    const opt = optimizers.adagrad();
    const r = resolveTableOptions({
      kind: 'static',
      dim: 2,
      name: 'emb',
      keyDtype: 'int32',
      vocabularySize: 10,
      initializer: initializers.fromFunction(() => new Float32Array(20).fill(1)),
      optimizer: opt,
      slotInitialValues: [0.5],
      scorePolicy: 'lfu',
      seed: 2 ** 32 - 1,
      stream: 0,
    });
    expect(r.kind).toBe('static');
    expect(r.vocabularySize).toBe(10);
    expect(r.initCapacity).toBe(0);
    expect(r.initializer.kind).toBe('array');
    expect(r.slots).toEqual({ names: ['accumulators'], widths: ['dim'], initial: [0.5] });
    expect(opt.slots.initial).toEqual([0.1]);
    expect([r.scorePolicy, r.seed, r.stream, r.name, r.keyDtype]).toEqual(['lfu', 2 ** 32 - 1, 0, 'emb', 'int32']);
    expect(resolveTableOptions({ dim: 1, name: 'emb' }).stream).toBe(fnv1a32('emb'));
  });

  it('caps initCapacity at maxCapacity; Infinity means uncapped', () => {
    expect(resolveTableOptions({ dim: 1, maxCapacity: 10 }).initCapacity).toBe(10);
    expect(resolveTableOptions({ dim: 1, maxCapacity: 10, initCapacity: 4 })).toMatchObject({ initCapacity: 4, maxCapacity: 10 });
    expect(resolveTableOptions({ dim: 1, maxCapacity: Infinity }).maxCapacity).toBe(Infinity);
  });

  const errors: [string, unknown, string, string?][] = [
    ['options not an object', null, 'options', ErrorCodes.INVALID_TYPE],
    ['unknown option', { dim: 1, dims: 2 }, 'options.dims'],
    ['kind', { dim: 1, kind: 'hash' }, 'kind'],
    ['dim missing', {}, 'dim', ErrorCodes.INVALID_TYPE],
    ['dim a string', { dim: '8' }, 'dim', ErrorCodes.INVALID_TYPE],
    ['dim a bigint', { dim: 8n }, 'dim', ErrorCodes.INVALID_TYPE],
    ['dim NaN', { dim: NaN }, 'dim'],
    ['dim 0', { dim: 0 }, 'dim'],
    ['dim 1.5', { dim: 1.5 }, 'dim'],
    ['name empty', { dim: 1, name: '' }, 'name'],
    ['name not a string', { dim: 1, name: 5 }, 'name', ErrorCodes.INVALID_TYPE],
    ['kind not a string', { dim: 1, kind: 1 }, 'kind', ErrorCodes.INVALID_TYPE],
    ['keyDtype not a string', { dim: 1, keyDtype: Int32Array }, 'keyDtype', ErrorCodes.INVALID_TYPE],
    ['keyDtype', { dim: 1, keyDtype: 'int16' }, 'keyDtype'],
    ['static without vocabularySize', { dim: 1, kind: 'static' }, 'vocabularySize', ErrorCodes.INVALID_TYPE],
    ['static vocabularySize a string', { dim: 1, kind: 'static', vocabularySize: '8' }, 'vocabularySize', ErrorCodes.INVALID_TYPE],
    ['static vocabularySize 0', { dim: 1, kind: 'static', vocabularySize: 0 }, 'vocabularySize'],
    ['static with initCapacity', { dim: 1, kind: 'static', vocabularySize: 2, initCapacity: 4 }, 'initCapacity/maxCapacity'],
    ['static with maxCapacity', { dim: 1, kind: 'static', vocabularySize: 2, maxCapacity: 4 }, 'initCapacity/maxCapacity'],
    ['dynamic with vocabularySize', { dim: 1, vocabularySize: 2 }, 'vocabularySize'],
    ['initCapacity 0', { dim: 1, initCapacity: 0 }, 'initCapacity'],
    ['maxCapacity 0', { dim: 1, maxCapacity: 0 }, 'maxCapacity'],
    ['maxCapacity 2.5', { dim: 1, maxCapacity: 2.5 }, 'maxCapacity'],
    ['array initializer on a dynamic table', { dim: 1, initializer: initializers.fromArray([1]) }, 'initializer'],
    ['initializer not a spec', { dim: 1, initializer: 'zeros' }, 'initializer', ErrorCodes.INVALID_TYPE],
    ['initializer row of the wrong length', { dim: 2, initializer: initializers.row([1]) }, 'initializer.values'],
    ['optimizer not a spec', { dim: 1, optimizer: { kind: 'sgd' } }, 'optimizer', ErrorCodes.INVALID_TYPE],
    ['slotInitialValues length', { dim: 1, optimizer: optimizers.adam(), slotInitialValues: [1] }, 'slotInitialValues'],
    ['slotInitialValues NaN', { dim: 1, optimizer: optimizers.adagrad(), slotInitialValues: [NaN] }, 'slotInitialValues'],
    ['slotInitialValues without optimizer', { dim: 1, slotInitialValues: [1] }, 'slotInitialValues'],
    ['scorePolicy', { dim: 1, scorePolicy: 'random' }, 'scorePolicy'],
    ['seed negative', { dim: 1, seed: -1 }, 'seed'],
    ['seed 2^32', { dim: 1, seed: 2 ** 32 }, 'seed'],
    ['seed fractional', { dim: 1, seed: 0.5 }, 'seed'],
    ['stream', { dim: 1, stream: 'a' }, 'stream', ErrorCodes.INVALID_TYPE],
    ['seed a string', { dim: 1, seed: '1' }, 'seed', ErrorCodes.INVALID_TYPE],
    ['initCapacity a string', { dim: 1, initCapacity: '8' }, 'initCapacity', ErrorCodes.INVALID_TYPE],
    ['maxCapacity a bigint', { dim: 1, maxCapacity: 8n }, 'maxCapacity', ErrorCodes.INVALID_TYPE],
    ['slotInitialValues a string element', { dim: 1, optimizer: optimizers.adagrad(), slotInitialValues: ['0.1'] }, 'slotInitialValues', ErrorCodes.INVALID_TYPE],
    ['slotInitialValues not an array', { dim: 1, optimizer: optimizers.adagrad(), slotInitialValues: 0.1 }, 'slotInitialValues', ErrorCodes.INVALID_TYPE],
    ['scorePolicy not a string', { dim: 1, scorePolicy: 1 }, 'scorePolicy', ErrorCodes.INVALID_TYPE],
    ['storageDtype not a string', { dim: 1, storageDtype: 16 }, 'storageDtype', ErrorCodes.INVALID_TYPE],
  ];
  for (const [title, options, argument, code] of errors) {
    it(`rejects ${title}`, () => {
      throwsCode(() => resolveTableOptions(options as never), (code ?? ErrorCodes.INVALID_ARGUMENT) as never, argument);
    });
  }
});

describe('combiner and score-policy validators', () => {
  it('combiners', () => {
    expect(COMBINERS).toEqual(['sum', 'mean', 'sqrtn']);
    expect(isCombiner('mean')).toBe(true);
    expect(isCombiner('max')).toBe(false);
    expect(validateCombiner('sqrtn')).toBe('sqrtn');
    throwsCode(() => validateCombiner('max'), ErrorCodes.INVALID_ARGUMENT, 'combiner');
    throwsCode(() => validateCombiner(1), ErrorCodes.INVALID_TYPE, 'combiner');
    expect(validateMaxNorm(undefined)).toBe(0);
    expect(validateMaxNorm(null)).toBe(0);
    expect(validateMaxNorm(2.5)).toBe(2.5);
    throwsCode(() => validateMaxNorm(0), ErrorCodes.INVALID_ARGUMENT, 'maxNorm');
    throwsCode(() => validateMaxNorm(Infinity), ErrorCodes.INVALID_ARGUMENT, 'maxNorm');
    throwsCode(() => validateMaxNorm('1'), ErrorCodes.INVALID_TYPE, 'maxNorm');
  });

  it('score policies', () => {
    expect(SCORE_POLICIES).toEqual(['lru', 'lfu', 'epochLru', 'epochLfu', 'timestamp', 'frequency', 'customized']);
    for (const p of SCORE_POLICIES) expect(validateScorePolicy(p)).toBe(p);
    throwsCode(() => validateScorePolicy('lru '), ErrorCodes.INVALID_ARGUMENT, 'scorePolicy');
    expect(SCORE_POLICIES.filter(scoresOnRead)).toEqual(['lru', 'lfu', 'epochLru', 'epochLfu']);
  });
});
