// The device memory pool's release threshold (CudaBackendOptions.poolReleaseThresholdBytes):
// its validation, its default, and what reaches the addon's placement vector. No GPU here:
// a fake device status stands in for one, and the table itself is made in host mode.
import { ErrorCodes, resolveTableOptions } from '@embedstack/core';
import { type CudaAddonLoad, CudaBackend, type CudaBinding, cudaHostBackend, defaultPoolReleaseThreshold, loadCudaAddon, PlacementField } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** The real addon behind a fake device of `totalMemory` bytes; records each createTable's placement, makes the table in host mode. */
function fakeDevice(totalMemory: number, placements: Float64Array[]): () => CudaAddonLoad {
  const load = loadCudaAddon();
  const b = load.binding!;
  const binding: CudaBinding = {
    ...b,
    deviceStatus: () => ({
      ...b.deviceStatus(),
      compiled: true,
      usable: true,
      reason: '',
      devices: [0, 1].map((ordinal) => ({ ordinal, name: 'fake', totalMemory: totalMemory * (ordinal + 1), computeCapability: '8.0', multiprocessors: 108 })),
    }),
    createTable: (config, slotWidths, slotInitial, initValues, placement) => {
      placements.push(Float64Array.from(placement!));
      const host = Float64Array.from(placement!);
      host[PlacementField.device] = 0;
      return b.createTable(config, slotWidths, slotInitial, initValues, host);
    },
  };
  return () => ({ ...load, binding });
}

describe('cuda backend: the memory pool release threshold', () => {
  it('defaults to 1/16 of the device memory in whole MiB, at most 1 GiB', () => {
    expect(defaultPoolReleaseThreshold(0)).toBe(0);
    expect(defaultPoolReleaseThreshold(16 * MiB - 1)).toBe(0);
    expect(defaultPoolReleaseThreshold(8 * GiB)).toBe(512 * MiB);
    expect(defaultPoolReleaseThreshold(6 * GiB + 5)).toBe(384 * MiB);
    expect(defaultPoolReleaseThreshold(16 * GiB)).toBe(GiB);
    expect(defaultPoolReleaseThreshold(80 * GiB)).toBe(GiB);
    expect(defaultPoolReleaseThreshold(40 * 10 ** 9)).toBe(GiB);
    expect(defaultPoolReleaseThreshold(12 * 10 ** 9)).toBe(715 * MiB); // 750e6 B = 715.3 MiB
    for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 53, '8', null, undefined, 8n]) {
      expect(() => defaultPoolReleaseThreshold(bad as never), String(bad)).toThrow(
        expect.objectContaining({ code: expect.stringMatching(/^(INVALID_ARGUMENT|INVALID_TYPE)$/), message: expect.stringContaining('deviceMemoryBytes') }),
      );
    }
  });

  it('refuses anything but a byte count or Infinity, naming the option', () => {
    for (const bad of [-1, 0.5, NaN, -Infinity, 2 ** 53, '1024', null, 5n, {}, true]) {
      let err: unknown;
      try {
        new CudaBackend({ mode: 'host', poolReleaseThresholdBytes: bad as never });
      } catch (e) {
        err = e;
      }
      expect(err, String(bad)).toEqual(expect.objectContaining({ code: ErrorCodes.INVALID_ARGUMENT, message: expect.stringContaining('options.poolReleaseThresholdBytes') }));
    }
    for (const good of [0, 1, 512 * MiB, 2 ** 53 - 1, Infinity]) expect(() => new CudaBackend({ mode: 'host', poolReleaseThresholdBytes: good })).not.toThrow();
  });

  it("reaches the addon's placement vector: the option, else the default of the table's device", () => {
    const placements: Float64Array[] = [];
    const load = fakeDevice(24 * GiB, placements);
    const backends = [
      new CudaBackend({ name: 'pool-default', load }),
      new CudaBackend({ name: 'pool-default-dev1', device: 1, load }),
      new CudaBackend({ name: 'pool-small', device: 1, poolReleaseThresholdBytes: 3 * MiB, load }),
      new CudaBackend({ name: 'pool-all', poolReleaseThresholdBytes: Infinity, load }),
      new CudaBackend({ name: 'pool-none', poolReleaseThresholdBytes: 0, load }),
    ];
    const expected = [GiB, GiB, 3 * MiB, Infinity, 0];
    backends.forEach((backend, i) => {
      expect(backend.isUsable()).toBe(true);
      expect(backend.poolReleaseThreshold()).toBe(expected[i]);
      const t = backend.createTable(resolveTableOptions({ dim: 2 }));
      t.dispose();
    });
    expect(placements.map((p) => [p[PlacementField.device], p[PlacementField.ordinal], p[PlacementField.poolReleaseThreshold]])).toEqual([
      [1, 0, GiB],
      [1, 1, GiB],
      [1, 1, 3 * MiB],
      [1, 0, Infinity],
      [1, 0, 0],
    ]);
    const small = fakeDevice(4 * GiB, []);
    expect(new CudaBackend({ name: 'pool-4g', load: small }).poolReleaseThreshold()).toBe(256 * MiB);
  });

  it('is 0 (no pool) in host mode and on a machine without a usable device', () => {
    expect(cudaHostBackend.poolReleaseThreshold()).toBe(0);
    expect(new CudaBackend({ mode: 'host', poolReleaseThresholdBytes: 5 * MiB }).poolReleaseThreshold()).toBe(0);
    const none = new CudaBackend({ name: 'pool-unusable', poolReleaseThresholdBytes: 5 * MiB, load: () => ({ binding: null, path: null, attempts: [], reason: 'no addon', build: null }) });
    expect(none.isUsable()).toBe(false);
    expect(none.poolReleaseThreshold()).toBe(0);
  });
});
