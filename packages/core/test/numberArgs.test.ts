import { describe, expect, it } from 'vitest';
import {
  checkInteger,
  checkNumber,
  createCache,
  createTable,
  crc32c,
  EmbeddingError,
  type EmbeddingTable,
  ErrorCodes,
  firstOutOfRange,
  floorMod,
  initializers,
  keyAt,
  makeKeys,
  mix32,
  optimizers,
  RaggedTensor,
  randomWord,
  resolveOptimizer,
  resolveShardPlan,
  resolveTableOptions,
  roundBfloat16,
  roundToStorage,
  slotFloatsPerRow,
  standardNormal,
  Tensor,
  uniform01,
  validateMaxNorm,
  validateShape,
} from '@embedstack/core';

/**
 * Every public entry point of core that takes a number, called with junk in that number's
 * place: another JS type (a string such as '8' or '0.1', a BigInt, a boolean, undefined where
 * the number is required) is INVALID_TYPE; the right type with a bad value (NaN) is
 * INVALID_ARGUMENT; both name the argument. A valid number is accepted (so the row really tests
 * that argument). A rejected table method leaves the table unchanged.
 */

type Call = (v: unknown) => unknown;
interface Row {
  /** the argument the error names */
  argument: string;
  call: Call;
  /** a valid value (accepted) */
  good: number;
  /** NaN is a valid value here (roundBfloat16 keeps it) */
  nanOk?: boolean;
  /** undefined is a valid value here (an optional number with a default) */
  undefinedOk?: boolean;
  /** null is a valid value here (no bound) */
  nullOk?: boolean;
}

function table(): EmbeddingTable {
  const t = createTable({ dim: 2, optimizer: optimizers.adagrad() }, { backend: 'reference' });
  t.upsertSync(BigInt64Array.from([1n, 2n]), Float32Array.from([1, 2, 3, 4]));
  return t;
}

/** Table state for "a rejected call changes nothing": rows, values, slots, scores. */
function state(t: EmbeddingTable): unknown {
  const b = t.exportSync();
  return [Array.from(b.keys as ArrayLike<bigint | number>), Array.from(b.values), b.slots.map((s) => Array.from(s)), Array.from(b.scores ?? [])];
}

