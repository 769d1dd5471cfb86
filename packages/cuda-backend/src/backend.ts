import {
  type BackendCapabilities,
  BackendUnavailableError,
  checkInteger,
  checkOptions,
  type DeviceInfo,
  type EmbeddingBackend,
  InvalidTypeError,
  invalidParameter,
  type RawTable,
  type ResolvedTableOptions,
} from '@embedstack/core';
import { cpus } from 'node:os';
import { CudaRawTable, type MemoryBreakdown } from './cudaTable.js';
import { backendLoad } from '@embedstack/cpu-backend';
import { CUDA_PACKAGE, type CudaAddonLoad, cudaAddon, prebuiltDeviceReason } from './loader.js';
import { PLACEMENT_FIELDS, PlacementField } from './native.js';

/** Where a CUDA backend's tables live and its kernels run: `'device'` (GPU memory, GPU kernels) or `'host'` (the same kernels on CPU threads, host memory). */
export type CudaMode = 'device' | 'host';

/** Options of the {@link CudaBackend} constructor. Every field is optional. */
export interface CudaBackendOptions {
  /**
   * 'device' (default): tables in GPU memory, kernels on the GPU; usable only when a
   * CUDA device runs this build's kernels. 'host': the host mode, the same kernels
   * run by the host grid launcher on CPU threads, tables in host memory (for tests
   * and machines without a GPU; its speed is not a GPU figure).
   */
  mode?: CudaMode;
  /** Registry name. Default 'cuda' (device mode) or 'cuda-host' (host mode). */
  name?: string;
  /** CUDA device ordinal (device mode). Default 0. */
  device?: number;
  /**
   * Bytes of each table's rows (values and optimizer slots) kept in device memory;
   * rows past the budget live in pinned host memory that kernels reach over the bus
   * (HierarchicalKV's hybrid mode). Default Infinity: every row in HBM.
   */
  hbmBudgetBytes?: number;
  /**
   * Bytes of freed device memory kept mapped for reuse (device mode): the release threshold
   * (`cudaMemPoolAttrReleaseThreshold`) of the memory pool the tables' device memory comes
   * from. A call's scratch (staged keys and values, dedupe and sort buffers) is freed when
   * the call returns; with threshold 0, CUDA's default, every stream sync gives it back to
   * the driver and the next call maps it again. An integer >= 0 or Infinity (keep all).
   * Default: {@link defaultPoolReleaseThreshold} of the device's memory (1/16 of it, at most
   * 1 GiB). The cached bytes are not in memoryReport(); an allocation that runs out of
   * memory gives them back and is tried once more. Tables of backends with the same device
   * and threshold share one pool (the addon's own, never the device's default pool, which
   * other CUDA libraries in the process share). Ignored in host mode and on devices without
   * memory pools.
   */
  poolReleaseThresholdBytes?: number;
  /** How the addon is loaded (tests point it elsewhere). Default: the process-wide load. */
  load?: () => CudaAddonLoad;
}

/** The most {@link defaultPoolReleaseThreshold} keeps: 1 GiB. */
const POOL_RELEASE_CAP = 2 ** 30;

/**
 * The default memory pool release threshold of a device with `deviceMemoryBytes` of memory:
 * 1/16 of it, at most 1 GiB (rounded down to whole MiB). Large enough to keep the scratch of
 * calls of a million keys at dim 64 (roughly 0.3 GiB for a find or a training step) mapped
 * between calls, small enough that the cache never holds back more than 1/16 of the memory
 * the tables grow into (and it is given back when an allocation runs short).
 * @throws InvalidArgumentError unless deviceMemoryBytes is a byte count (integer >= 0)
 */
