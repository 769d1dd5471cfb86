import { cpus, totalmem } from 'node:os';
import {
  type BackendCapabilities,
  BackendUnavailableError,
  InvalidTypeError,
  invalidParameter,
  type DeviceInfo,
  type EmbeddingBackend,
  type RawCache,
  type RawTable,
  type ResolvedCacheOptions,
  type ResolvedTableOptions,
  UnsupportedError,
} from '@embedstack/core';
import { CpuRawCache, hasCacheFunctions } from './cpuCache.js';
import { CpuRawTable } from './cpuTable.js';
import { type AddonLoad, addon } from './loader.js';

export interface CpuBackendOptions {
  /** How the addon is loaded (tests point it elsewhere). Default: the process-wide load. */
  load?: () => AddonLoad;
}

/**
 * The native CPU backend ('cpu', priority 10): tables in host memory, large
 * batches split over a native thread pool. Unusable (isUsable() false, with
 * unavailableReason() saying what to install or run) when the addon cannot load.
 */
export class CpuBackend implements EmbeddingBackend {
  readonly name = 'cpu';
  readonly priority = 10;
  readonly #load: () => AddonLoad;

  constructor(options: CpuBackendOptions | null = {}) {
    const o = options ?? {};
    if (typeof o !== 'object' || (o.load !== undefined && typeof o.load !== 'function')) {
      throw invalidParameter('options', 'an options object ({ load?: () => AddonLoad })', options, InvalidTypeError);
    }
    this.#load = o.load ?? addon;
  }

  isUsable(): boolean {
    return this.#load().binding !== null;
  }

  unavailableReason(): string | undefined {
    return this.#load().reason ?? undefined;
  }

  capabilities(): BackendCapabilities {
    const b = this.#load().binding;
    return { sync: true, threads: b ? b.info().threads : 0, device: 'cpu', storageDtypes: ['float32', 'float16', 'bfloat16'] };
  }

  devices(): DeviceInfo[] {
    const b = this.#load().binding;
    const memoryBytes = (b ? b.info().physicalMemory : 0) || totalmem();
    const name = cpus()[0]?.model;
    return [{ id: 'cpu:0', kind: 'cpu', memoryBytes, ...(name ? { name } : {}) }];
  }

  /** @throws BackendUnavailableError (with the fix) when the addon cannot load */
  createTable(options: ResolvedTableOptions): RawTable {
    const load = this.#load();
    if (!load.binding) throw new BackendUnavailableError(load.reason ?? 'The native CPU backend is not available');
    return new CpuRawTable(load.binding, options);
  }

  /**
   * A native set-associative LRU cache (core's cache contract) in host memory.
   * @throws BackendUnavailableError when the addon cannot load; UnsupportedError for an addon built without the cache
   */
  createCache(options: ResolvedCacheOptions): RawCache {
    const load = this.#load();
    if (!load.binding) throw new BackendUnavailableError(load.reason ?? 'The native CPU backend is not available');
    if (!hasCacheFunctions(load.binding)) throw new UnsupportedError('This build of the native CPU backend has no cache functions; rebuild it (pnpm --filter @embedstack/cpu-backend build)');
    return new CpuRawCache(load.binding, options);
  }
}

/** The shared instance, registered by importing the package. */
export const cpuBackend = new CpuBackend();
