import type { BackendCapabilities, DeviceInfo, EmbeddingBackend } from '../backend.js';
import type { RawCache, ResolvedCacheOptions } from '../cache.js';
import { type RawTable, rawTableFromSync, sumShardPartials } from '../rawTable.js';
import type { ResolvedTableOptions } from '../tableOptions.js';
import { ReferenceCache } from './cache.js';
import { ReferenceDynamicTable } from './dynamicTable.js';
import { ReferenceStaticTable } from './staticTable.js';

/** The tables this backend made (lookupCombinedShards serves only those). */
const referenceTables = new WeakSet<RawTable>();

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

  createTable(options: ResolvedTableOptions): RawTable {
    const raw: RawTable = {
      ...rawTableFromSync(options.kind === 'static' ? new ReferenceStaticTable(options) : new ReferenceDynamicTable(options)),
      // The shards one after another, each partial in its own float64 array, added in shard order.
      lookupCombinedShards: (parts, bag, combiner, maxNorm, insert, out) => {
        if (!parts.every((p) => referenceTables.has(p.raw))) return null;
        try {
          const partials = parts.map((p) => p.raw.sync!.lookupCombinedPartial(bag, combiner, maxNorm, insert, p.plan, new Float64Array(out.length)));
          return Promise.resolve(sumShardPartials(partials, out));
        } catch (e) {
          return Promise.reject(e);
        }
      },
    };
    referenceTables.add(raw);
    return raw;
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
