import type { NativeBinding, NativeInfo, NativeTableHandle } from '@embedstack/cpu-backend';


/** What the addon was built with. */
export interface CudaNativeInfo {
  /** Threads of the host pool (host mode kernels and host-side work). */
  threads: number;
  /** Hardware threads the machine reports (std::thread::hardware_concurrency). */
  hardwareConcurrency: number;
  /** N-API version the addon was built against. */
  napiVersion: number;
  /** Built with nvcc: device kernels present. */
  deviceCode: boolean;
  /** CUDA architectures compiled in ("80,90"), empty for host-only builds. */
  architectures: string;
  /**
   * This addon's result cache (cpu-backend's, compiled in: results of 1 MiB or more that
   * the addon allocates, in host memory). Its own instance, apart from the CPU addon's; the
   * same cap (EMBEDSTACK_CPU_RESULT_CACHE_MB). Absent from an addon built before it.
   */
  resultCache?: NativeInfo['resultCache'];
}

/** One CUDA device as the addon's detection reports it. */
export interface NativeDevice {
  /** CUDA device ordinal (0-based). */
  ordinal: number;
  /** Device name (cudaDeviceProp.name). */
  name: string;
  /** Bytes of device memory. */
  totalMemory: number;
  /** "8.0", "9.0", ... */
  computeCapability: string;
  /** Number of streaming multiprocessors. */
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
  /** CUDA driver version (same encoding; 0 = no driver). */
  driverVersion: number;
  /** CUDA architectures compiled in ("80,90"), empty for host-only builds. */
  architectures: string;
  /** The devices found (empty without a driver or GPU). */
  devices: NativeDevice[];
}

/**
 * The typed boundary of the CUDA backend's addon (`build/Release/embedstack_cuda.node`).
 * Its table functions are the CPU backend's (the same N-API layer is compiled into
 * both addons: the same typed arrays, Float64Array "structs", validation and coded
 * errors; see @embedstack/cpu-backend's NativeBinding), so this interface adds only
 * what differs: createTable's placement, device detection and the memory split.
 */
export interface CudaBinding extends Omit<NativeBinding, 'info' | 'createTable' | 'abiFields'> {
  /** What the addon was built with. */
  info(): CudaNativeInfo;
  /** Lengths of the config, optimizer, plan and placement vectors this build expects. */
  readonly abiFields: {
    /** Length of the table config vector. */
    table: number;
    /** Length of the optimizer vector. */
    optimizer: number;
    /** Length of the plan vector. */
    plan: number;
    /** Length of the placement vector (PLACEMENT_FIELDS). */
    placement: number;
  };
  /**
   * As the CPU addon's createTable, plus `placement` (PlacementField layout: device 0/1
   * (2 / 3: an emulated device, host memory through the device protocol, for tests),
   * ordinal, HBM budget in bytes or Infinity, memory pool release threshold in bytes or
   * Infinity); null or omitted: host mode.
   * @throws FAILED_PRECONDITION (the detection's reason) for a device placement without a usable device
   */
  createTable(
    config: Float64Array,
    slotWidths: Uint32Array,
    slotInitial: Float32Array,
    initValues: Float32Array | null,
    placement?: Float64Array | null,
  ): NativeTableHandle;
  /** Device detection (done once per process; later calls return the same facts). */
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
export const PlacementField = {
  /**
   * 1: the table lives on a CUDA device; 0: host mode; 2 / 3: an emulated device (a test aid:
   * host memory used through the device protocol, copies and kernels queued until the host
   * waits; 3 also runs each launch's items and lanes in reverse order).
   */
  device: 0,
  /** CUDA device ordinal. */
  ordinal: 1,
  /** Bytes of rows kept in device memory (Infinity: all). */
  hbmBudget: 2,
  /** Bytes of freed device memory the table's memory pool keeps mapped (Infinity: all); device mode only. */
  poolReleaseThreshold: 3,
} as const;
/** Length of the placement vector (one slot per {@link PlacementField}). */
export const PLACEMENT_FIELDS = 4;