const layout = optimizers.adam().slots;
const keys = BigInt64Array.from([0n, 1n, 2n]);
const rows: [string, Row][] = [
  ['checkInteger', { argument: 'n', call: (v) => checkInteger(v, 'n', { min: 0 }), good: 3 }],
  ['checkNumber', { argument: 'x', call: (v) => checkNumber(v, 'x'), good: 0.5 }],
  ['createTable dim', { argument: 'dim', call: (v) => createTable({ dim: v as number }, { backend: 'reference' }), good: 2 }],
  ['createTable vocabularySize', { argument: 'vocabularySize', call: (v) => resolveTableOptions({ dim: 2, kind: 'static', vocabularySize: v as number }), good: 8 }],
  ['createTable initCapacity', { argument: 'initCapacity', call: (v) => resolveTableOptions({ dim: 2, initCapacity: v as number }), good: 8, undefinedOk: true }],
  ['createTable maxCapacity', { argument: 'maxCapacity', call: (v) => resolveTableOptions({ dim: 2, maxCapacity: v as number }), good: 8, undefinedOk: true }],
  ['createTable seed', { argument: 'seed', call: (v) => resolveTableOptions({ dim: 2, seed: v as number }), good: 1, undefinedOk: true }],
  ['createTable stream', { argument: 'stream', call: (v) => resolveTableOptions({ dim: 2, stream: v as number }), good: 1, undefinedOk: true }],
  ['sgd learningRate', { argument: 'learningRate', call: (v) => optimizers.sgd({ learningRate: v as number }), good: 0.1, undefinedOk: true }],
  ['ftrl learningRate', { argument: 'learningRate', call: (v) => optimizers.ftrl({ learningRate: v as number }), good: 0.1, undefinedOk: true }],
  ['adam beta1', { argument: 'beta1', call: (v) => optimizers.adam({ beta1: v as number }), good: 0.9, undefinedOk: true }],
  ['adam epsilon', { argument: 'epsilon', call: (v) => optimizers.adam({ epsilon: v as number }), good: 1e-7, undefinedOk: true }],
  ['adagrad initialAccumulatorValue', { argument: 'initialAccumulatorValue', call: (v) => optimizers.adagrad({ initialAccumulatorValue: v as number }), good: 0.1, undefinedOk: true }],
  ['ftrl l1', { argument: 'l1', call: (v) => optimizers.ftrl({ l1: v as number }), good: 0.5, undefinedOk: true }],
  ['momentum momentum', { argument: 'momentum', call: (v) => optimizers.momentum({ momentum: v as number }), good: 0.5, undefinedOk: true }],
  ['adadelta rho', { argument: 'rho', call: (v) => optimizers.adadelta({ rho: v as number }), good: 0.5, undefinedOk: true }],
  ['sgd clipvalue', { argument: 'clipvalue', call: (v) => optimizers.sgd({ clipvalue: v as number }), good: 1, undefinedOk: true }],
  ['sgd clipvalue[0]', { argument: 'clipvalue[0]', call: (v) => optimizers.sgd({ clipvalue: [v as number, 1] }), good: -1, nullOk: true }],
  ['sgd clipWeightMin', { argument: 'clipWeightMin', call: (v) => optimizers.sgd({ clipWeightMin: v as number }), good: -1, undefinedOk: true }],
  ['sgd clipWeightMax', { argument: 'clipWeightMax', call: (v) => optimizers.sgd({ clipWeightMax: v as number }), good: 1, undefinedOk: true }],
  ['sgd weightDecayFactor', { argument: 'weightDecayFactor', call: (v) => optimizers.sgd({ weightDecayFactor: v as number }), good: 0.1, undefinedOk: true }],
  ['learningRate function result', { argument: 'the result of learningRate(1)', call: (v) => resolveOptimizer(optimizers.sgd({ learningRate: () => v as number }), 1), good: 0.1 }],
  ['initializers.constant', { argument: 'value', call: (v) => initializers.constant(v as number), good: 0.5 }],
  ['initializers.uniform min', { argument: 'min', call: (v) => initializers.uniform(v as number, 1), good: 0 }],
  ['initializers.normal std', { argument: 'std', call: (v) => initializers.normal(0, v as number), good: 1 }],
  ['initializers.truncatedNormal mean', { argument: 'mean', call: (v) => initializers.truncatedNormal(v as number, 1), good: 0 }],
  ['createCache capacity', { argument: 'options.capacity', call: (v) => createCache({ capacity: v as number, dim: 2 }, { backend: 'reference' }), good: 8 }],
  ['createCache dim', { argument: 'options.dim', call: (v) => createCache({ capacity: 8, dim: v as number }, { backend: 'reference' }), good: 2 }],
  ['createCache ways', { argument: 'options.ways', call: (v) => createCache({ capacity: 8, dim: 2, ways: v as number }, { backend: 'reference' }), good: 2, undefinedOk: true }],
  ['validateMaxNorm', { argument: 'maxNorm', call: (v) => validateMaxNorm(v), good: 1, undefinedOk: true }],
  ['validateShape', { argument: 'shape', call: (v) => validateShape([2, v], 'shape'), good: 3 }],
  ['Tensor shape', { argument: 'shape', call: (v) => new Tensor(new Float32Array(4), [v as number]), good: 4 }],
  ['roundToStorage begin', { argument: 'begin', call: (v) => roundToStorage('bfloat16', new Float32Array(2), v as number), good: 1, undefinedOk: true }],
  ['roundBfloat16', { argument: 'x', call: (v) => roundBfloat16(v as number), good: 1.5, nanOk: true }],
  ['resolveShardPlan numShards', { argument: 'plan.numShards', call: (v) => resolveShardPlan({ placement: 'mod', numShards: v as number, shard: 0 }, { kind: 'dynamic', keyDtype: 'int64', vocabularySize: 0 }), good: 2 }],
  ['mix32', { argument: 'x', call: (v) => mix32(v as number), good: 1 }],
  ['randomWord', { argument: 'column', call: (v) => randomWord(0, 0, 1, 0, v as number, 0), good: 1 }],
  ['uniform01', { argument: 'word', call: (v) => uniform01(v as number), good: 5 }],
  ['standardNormal', { argument: 'u1', call: (v) => standardNormal(v as number, 0.5), good: 0.5 }],
  ['keyAt', { argument: 'i', call: (v) => keyAt(keys, v as number), good: 1 }],
  ['floorMod', { argument: 'n', call: (v) => floorMod(5, v as number), good: 3 }],
  ['makeKeys', { argument: 'n', call: (v) => makeKeys('int64', v as number, (i) => i), good: 2 }],
  ['firstOutOfRange', { argument: 'n', call: (v) => firstOutOfRange(keys, v as number), good: 2 }],
  ['crc32c seed', { argument: 'seed', call: (v) => crc32c(new Uint8Array(2), v as number), good: 0, undefinedOk: true }],
  ['slotFloatsPerRow', { argument: 'dim', call: (v) => slotFloatsPerRow(layout, v as number), good: 2 }],
  ['resolveOptimizer step', { argument: 'step', call: (v) => resolveOptimizer(optimizers.sgd(), v as number), good: 1 }],
];

