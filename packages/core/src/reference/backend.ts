import type { BackendCapabilities, DeviceInfo, EmbeddingBackend } from '../backend.js';
import type { RawCache, ResolvedCacheOptions } from '../cache.js';
import { checkedRawOps } from '../rawArgs.js';
import { type RawTable, rawTableFromSync } from '../rawTable.js';
import type { ResolvedTableOptions } from '../tableOptions.js';
import { ReferenceCache } from './cache.js';
import { ReferenceDynamicTable } from './dynamicTable.js';
import { ReferenceStaticTable } from './staticTable.js';

/**
 * The reference backend: plain TypeScript tables on the JS heap, written to be
 * obviously correct rather than fast. It is the test oracle of the conformance
 * suite and of the native backends (which match its documented semantics). Not
 * registered on import: `registerBackend(referenceBackend)` to use it by name
 * ('reference', priority 0), or pass it to `createTable(options, { backend })`.
 */
export class ReferenceBackend implements EmbeddingBackend {
  readonly name = 'reference';
  readonly priority = 0;

  isUsable(): boolean {
    return true;
  }

  capabilities(): BackendCapabilities {
    return { sync: true, threads: 1, device: 'js', storageDtypes: ['float32', 'float16', 'bfloat16'] };
  }

  devices(): DeviceInfo[] {
    return [{ id: 'js:0', kind: 'js', name: 'JavaScript heap' }];
  }

  /** The table's raw operations check their arguments (rawArgs.ts): junk from a caller of `table.raw` is a coded error, and changes nothing. */
  createTable(options: ResolvedTableOptions): RawTable {
    const table = options.kind === 'static' ? new ReferenceStaticTable(options) : new ReferenceDynamicTable(options);
    return rawTableFromSync(checkedRawOps(table, options, false));
  }

  createCache(options: ResolvedCacheOptions): RawCache {
    return new ReferenceCache(options);
  }

  unavailableReason(): string | undefined {
    return undefined;
  }
}

/** The shared instance (stateless: every table is independent). */
export const referenceBackend = new ReferenceBackend();
