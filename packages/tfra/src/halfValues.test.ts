import { getBackend } from '@embedstack/core';
import { beforeAll, describe, expect, it } from 'vitest';
import * as de from './index.js';
import { expectError, rowsOf, uniqueName, useTestBackend } from '../test/setup.js';

let offered: readonly string[] = [];
beforeAll(async () => {
  offered = getBackend(await useTestBackend()).capabilities().storageDtypes ?? ['float32'];
});

// Rounding written out for the values used here: float16 keeps 11 significant bits, bfloat16 8.
// 0.1 -> float16 0.0999755859375, bfloat16 0.10009765625; 1 + 2^-9 is a tie below 1 + 2^-8 in
// bfloat16 (-> 1) and exact in float16; 300.3 -> float16 300.25, bfloat16 300.
const ROW = [0.1, 1 + 2 ** -9, 300.3];
const STORED = { float16: [0.0999755859375, 1 + 2 ** -9, 300.25], bfloat16: [0.10009765625, 1, 300] };

describe("Variable valueDtype: TFRA's half types", () => {
  for (const valueDtype of ['float16', 'bfloat16'] as const) {
    it(`${valueDtype}: shards store 2-byte values (rounded to nearest-even), lookups return float32 (UNSUPPORTED where the backend stores float32 only)`, async () => {
      if (!offered.includes(valueDtype)) {
        await expectError(() => new de.Variable({ dim: 3, valueDtype, name: uniqueName() }), 'UNSUPPORTED', 'storageDtype');
        return;
      }
      const v = new de.Variable({ dim: 3, valueDtype, name: uniqueName(), devices: ['cpu:0', 'cpu:1'] });
      expect(v.valueDtype).toBe(valueDtype);
      for (const t of v.tables) expect(t.storageDtype).toBe(valueDtype);
      await v.upsert([1n, 2n], new Float32Array([...ROW, ...ROW.map((x) => -x)]));
      const out = await v.lookup([2n, 1n, 3n]);
      expect(out.dtype).toBe('float32');
      expect(rowsOf(out.data, 3)).toEqual([STORED[valueDtype].map((x) => -x), STORED[valueDtype], [0, 0, 0]]);
      const wide = new de.Variable({ dim: 3, name: uniqueName(), devices: ['cpu:0', 'cpu:1'] });
      await wide.upsert([1n, 2n], new Float32Array([...ROW, ...ROW]));
      const bytes = (x: de.AnyVariable) => x.tables.reduce((a, t) => a + t.memoryUsage(), 0);
      expect(bytes(v)).toBeLessThan(bytes(wide));
    });
  }

  it('an unknown valueDtype is INVALID_TYPE naming valueDtype', async () => {
    for (const bad of ['float64', 'half', 'int8']) {
      await expectError(() => new de.Variable({ valueDtype: bad as 'float16' }), 'INVALID_TYPE', 'valueDtype');
    }
  });
});
