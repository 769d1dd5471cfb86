import type { NativeBinding, NativeTableHandle } from '@embedstack/cpu-backend';

/**
 * The typed boundary of the CUDA backend's addon (`build/Release/embedstack_cuda.node`).
 * Its table functions are the CPU backend's (the same N-API layer is compiled into
 * both addons: the same typed arrays, Float64Array "structs", validation and coded
 * errors; see @embedstack/cpu-backend's NativeBinding), so this interface adds only
 * what differs: createTable's placement, device detection and the memory split.
 */

/** What the addon was built with. */
export interface CudaNativeInfo {
  /** Threads of the host pool (host mode kernels and host-side work). */
  threads: number;
  hardwareConcurrency: number;
  napiVersion: number;
  /** Built with nvcc: device kernels present. */
  deviceCode: boolean;
  /** CUDA architectures compiled in ("80,90"), empty for host-only builds. */
  architectures: string;
}

export interface NativeDevice {
  ordinal: number;
  name: string;
  /** Bytes of device memory. */
  totalMemory: number;
  /** "8.0", "9.0", ... */
  computeCapability: string;
  multiprocessors: number;
}

/** Device detection, done once per process (cudaGetDeviceCount and friends). */
export interface NativeDeviceStatus {
  /** Built with nvcc. */
  compiled: boolean;
  /** At least one device runs this build's kernels. */
  usable: boolean;
  /** Why not usable, with the fix ('' when usable). */
  reason: string;
  /** CUDA runtime and driver versions (1000 * major + 10 * minor; driver 0 = no driver). */
  runtimeVersion: number;
  driverVersion: number;
  architectures: string;
  devices: NativeDevice[];
}

export interface CudaBinding extends Omit<NativeBinding, 'info' | 'createTable' | 'abiFields'> {
  info(): CudaNativeInfo;
  readonly abiFields: { table: number; optimizer: number; plan: number; placement: number };
  /**
   * As the CPU addon's createTable, plus `placement` (PlacementField layout: device 0/1,
   * ordinal, HBM budget in bytes or Infinity); null or omitted: host mode.
   * @throws FAILED_PRECONDITION (the detection's reason) for a device placement without a usable device
   */
  createTable(
    config: Float64Array,
    slotWidths: Uint32Array,
    slotInitial: Float32Array,
    initValues: Float32Array | null,
    placement?: Float64Array | null,
  ): NativeTableHandle;
  deviceStatus(): NativeDeviceStatus;
  /** [bytes in device memory (host mode: the emulated HBM), bytes in pinned host memory]. */
  memoryBreakdown(t: NativeTableHandle): [number, number];
  /** Whether the table lives on a CUDA device (false: host mode). */
  onDevice(t: NativeTableHandle): boolean;
  /**
   * Seconds per find kernel over `keys` staged once in the table's memory, outputs to
   * device scratch, averaged over `iterations` (1..10000) after a warm-up. Dynamic tables.
   */
  findKernelSeconds(t: NativeTableHandle, keys: BigInt64Array | Int32Array, iterations: number): number;
}

/** createTable's placement vector (native/binding/addon.cc). */
export const PlacementField = { device: 0, ordinal: 1, hbmBudget: 2 } as const;
export const PLACEMENT_FIELDS = 3;
