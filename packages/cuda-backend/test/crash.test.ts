import { loadCudaAddon } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';
import { expectMalformedCallsCoded } from '../../cpu-backend/test/fixtures/malformed.js';

// cpu-backend's malformed-call fixture: the addons share their N-API layer and so
// their typed boundary; thrown at this addon's raw functions (host mode tables).

/** A valid raw config vector: a dynamic table of dim 4. */
function dim4Config(): Float64Array {
  const config = new Float64Array(13);
  config[1] = 4;
  config[4] = 16;
  config[5] = Infinity;
  return config;
}

describe('cuda backend: no input crashes the process', () => {
  it('a child survives thousands of malformed raw addon calls, each a coded error', () => {
    const load = loadCudaAddon();
    expect(load.binding, load.reason ?? '').not.toBeNull();
    expectMalformedCallsCoded(load.path!, [1, 5]);
  }, 120_000);

  it('rejects a malformed placement vector with a coded error', () => {
    const b = loadCudaAddon().binding!;
    const config = dim4Config();
    const make = (placement: unknown) => () =>
      b.createTable(config, new Uint32Array(0), new Float32Array(0), null, placement as Float64Array);
    for (const [bad, code] of [
      [new Float64Array(2), 'SHAPE_MISMATCH'],
      [new Float64Array([0, 0, Infinity]), 'SHAPE_MISMATCH'], // the layout before poolReleaseThreshold
      [new Float64Array([4, 0, Infinity, 0]), 'INVALID_ARGUMENT'],
      [new Float64Array([1.5, 0, Infinity, 0]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, -1, Infinity, 0]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, -5, 0]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, NaN, 0]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, Infinity, -1]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, Infinity, 0.5]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, Infinity, NaN]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, Infinity, -Infinity]), 'INVALID_ARGUMENT'],
      [new Float64Array([0, 0, Infinity, 2 ** 53]), 'INVALID_ARGUMENT'],
      [new Float32Array(4), 'INVALID_TYPE'],
      ['x', 'INVALID_TYPE'],
    ] as const) {
      expect(make(bad)).toThrow(expect.objectContaining({ code }));
    }
  });

  it('its own functions (memoryBreakdown, onDevice, findKernelSeconds) give coded errors for junk', () => {
    const b = loadCudaAddon().binding!;
    const config = dim4Config();
    const live = b.createTable(config, new Uint32Array(0), new Float32Array(0), null, null);
    const dead = b.createTable(config, new Uint32Array(0), new Float32Array(0), null, null);
    b.dispose(dead);
    const junk: unknown[] = [undefined, null, 0, -1, 1.5, NaN, 'x', {}, [], new Float64Array(3), BigInt64Array.of(1n), () => 0, Symbol('s'), 2n ** 64n];
    const calls: [string, (x: unknown) => unknown][] = [
      ['memoryBreakdown(junk)', (x) => b.memoryBreakdown(x as never)],
      ['onDevice(junk)', (x) => b.onDevice(x as never)],
      ['findKernelSeconds(junk, keys, 1)', (x) => b.findKernelSeconds(x as never, BigInt64Array.of(1n), 1)],
      ['findKernelSeconds(t, junk, 1)', (x) => b.findKernelSeconds(live, x as never, 1)],
      ['findKernelSeconds(t, keys, junk)', (x) => b.findKernelSeconds(live, BigInt64Array.of(1n), x as never)],
      ['findKernelSeconds(disposed, keys, 1)', () => b.findKernelSeconds(dead, BigInt64Array.of(1n), 1)],
    ];
    for (const [what, call] of calls) {
      for (const x of junk) {
        if (what === 'findKernelSeconds(t, junk, 1)' && x instanceof BigInt64Array) continue; // valid keys
        let err: unknown;
        try {
          call(x);
        } catch (e) {
          err = e;
        }
        expect(err, `${what} with ${String(typeof x === 'symbol' ? 'a symbol' : x)}`).toEqual(
          expect.objectContaining({ code: expect.stringMatching(/^(INVALID_TYPE|INVALID_ARGUMENT|DISPOSED|SHAPE_MISMATCH)$/) }),
        );
      }
    }
    b.dispose(live);
  });
});
