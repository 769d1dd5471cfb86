import { cpus, totalmem } from 'node:os';
import {
  type BackendCapabilities,
  BackendUnavailableError,
  checkOptions,
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
import { type CpuLevel, supportedCpuLevels } from './cpuLevel.js';
import { type AddonLoad, CPU_PACKAGE, addon, backendLoad } from './loader.js';

/** What {@link CpuBackend.cpuLevel} reports. */
export interface CpuLevelInfo {
  /** The level of the code that runs: a prebuilt binary's, or the kernel clones a source build picks. */
  level: CpuLevel;
  /** 'prebuilt' (prebuilds/ in the package) or 'source' (compiled on this machine). */
  build: 'prebuilt' | 'source';
  /** The loaded .node file. */
  path: string;
  /** The levels this CPU runs, lowest first (what EMBEDSTACK_CPU may ask for). */
  supported: CpuLevel[];
}

/** Options of the {@link CpuBackend} constructor. */
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
  readonly #clearResultCache: () => number;

  constructor(options: CpuBackendOptions | null = {}) {
    const o = checkOptions<CpuBackendOptions>(options, ['load'], 'options', { expected: 'an options object ({ load?: () => AddonLoad })' });
    if (o.load !== undefined && typeof o.load !== 'function') throw invalidParameter('options.load', 'a function () => AddonLoad', o.load, InvalidTypeError);
    const { load, clearResultCache } = backendLoad(o.load, addon, CPU_PACKAGE);
    this.#load = load;
    this.#clearResultCache = clearResultCache;
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

  /**
   * Which CPU level runs (set it with EMBEDSTACK_CPU=baseline|avx2|avx512 before the first use).
   * @throws BackendUnavailableError (with the fix) when the addon cannot load
   */
  cpuLevel(): CpuLevelInfo {
    const load = this.#load();
    if (!load.binding || load.path === null) throw new BackendUnavailableError(load.reason ?? 'The native CPU backend is not available');
    return { level: load.level ?? 'baseline', build: load.build ?? 'source', path: load.path, supported: supportedCpuLevels() };
  }

  /**
   * Gives the idle blocks of the addon's result cache back to the system and returns their
   * bytes. Results of 1 MiB or more that the addon allocates (`exportBatch`, the Promise
   * forms of find / findOrInsert / lookupCombined without `out`, raw calls without `out`)
   * return their blocks to a process-wide cache of up to 1/16 of the machine's memory,
   * 128 MiB to 1 GiB (EMBEDSTACK_CPU_RESULT_CACHE_MB), once collected, which stays mapped for the life of
   * the process unless this is called; results still alive return theirs later.
   *
   * Never loads the addon: it empties the caches of the CPU addons `loadAddon` loaded in
   * this process (the process-wide load's, usually the only one), or, with a custom `load`,
   * that of its binding once this backend called it. 0 when nothing loaded one yet (no
   * cache to clear), when it could not load, and for a binding without `clearResultCache`
   * (an addon built before it) rather than a TypeError.
   */
  clearResultCache(): number {
    return this.#clearResultCache();
  }

  /**
   * A native table for options resolved by core's `resolveTableOptions` (core's `createTable`
   * calls this). Its fields are checked again by the addon (coded errors).
   * @throws InvalidTypeError when `options` is not an object; BackendUnavailableError (with the fix) when the addon cannot load
   */
  createTable(options: ResolvedTableOptions): RawTable {
    if (typeof options !== 'object' || options === null) {
      throw invalidParameter('options', 'resolved table options (resolveTableOptions)', options, InvalidTypeError);
    }
    const load = this.#load();
    if (!load.binding) throw new BackendUnavailableError(load.reason ?? 'The native CPU backend is not available');
    return new CpuRawTable(load.binding, options); // INVALID_TYPE for options encodeTable cannot read
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

/**
 * Which CPU level the native backend runs: `{ level, build, path, supported }`
 * (see {@link CpuLevelInfo}).
 * @throws BackendUnavailableError (with the fix) when the addon cannot load
 */
export function cpuLevel(): CpuLevelInfo {
  return cpuBackend.cpuLevel();
}
