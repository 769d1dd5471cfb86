import { CpuRawTable, fromNative, type NativeTableFunctions, type NativeTableHandle } from '@embedstack/cpu-backend';
import type { ResolvedTableOptions } from '@embedstack/core';
import type { CudaBinding } from './native.js';

/** Where a table's bytes are. */
export interface MemoryBreakdown {
  /** Bytes in device memory (HBM): keys, scores, index and the rows within the HBM budget. Host mode: the emulated HBM. */
  device: number;
  /** Bytes of rows spilled to pinned host memory (past the HBM budget). */
  pinnedHost: number;
}

/**
 * The RawTable of the CUDA backend. The addon's table functions are the CPU
 * backend's shared N-API layer, so the CPU backend's native-table adapter
 * (CpuRawTable: sync calls on the calling thread, large async calls on the addon's
 * thread pool, coded errors) drives it unchanged; this class adds the placement (host mode
 * or a device, with its HBM budget) and the memory split. Memory: device memory
 * (or host memory in host mode) until dispose().
 */
export class CudaRawTable extends CpuRawTable {
  readonly #binding: CudaBinding;
  readonly #handle: NativeTableHandle;

  /** placement: Float64Array laid out by PlacementField (native.ts). */
  constructor(binding: CudaBinding, options: ResolvedTableOptions, placement: Float64Array) {
    let handle: NativeTableHandle | undefined;
    const placed: NativeTableFunctions = {
      ...binding,
      createTable: (config, slotWidths, slotInitial, initValues) => {
        handle = binding.createTable(config, slotWidths, slotInitial, initValues, placement);
        return handle;
      },
    };
    super(placed, options);
    this.#binding = binding;
    this.#handle = handle as NativeTableHandle;
  }

  /** memoryUsage() split by where the bytes live. */
  memoryBreakdown(): MemoryBreakdown {
    const [device, pinnedHost] = this.#native(() => this.#binding.memoryBreakdown(this.#handle));
    return { device, pinnedHost };
  }

  /**
   * The find kernel's own rate: seconds per call over `keys` (the table's key dtype)
   * kept in the table's memory with outputs left there, averaged over `iterations`.
   * What a caller whose keys and results stay on the GPU sees (no PCIe copies). The kernel
   * scores its reads as find does; the keys' scores and the table's clock are put back
   * afterwards, so a measurement leaves the table as it was (it holds the table's write lock
   * meanwhile).
   * @throws UNSUPPORTED for static tables
   */
  findKernelSeconds(keys: BigInt64Array | Int32Array, iterations = 10): number {
    return this.#native(() => this.#binding.findKernelSeconds(this.#handle, keys, iterations));
  }

  /** True for a table in GPU memory, false for the host mode. */
  get onDevice(): boolean {
    return this.#native(() => this.#binding.onDevice(this.#handle));
  }

  /** A native call, its failure as core's EmbeddingError of the same code. */
  #native<R>(fn: () => R): R {
    try {
      return fn();
    } catch (e) {
      throw fromNative(e);
    }
  }
}
