import { beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { expectError, uniqueName, useTestBackend } from '../test/setup.js';

beforeAll(async () => {
  await useTestBackend();
});

/** The error `fn` throws (sync or async), with its code and argument. */
async function errorOf(fn: () => unknown): Promise<Error & { code?: string; argument?: string }> {
  try {
    await fn();
  } catch (e) {
    return e as Error & { code?: string; argument?: string };
  }
  throw new Error('expected an error, got none');
}

describe('errors name the argument the user wrote (review32c #9)', () => {
  it("FTRL's l1RegularizationStrength / l2RegularizationStrength, not core's l1 / l2", async () => {
    for (const key of ['l1RegularizationStrength', 'l2RegularizationStrength']) {
      const e = await errorOf(() => new de.optimizers.FTRL({ [key]: -1 }));
      expect([e.code, e.argument]).toEqual(['INVALID_ARGUMENT', key]);
      expect(e.message).toBe(`Expected ${key} to be a number >= 0 but received -1`);
    }
    expect(new de.optimizers.FTRL({ l1RegularizationStrength: 0.5, l2RegularizationStrength: 0.25 }).l1RegularizationStrength).toBe(0.5);
  });

  it("the layer's initCapacity, not the Variable's initSize", async () => {
    const e = await errorOf(() => new de.layers.Embedding({ embeddingSize: 2, initCapacity: -1, name: uniqueName('ic') }));
    expect([e.code, e.argument]).toEqual(['INVALID_ARGUMENT', 'initCapacity']);
    const t = await errorOf(() => new de.layers.Embedding({ embeddingSize: 2, initCapacity: '4' as unknown as number, name: uniqueName('ic') }));
    expect([t.code, t.argument]).toEqual(['INVALID_TYPE', 'initCapacity']);
  });
});

describe('null means omitted (review32c #10)', () => {
  it("layers.Embedding({ initializer: null }) draws normal(0, 0.05) rows, as when it is omitted", async () => {
    const name = uniqueName('nul');
    const omitted = new de.layers.Embedding({ embeddingSize: 3, name });
    const nulled = new de.layers.Embedding({ embeddingSize: 3, name, initializer: null as unknown as undefined });
    const a = Array.from((await omitted.call([7n])).data);
    const b = Array.from((await nulled.call([7n])).data);
    expect(b).toEqual(a);
    expect(a.some((x) => x !== 0)).toBe(true);
  });

  it('Variable({ sharedName: null }) is the default shared name', () => {
    const name = uniqueName('sn');
    expect(new de.Variable({ dim: 1, name, sharedName: null }).sharedName).toBe(`shared_name.${name}`);
  });
});

describe('smaller cases (review32c #11)', () => {
  it("getVariable(name, { name: other }) is refused, and creates nothing", async () => {
    const name = uniqueName('gv');
    await expectError(() => de.getVariable(name, { dim: 2, name: 'other' }), 'INVALID_ARGUMENT', 'options.name', '"other"');
    const v = de.getVariable(name, { dim: 2, name }); // not ALREADY_EXISTS: nothing was registered
    expect([v.name, v.dim]).toEqual([name, 2]);
    v.dispose();
  });

  it('FieldWiseEmbedding: an error of slotMapFn is an INVALID_ARGUMENT naming slotMapFn(ids)[i], with the cause', async () => {
    const layer = new de.layers.FieldWiseEmbedding({ embeddingSize: 1, nslots: 3, slotMapFn: ((k: bigint) => k % (3 as unknown as bigint)) as de.SlotMapFn, name: uniqueName('fw') });
    const e = await errorOf(() => layer.call([4n, 5n]));
    expect([e.code, e.argument]).toEqual(['INVALID_ARGUMENT', 'slotMapFn(ids)[0]']);
    expect(e.message).toContain('ids of int64 layers are bigint');
    expect(e.cause).toBeInstanceOf(TypeError);
    const boom = new RangeError('no field for 5');
    const picky = new de.layers.FieldWiseEmbedding({
      embeddingSize: 1,
      nslots: 3,
      slotMapFn: (k: bigint | number) => {
        if (k === 5n) throw boom;
        return 0;
      },
      name: uniqueName('fw'),
    });
    const p = await errorOf(() => picky.call([4n, 5n]));
    expect([p.code, p.argument, p.cause]).toEqual(['INVALID_ARGUMENT', 'slotMapFn(ids)[1]', boom]);
  });

  it('embeddingLookup on a disposed variable is refused (DISPOSED, as core\'s tables) and registers no trainable', async () => {
    const core = await import('@embedstack/core');
    const name = uniqueName('disp');
    const v = new de.Variable({ dim: 1, name });
    v.dispose();
    const e = await expectError(de.embeddingLookup(v, [1n], { name: 'yy' }), 'DISPOSED', 'disposed');
    expect(e).toBeInstanceOf(core.DisposedError);
    expect(e.message).toBe(`Variable "${name}" was disposed`);
    await expectError(de.embeddingLookupSparse(v, new core.SparseTensor([[0, 0]], [1n], [1, 1]), null, { name: 'zz' }), 'DISPOSED');
    expect(await errorOf(() => v.lookup([1n]))).toBeInstanceOf(core.DisposedError);
    expect([v.getTrainableByName('yy'), v.getTrainableByName('zz')]).toEqual([null, null]);
  });
});

describe('error codes: a wrong JS type is INVALID_TYPE, a bad value of the right type INVALID_ARGUMENT', () => {
  const cases: [string, () => unknown, string, string][] = [
    ['Variable dim "2"', () => new de.Variable({ dim: '2' as unknown as number }), 'INVALID_TYPE', 'dim'],
    ['Variable dim 0', () => new de.Variable({ dim: 0 }), 'INVALID_ARGUMENT', 'dim'],
    ["Variable initializer 'zeros'", () => new de.Variable({ initializer: 'zeros' as unknown as number }), 'INVALID_ARGUMENT', 'initializer'],
    ['layer embeddingSize "2"', () => new de.layers.Embedding({ embeddingSize: '2' as unknown as number }), 'INVALID_TYPE', 'embeddingSize'],
    ['layer embeddingSize 0', () => new de.layers.Embedding({ embeddingSize: 0 }), 'INVALID_ARGUMENT', 'embeddingSize'],
    ['FieldWise nslots 0', () => new de.layers.FieldWiseEmbedding({ embeddingSize: 1, nslots: 0, slotMapFn: () => 0 }), 'INVALID_ARGUMENT', 'nslots'],
    ['learningRate "0.1"', () => new de.optimizers.SGD({ learningRate: '0.1' as unknown as number }), 'INVALID_TYPE', 'learningRate'],
    ['learningRate -1', () => new de.optimizers.SGD({ learningRate: -1 }), 'INVALID_ARGUMENT', 'learningRate'],
    ['clipvalue "1"', () => new de.optimizers.SGD({ clipvalue: '1' as unknown as number }), 'INVALID_TYPE', 'clipvalue'],
    ['Adam beta1 "0.9"', () => new de.optimizers.Adam({ beta1: '0.9' as unknown as number }), 'INVALID_TYPE', 'beta1'],
    ['Adam beta1 NaN', () => new de.optimizers.Adam({ beta1: NaN }), 'INVALID_ARGUMENT', 'beta1'],
  ];
  for (const [what, fn, code, argument] of cases) {
    it(what, async () => {
      const e = await errorOf(fn);
      expect([e.code, e.argument]).toEqual([code, argument]);
    });
  }
});