export function defaultPoolReleaseThreshold(deviceMemoryBytes: number): number {
  if (typeof deviceMemoryBytes !== 'number') throw invalidParameter('deviceMemoryBytes', 'a byte count (integer >= 0)', deviceMemoryBytes, InvalidTypeError);
  if (!Number.isSafeInteger(deviceMemoryBytes) || deviceMemoryBytes < 0) throw invalidParameter('deviceMemoryBytes', 'a byte count (integer >= 0)', deviceMemoryBytes);
  const mib = 2 ** 20;
  return Math.min(POOL_RELEASE_CAP, Math.floor(deviceMemoryBytes / 16 / mib) * mib);
}

/** A byte-count option: an integer >= 0 or Infinity. */
function bytesOption(value: unknown, name: string): number {
  if (typeof value !== 'number' || !(value === Infinity || (Number.isSafeInteger(value) && value >= 0))) throw invalidParameter(name, 'a byte count (integer >= 0) or Infinity', value);
  return value;
}

/** What a backend's live tables hold, by memory kind. */
export interface MemoryReport extends MemoryBreakdown {
  /** Number of live (not disposed) tables counted. */
  tables: number;
}

/**
 * The CUDA backend. In device mode ('cuda', priority 20: chosen over 'cpu' when a
 * GPU is usable) it is usable only when the addon has device code and a device runs
 * it; unavailableReason() says why not (no nvcc at build time, no driver, no
 * device, wrong architecture) and how to fix it. In host mode ('cuda-host',
 * priority 1: never chosen over 'cpu', only by name) it needs only the addon.
 */
export class CudaBackend implements EmbeddingBackend {
  readonly name: string;
  readonly priority: number;
  /** 'device' (GPU memory and kernels) or 'host' (the same kernels on CPU threads). */
  readonly mode: CudaMode;
  readonly #device: number;
  readonly #hbmBudget: number;
  readonly #poolReleaseThreshold: number | undefined;
  readonly #load: () => CudaAddonLoad;
  readonly #clearResultCache: () => number;
  readonly #tables = new Set<WeakRef<CudaRawTable>>();

  constructor(options: CudaBackendOptions | null = {}) {
    const o = checkOptions<CudaBackendOptions>(options, ['mode', 'name', 'device', 'hbmBudgetBytes', 'poolReleaseThresholdBytes', 'load'], 'options');
    if (o.mode !== undefined && o.mode !== 'device' && o.mode !== 'host') throw invalidParameter('options.mode', "'device' or 'host'", o.mode);
    if (o.name !== undefined && (typeof o.name !== 'string' || o.name === '')) throw invalidParameter('options.name', 'a non-empty string', o.name, InvalidTypeError);
    if (o.load !== undefined && typeof o.load !== 'function') throw invalidParameter('options.load', 'a function', o.load, InvalidTypeError);
    const budget = bytesOption(o.hbmBudgetBytes ?? Infinity, 'options.hbmBudgetBytes');
    const poolReleaseThreshold = o.poolReleaseThresholdBytes === undefined ? undefined : bytesOption(o.poolReleaseThresholdBytes, 'options.poolReleaseThresholdBytes');
    this.mode = o.mode ?? 'device';
    this.name = o.name ?? (this.mode === 'device' ? 'cuda' : 'cuda-host');
    this.priority = this.mode === 'device' ? 20 : 1;
    this.#device = checkInteger(o.device, 'options.device', { min: 0, max: 1023, fallback: 0 });
    this.#hbmBudget = budget;
    this.#poolReleaseThreshold = poolReleaseThreshold;
    const { load, clearResultCache } = backendLoad(o.load, cudaAddon, CUDA_PACKAGE);
    this.#load = load;
    this.#clearResultCache = clearResultCache;
  }

  isUsable(): boolean {
    return this.unavailableReason() === undefined;
  }