/** Table methods: called on a fresh table, which must be unchanged after a rejection. */
const methods: [string, { argument: string; call: (t: EmbeddingTable, v: unknown) => unknown; good: number; undefinedOk?: boolean }][] = [
  ['export offset', { argument: 'offset', call: (t, v) => t.exportSync({ offset: v as number }), good: 0, undefinedOk: true }],
  ['export limit', { argument: 'limit', call: (t, v) => t.export({ limit: v as number }), good: 1, undefinedOk: true }],
  ['exportBatches batchSize', { argument: 'batchSize', call: (t, v) => t.exportBatches(v as number).next(), good: 1, undefinedOk: true }],
  ['restrict numReserved', { argument: 'numReserved', call: (t, v) => t.restrictSync(v as number), good: 5 }],
  ['setEpoch', { argument: 'epoch', call: (t, v) => t.setEpoch(v as number), good: 0 }],
  ['applyGradients step', { argument: 'step', call: (t, v) => t.applyGradientsSync(BigInt64Array.from([1n]), Float32Array.from([1, 1]), optimizers.adagrad(), v as number), good: 1 }],
  ['applyGradients step (Promise)', { argument: 'step', call: (t, v) => t.applyGradients(BigInt64Array.from([1n]), Float32Array.from([1, 1]), optimizers.adagrad(), v as number), good: 1 }],
  ['lookupCombined maxNorm', { argument: 'maxNorm', call: (t, v) => t.lookupCombinedSync(RaggedTensor.fromNestedArray([[1n, 2n]]), { maxNorm: v as number }), good: 1, undefinedOk: true }],
];

async function codeOf(fn: () => unknown): Promise<[string, string] | 'ok'> {
  try {
    await fn();
    return 'ok';
  } catch (e) {
    expect(e, String(e)).toBeInstanceOf(EmbeddingError);
    const err = e as EmbeddingError;
    return [err.code, err.message];
  }
}

/** The junk and the code each must give: another JS type -> INVALID_TYPE, NaN -> INVALID_ARGUMENT. */
function junkFor(good: number, nanOk = false, undefinedOk = false, nullOk = false): [unknown, string | 'ok'][] {
  return [
    [String(good), ErrorCodes.INVALID_TYPE], // '8', '0.1'
    [BigInt(Math.trunc(good)), ErrorCodes.INVALID_TYPE],
    [true, ErrorCodes.INVALID_TYPE],
    [{ valueOf: () => good }, ErrorCodes.INVALID_TYPE],
    [undefinedOk ? undefined : null, undefinedOk || nullOk ? 'ok' : ErrorCodes.INVALID_TYPE],
    [NaN, nanOk ? 'ok' : ErrorCodes.INVALID_ARGUMENT],
  ];
}

/** Checks what a call with `junk` gave against `code` ('ok', or the code of an error naming `argument`); true when it was rejected. */
function expectOutcome(got: [string, string] | 'ok', code: string, label: string, argument: string): boolean {
  if (code === 'ok') {
    expect(got, label).toBe('ok');
    return false;
  }
  expect(got, label).not.toBe('ok');
  const [c, message] = got as [string, string];
  expect(c, message).toBe(code);
  expect(message).toContain(`Expected ${argument} `);
  return true;
}

describe('number arguments: another JS type is INVALID_TYPE, a bad number INVALID_ARGUMENT (stop 32 convention)', () => {
  for (const [title, row] of rows) {
    it(title, async () => {
      expect(await codeOf(() => row.call(row.good)), `${title}(${row.good})`).toBe('ok');
      for (const [junk, code] of junkFor(row.good, row.nanOk, row.undefinedOk, row.nullOk)) {
        expectOutcome(await codeOf(() => row.call(junk)), code, `${title}(${String(junk)})`, row.argument);
      }
    });
  }

  for (const [title, m] of methods) {
    it(`EmbeddingTable ${title}`, async () => {
      for (const [junk, code] of junkFor(m.good, false, m.undefinedOk)) {
        const t = table();
        const before = state(t);
        if (expectOutcome(await codeOf(() => m.call(t, junk)), code, `${title}(${String(junk)})`, m.argument)) {
          expect(state(t), `${title}(${String(junk)}) changed the table`).toEqual(before);
        }
        t.dispose();
      }
      const t = table();
      expect(await codeOf(() => m.call(t, m.good))).toBe('ok');
      t.dispose();
    });
  }
});
