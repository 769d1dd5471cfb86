import { EmbeddingError, resolveTableOptions } from '@embedstack/core';
import { cpuBackend, encodeTable, loadAddon, OPTIMIZER_FIELDS, PLAN_FIELDS } from '@embedstack/cpu-backend';
import { describe, expect, it } from 'vitest';
import { expectMalformedCallsCoded } from './fixtures/malformed.js';

describe('cpu backend: no input crashes the process', () => {
  it('a child survives thousands of malformed raw addon calls, each a coded error', () => {
    const load = loadAddon();
    expect(load.binding, load.reason ?? '').not.toBeNull();
    expectMalformedCallsCoded(load.path!, [1, 7]);
  }, 120_000);
});

describe('cpu backend: native messages print numbers as JS does', () => {
  it('NaN, infinities and large integers in config, plan, maxNorm and optimizer messages', () => {
    const b = loadAddon().binding as unknown as Record<string, (...a: unknown[]) => unknown>;
    const e = encodeTable(resolveTableOptions({ dim: 4 }));
    const message = (fn: () => unknown): string => {
      try {
        fn();
      } catch (err) {
        return (err as Error).message;
      }
      return 'returned';
    };
    const config = Float64Array.from(e.config);
    config[1] = NaN; // TableField.dim
    expect(message(() => b.createTable!(config, e.slotWidths, e.slotInitial, e.initValues))).toMatch(/received NaN$/);
    const h = b.createTable!(e.config, e.slotWidths, e.slotInitial, e.initValues);
    const plan = new Float64Array(PLAN_FIELDS);
    plan[0] = 1;
    plan[1] = -Infinity;
    expect(message(() => b.findPlanned!(h, new BigInt64Array(1), plan, new Float32Array(4), new Uint8Array(1)))).toBe(
      'Expected plan.numShards to be an integer in [1, 1048576] but received -Infinity',
    );
    const bag = [new Int32Array([0, 1]), new BigInt64Array(1), null];
    expect(message(() => b.lookupCombined!(h, ...bag, 0, NaN, false))).toBe('Expected maxNorm to be a finite number >= 0 (0 = no clipping) but received NaN');
    const opt = new Float64Array(OPTIMIZER_FIELDS);
    opt[0] = 1e21;
    expect(message(() => b.applyGradients!(h, new BigInt64Array(1), new Float32Array(4), opt))).toMatch(/received 1e\+21$/);
  });
});

describe('cpu backend: CpuBackend.createTable with junk options', () => {
  it('is INVALID_TYPE naming options (it threw raw TypeErrors)', () => {
    for (const junk of [undefined, null, 3, {}, { dim: 4 }, { ...resolveTableOptions({ dim: 4 }), slots: null }]) {
      let error: unknown;
      try {
        cpuBackend.createTable(junk as never);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(EmbeddingError);
      expect((error as EmbeddingError).code).toBe('INVALID_TYPE');
      expect((error as EmbeddingError).message).toContain('options');
    }
  });
});