  unavailableReason(): string | undefined {
    const load = this.#load();
    if (!load.binding) return load.reason ?? 'the CUDA backend addon is not available';
    if (this.mode === 'host') return undefined;
    const s = load.binding.deviceStatus();
    if (!s.usable) return load.build === 'prebuilt' && !s.compiled ? prebuiltDeviceReason(load.path ?? '?') : s.reason;
    if (this.#device >= s.devices.length) return `device ${this.#device} does not exist (this machine has ${s.devices.length})`;
    return undefined;
  }

  capabilities(): BackendCapabilities {
    const b = this.#load().binding;
    if (this.mode === 'host' || !b) return { sync: true, threads: b ? b.info().threads : 1, device: 'cpu' };
    const d = b.deviceStatus().devices[this.#device];
    return { sync: true, threads: Math.max(1, d?.multiprocessors ?? 1), device: 'cuda' };
  }

  devices(): DeviceInfo[] {
    const b = this.#load().binding;
    if (this.mode === 'host' || !b) {
      const name = cpus()[0]?.model;
      return [{ id: `${this.name}:0`, kind: 'cpu', ...(name ? { name: `${name} (CUDA host mode)` } : {}) }];
    }
    return b.deviceStatus().devices.map((d) => ({ id: `cuda:${d.ordinal}`, kind: 'cuda', memoryBytes: d.totalMemory, name: d.name }));
  }

  /**
   * The release threshold, in bytes, of the memory pool this backend's tables allocate from
   * (see {@link CudaBackendOptions.poolReleaseThresholdBytes}): the option when given, else
   * {@link defaultPoolReleaseThreshold} of the device's memory. 0 in host mode and when the
   * device is not usable (no pool).
   */
  poolReleaseThreshold(): number {
    if (this.mode === 'host' || this.unavailableReason() !== undefined) return 0;
    if (this.#poolReleaseThreshold !== undefined) return this.#poolReleaseThreshold;
    const d = this.#load().binding?.deviceStatus().devices[this.#device];
    return defaultPoolReleaseThreshold(d?.totalMemory ?? 0);
  }

  /** @throws BackendUnavailableError with the reason when the backend is not usable */
  createTable(options: ResolvedTableOptions): RawTable {
    const reason = this.unavailableReason();
    const binding = this.#load().binding;
    if (reason !== undefined || !binding) throw new BackendUnavailableError(`Backend "${this.name}" is not usable on this machine: ${reason}`);
    const placement = new Float64Array(PLACEMENT_FIELDS);
    placement[PlacementField.device] = this.mode === 'device' ? 1 : 0;
    placement[PlacementField.ordinal] = this.#device;
    placement[PlacementField.hbmBudget] = this.#hbmBudget;
    placement[PlacementField.poolReleaseThreshold] = this.poolReleaseThreshold();
    const table = new CudaRawTable(binding, options, placement);
    this.#tables.add(new WeakRef(table));
    return table;
  }

  /**
   * Gives the idle blocks of the addon's result cache back to the system and returns their
   * bytes, as CpuBackend.clearResultCache(): the addon compiles cpu-backend's result cache
   * (results of 1 MiB or more it allocates in host memory, e.g. the raw table's find or
   * lookupCombined without `out`, in either mode, go back to it once collected), as its
   * own instance: this empties the CUDA addon's cache (shared by 'cuda' and 'cuda-host'),
   * not the CPU addon's. Never loads the addon: 0 when nothing loaded it yet (with a custom
   * `load`: when this backend has not called it), when it could not load, and for an addon
   * built without `clearResultCache`.
   */
  clearResultCache(): number {
    return this.#clearResultCache();
  }

  /** Bytes held by this backend's live tables, by memory kind. */
  memoryReport(): MemoryReport {
    const report: MemoryReport = { device: 0, pinnedHost: 0, tables: 0 };
    for (const ref of this.#tables) {
      const t = ref.deref();
      if (!t || t.disposed) {
        this.#tables.delete(ref);
        continue;
      }
      const m = t.memoryBreakdown();
      report.device += m.device;
      report.pinnedHost += m.pinnedHost;
      report.tables++;
    }
    return report;
  }
}

/** 'cuda': the device mode (registered by importing the package). */
export const cudaBackend = new CudaBackend();
/** 'cuda-host': the host mode (registered by importing the package). */
export const cudaHostBackend = new CudaBackend({ mode: 'host' });
