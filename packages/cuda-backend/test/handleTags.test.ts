// The two addons compile the same N-API layer. Each tags its table handles with its
// own name and version (cpu-backend's native/cmake/handle_tag.cmake), so a handle of
// one addon passed to the other is refused with INVALID_TYPE instead of running
// through the other module's compiled copy of the table layer.
import { loadAddon, TABLE_FIELDS, TableField } from '@embedstack/cpu-backend';
import { loadCudaAddon } from '@embedstack/cuda-backend';
import { describe, expect, it } from 'vitest';

/** A raw config vector (cpu-backend's typed boundary): a dynamic table of dim 4, uncapped. */
function dynamicDim4(): Float64Array {
  const c = new Float64Array(TABLE_FIELDS);
  c[TableField.dim] = 4;
  c[TableField.initCapacity] = 16;
  c[TableField.maxCapacity] = Infinity;
  return c;
}

describe('table handles are refused by the other addon', () => {
  const cpu = loadAddon().binding!;
  const cudaLoad = loadCudaAddon();
  const cuda = cudaLoad.binding!;

  it('loads both addons', () => {
    expect(cpu, 'cpu addon').not.toBeNull();
    expect(cuda, cudaLoad.reason ?? '').not.toBeNull();
  });

  it('a CPU table handle given to the CUDA addon, and the reverse, is INVALID_TYPE; each works in its own addon', () => {
    const cpuTable = cpu.createTable(dynamicDim4(), new Uint32Array(0), new Float32Array(0), null);
    const cudaTable = cuda.createTable(dynamicDim4(), new Uint32Array(0), new Float32Array(0), null, new Float64Array([0, 0, Infinity, 0]));
    const keys = new BigInt64Array([7n, 9n]);
    const values = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]);
    cpu.upsert(cpuTable, keys, values, null);
    cuda.upsert(cudaTable, keys, values, null);
    expect(cpu.size(cpuTable)).toBe(2);
    expect(cuda.size(cudaTable)).toBe(2);

    for (const [addon, foreign] of [[cuda, cpuTable], [cpu, cudaTable]] as const) {
      expect(() => addon.size(foreign)).toThrow(expect.objectContaining({ code: 'INVALID_TYPE' }));
      expect(() => addon.upsert(foreign, new BigInt64Array([1n]), new Float32Array(4), null)).toThrow(
        expect.objectContaining({ code: 'INVALID_TYPE', message: expect.stringContaining('table handle') }),
      );
    }
    // The refused calls changed nothing.
    expect(cpu.size(cpuTable)).toBe(2);
    expect(cuda.size(cudaTable)).toBe(2);
    cpu.dispose(cpuTable);
    cuda.dispose(cudaTable);
  });
});
