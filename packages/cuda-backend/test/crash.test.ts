import { loadCudaAddon } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';
import { expectMalformedCallsCoded } from '../../cpu-backend/test/fixtures/malformed.js';

// cpu-backend's malformed-call fixture: the addons share their N-API layer and so
// their typed boundary; thrown at this addon's raw functions (host mode tables).
describe('cuda backend: no input crashes the process', () => {
  it('a child survives thousands of malformed raw addon calls, each a coded error', () => {
    const load = loadCudaAddon();
    expect(load.binding, load.reason ?? '').not.toBeNull();
    expectMalformedCallsCoded(load.path!, [1, 5]);
  }, 120_000);

  it('rejects a malformed placement vector with a coded error', () => {
    const b = loadCudaAddon().binding!;
    const config = new Float64Array(13);
    config[1] = 4;
    config[4] = 16;
    config[5] = Infinity;
    const make = (placement: unknown) => () =>
      b.createTable(config, new Uint32Array(0), new Float32Array(0), null, placement as Float64Array);
    for (const [bad, code] of [
      [new Float64Array(2), 'SHAPE_MISMATCH'],
      [new Float64Array([2, 0, Infinity]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, -1, Infinity]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, -5]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, NaN]), 'INVALID_ARGUMENT'],
      [new Float32Array(3), 'INVALID_TYPE'],
      ['x', 'INVALID_TYPE'],
    ] as const) {
      expect(make(bad)).toThrow(expect.objectContaining({ code }));
    }
  });
});
