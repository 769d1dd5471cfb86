import { createRequire } from 'node:module';
import { BackendUnavailableError, type RawTable } from '@embedstack/core';
import type * as StoreRedis from '@embedstack/store-redis';

/**
 * `@embedstack/store-redis` is an optional peer dependency of tfra: only users of
 * `RedisTableCreator` install it. It is imported (dynamic `import()`) when the first
 * Redis table is created, never when tfra itself is imported.
 */
export type StoreRedisModule = typeof StoreRedis;

const PACKAGE = '@embedstack/store-redis';
export const STORE_REDIS_MISSING =
  `RedisTableCreator needs the optional peer dependency ${PACKAGE}, which is not installed: ` +
  `install it next to @embedstack/tfra (npm install ${PACKAGE}, or pnpm add ${PACKAGE})`;

let loading: Promise<StoreRedisModule> | null = null;
let loaded: StoreRedisModule | null = null;

/** The module once imported, else null. */
export function loadedStoreRedis(): StoreRedisModule | null {
  return loaded;
}

function missing(cause?: unknown): BackendUnavailableError {
  return new BackendUnavailableError(STORE_REDIS_MISSING, cause === undefined ? {} : { cause });
}

/**
 * Whether the package resolves from here (nothing is loaded).
 * @throws BackendUnavailableError (BACKEND_UNAVAILABLE) saying what to install when it does not
 */
export function requireStoreRedisInstalled(): void {
  try {
    createRequire(import.meta.url).resolve(`${PACKAGE}/package.json`);
  } catch (e) {
    throw missing(e);
  }
}

/** Imports the package once (the same module for every caller). Rejects with BACKEND_UNAVAILABLE when it is missing. */
export function loadStoreRedis(): Promise<StoreRedisModule> {
  loading ??= import('@embedstack/store-redis').then((m) => (loaded = m), (e: unknown) => {
    loading = null;
    const code = (e as { code?: unknown } | null)?.code;
    throw code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND' ? missing(e) : e;
  });
  return loading;
}

/**
 * A store-redis RawTable for a table created synchronously (a Variable makes its shard
 * tables in its constructor) while the package may still be loading: async operations
 * wait for the module, then run on the real table (`make(module)`); the synchronous
 * queries answer 0 until it is there (store-redis tables are async-only: `sync` is
 * null), `setEpoch` / `dispose` are replayed. Once loaded, every property is the real
 * table's (methods bound to it), so `raw.ready()`, `raw.layout` and the rest work as on
 * a store-redis table.
 */
export function lateRedisRawTable(make: (m: StoreRedisModule) => StoreRedis.RedisRawTable): RawTable {
  const state: { raw: StoreRedis.RedisRawTable | null; epoch: number | null; disposed: boolean } = { raw: null, epoch: null, disposed: false };
  const ready = loadStoreRedis().then((m) => {
    const raw = make(m);
    state.raw = raw;
    if (state.epoch !== null) raw.setEpoch(state.epoch);
    if (state.disposed) raw.dispose();
    return raw;
  });
  ready.catch(() => undefined); // each operation reports the failure itself
  const later =
    (pick: (raw: StoreRedis.RedisRawTable) => object, name: string | symbol) =>
    (...args: unknown[]): Promise<unknown> =>
      ready.then((raw) => {
        const target = pick(raw);
        return (Reflect.get(target, name) as (...a: unknown[]) => unknown).apply(target, args);
      });
  const asyncOps = new Proxy({} as Record<string | symbol, unknown>, {
    get: (_t, name) => (state.raw ? bound(state.raw.async, name) : later((raw) => raw.async, name)),
  });
  return new Proxy({} as RawTable, {
    get(_t, name) {
      if (state.raw) return bound(state.raw, name);
      switch (name) {
        case 'sync':
          return null;
        case 'async':
          return asyncOps;
        case 'size':
        case 'capacity':
        case 'memoryUsage':
          return () => 0;
        case 'setEpoch':
          return (epoch: number) => void (state.epoch = epoch);
        case 'dispose':
          return () => void (state.disposed = true);
        case 'then':
          return undefined; // not a thenable
        default:
          return typeof name === 'string' ? later((raw) => raw, name) : undefined;
      }
    },
  });
}

function bound(target: object, name: string | symbol): unknown {
  const v: unknown = Reflect.get(target, name);
  return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
}
