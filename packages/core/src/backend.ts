import type { StorageDtype } from './storageDtype.js';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { BackendUnavailableError, InvalidArgumentError, InvalidTypeError, invalidParameter, NotFoundError } from './errors.js';
import type { RawCache, ResolvedCacheOptions } from './cache.js';
import type { RawTable } from './rawTable.js';
import { referenceBackend } from './reference/backend.js';
import type { ResolvedTableOptions } from './tableOptions.js';
import { checkOptions } from './validation.js';

/** A device a backend places tables on, as listed by `EmbeddingBackend.devices()`. */
export interface DeviceInfo {
  /** 'cpu:0', 'cuda:0', ... */
  id: string;
  /** The kind of device: host CPU (native code), CUDA GPU, or plain JavaScript (the reference backend). */
  kind: 'cpu' | 'cuda' | 'js';
  /** Bytes of memory the device offers tables, when known. */
  memoryBytes?: number;
  /** Human-readable device name (a GPU's model, ...), when known. */
  name?: string;
}

/** What a backend offers, as returned by `EmbeddingBackend.capabilities()`. */
export interface BackendCapabilities {
  /** Offers synchronous operations (RawTable.sync). */
  sync: boolean;
  /** Worker threads used for large batches. */
  threads: number;
  /** The kind of device its tables run on. */
  device: 'cpu' | 'cuda' | 'js';
  /** Value storage types its tables offer (`TableOptions.storageDtype`). Absent = ['float32'] only. */
  storageDtypes?: readonly StorageDtype[];
}

/** A backend creates tables on its devices. Registered in core's registry. */
export interface EmbeddingBackend {
  /** Registry name ('cpu', 'cuda', 'reference', ...). */
  readonly name: string;
  /** Higher wins when no backend is named. cuda 20, cpu 10, reference 0. */
  readonly priority: number;
  /** False when the backend is present but cannot run (no GPU, failed build). */
  isUsable(): boolean;
  /** What the backend offers (sync operations, threads, device kind, storage dtypes). */
  capabilities(): BackendCapabilities;
  /** The devices its tables can live on. */
  devices(): DeviceInfo[];
  /** Options are resolved and valid. */
  createTable(options: ResolvedTableOptions): RawTable;
  /** Creates a set-associative LRU cache (cache.ts's contract); options are resolved and valid. Optional: without it createCache is UNSUPPORTED. */
  createCache?(options: ResolvedCacheOptions): RawCache;
  /** Why isUsable() is false, with the fix (what to install or run). */
  unavailableReason?(): string | undefined;
}

/**
 * One registry per process, kept on globalThis so that every copy of core (ESM and
 * CJS builds, or a facade and a backend resolved to different copies) shares it.
 */
interface RegistryState {
  backends: Map<string, EmbeddingBackend>;
  defaultName: string | undefined;
  /** The EMBEDSTACK_FALLBACK warning was printed. */
  warnedFallback?: boolean;
}
const REGISTRY_KEY = Symbol.for('embedstack.backendRegistry');
const state: RegistryState = ((globalThis as Record<symbol, unknown>)[REGISTRY_KEY] ??= {
  backends: new Map<string, EmbeddingBackend>(),
  defaultName: undefined,
}) as RegistryState;
const registry = state.backends;

/** Registers (or replaces) a backend under its name. */
export function registerBackend(backend: EmbeddingBackend): void {
  if (typeof backend !== 'object' || backend === null || typeof backend.name !== 'string' || typeof backend.createTable !== 'function') {
    throw invalidParameter('backend', 'an EmbeddingBackend', backend, InvalidTypeError);
  }
  registry.set(backend.name, backend);
}

/**
 * Removes the backend registered under `name` (and clears it as the default backend if it was).
 * @returns true when a backend was removed, false when none had that name
 */
export function unregisterBackend(name: string): boolean {
  if (state.defaultName === name) state.defaultName = undefined;
  return registry.delete(name);
}

/** Names of the registered backends, in registration order. */
export function listBackends(): string[] {
  return [...registry.keys()];
}

/** Whether a backend called `name` is registered; with no name, whether any backend is. */
export function hasBackend(name?: string): boolean {
  return name === undefined ? registry.size > 0 : registry.has(name);
}

/** Chooses the default backend by name; `undefined` returns to automatic choice. @throws InvalidTypeError (not a string), NotFoundError (no backend of that name) */
export function setDefaultBackend(name: string | undefined): void {
  if (name !== undefined && typeof name !== 'string') throw invalidParameter('name', 'a backend name (string) or undefined', name, InvalidTypeError);
  // 'reference' is part of core: getBackend registers it when first asked for, so it is a valid default too.
  if (name !== undefined && name !== referenceBackend.name && !registry.has(name)) {
    throw unknownBackend(name, '', 'name');
  }
  state.defaultName = name;
}

/** The backend name asked for: `name`, else EMBEDSTACK_BACKEND, else setDefaultBackend's; undefined for automatic choice. */
function wantedBackend(name: string | undefined): string | undefined {
  const wanted = name ?? (typeof process !== 'undefined' ? process.env.EMBEDSTACK_BACKEND : undefined) ?? state.defaultName;
  return wanted === '' ? undefined : wanted;
}

/**
 * The backend called `name`; else `EMBEDSTACK_BACKEND`; else the one set by
 * setDefaultBackend; else the usable backend of highest priority.
 * @throws NotFoundError / BackendUnavailableError
 */
export function getBackend(name?: string): EmbeddingBackend {
  if (name !== undefined && typeof name !== 'string') throw invalidParameter('name', 'a backend name (string) or undefined', name, InvalidTypeError);
  const wanted = wantedBackend(name);
  if (wanted !== undefined) {
    // The reference backend is part of core: selectable by name without registering it first.
    if (wanted === referenceBackend.name && !registry.has(wanted)) registry.set(wanted, referenceBackend);
    const b = registry.get(wanted);
    if (!b) {
      throw unknownBackend(wanted, name === undefined ? ' (from EMBEDSTACK_BACKEND or setDefaultBackend)' : '', 'backend');
    }
    if (!b.isUsable()) {
      throw new BackendUnavailableError(
        `Backend "${wanted}" is registered but not usable on this machine: ${b.unavailableReason?.() ?? 'no reason given'}`,
      );
    }
    return b;
  }
  const usable = [...registry.values()].filter((b) => b.isUsable()).sort((a, b) => b.priority - a.priority);
  const best = usable[0];
  if (!best) {
    const reasons = [...registry.values()].map((b) => `\n  - ${b.name}: ${b.unavailableReason?.() ?? 'not usable'}`).join('');
    const head =
      registry.size === 0
        ? 'No usable embedstack backend is registered. Install and import @embedstack/cpu-backend (it registers itself), or register one with registerBackend().'
        : `No registered embedstack backend can run on this machine (${listBackends().join(', ')}); each says why and how to fix it:`;
    const cpuHint = registry.size > 0 && !registry.has('cpu') ? `\nInstall and import ${DEFAULT_BACKEND_PACKAGE} for native CPU tables (it registers itself).` : '';
    if (fallbackRequested()) return fallBack(`${head}${reasons}`);
    throw new BackendUnavailableError(`${head}${reasons}${cpuHint}\n${REFERENCE_HINT}`);
  }
  return best;
}

/**
 * NotFoundError for a backend name that is not registered: lists the valid names, those
 * selectable now ('reference' included: getBackend adds it on demand) and those an
 * embedstack package registers once loaded (cpu, cuda, cuda-host: loadDefaultBackend loads
 * it when the name is asked for; nothing is loaded here), and, for such a name, which
 * package to install and import.
 */
function unknownBackend(wanted: string, source: string, argument: string): NotFoundError {
  const names = listBackends();
  if (!names.includes(referenceBackend.name)) names.push(referenceBackend.name);
  const packages: Readonly<Record<string, string>> = { cpu: DEFAULT_BACKEND_PACKAGE, ...OPTIONAL_BACKEND_PACKAGES };
  const loadable = Object.keys(packages).filter((n) => !names.includes(n));
  const pkg = Object.hasOwn(packages, wanted) ? packages[wanted] : undefined;
  const hint =
    pkg !== undefined
      ? `. Backend "${wanted}" is not loaded: install and import ${pkg} (it registers itself)`
      : loadable.length > 0
        ? `; ${loadable.join(', ')} register when their package is loaded (${[...new Set(loadable.map((n) => packages[n]))].join(', ')}; a facade loads the package when its name is asked for)`
        : '';
  // a known name whose package is not loaded: the list holds what is usable now (the hint says how to load it)
  const listed = pkg !== undefined ? names : [...names, ...loadable];
  return new NotFoundError(`Expected backend to be one of [${listed.join(', ')}] but received "${wanted}"${source}${hint}`, { argument });
}

/** How to run without a native backend, appended to "no usable backend" errors. */
const REFERENCE_HINT =
  'Or run on the pure-TypeScript reference backend (slow, no native code): EMBEDSTACK_BACKEND=reference always, ' +
  'or EMBEDSTACK_FALLBACK=reference only when no other backend can run (with a warning).';

/** The variable opting in to the reference fallback. */
export const FALLBACK_ENV = 'EMBEDSTACK_FALLBACK';

/**
 * Whether EMBEDSTACK_FALLBACK=reference is set (unset or empty: no fallback).
 * @throws InvalidArgumentError for any other value
 */
function fallbackRequested(): boolean {
  const v = typeof process !== 'undefined' ? process.env[FALLBACK_ENV] : undefined;
  if (v === undefined || v === '') return false;
  if (v.trim().toLowerCase() === referenceBackend.name) return true;
  throw invalidParameter(FALLBACK_ENV, `"${referenceBackend.name}" or unset (the only fallback is the reference backend)`, v, InvalidArgumentError);
}

/**
 * The reference backend, chosen because no other backend can run and the user opted
 * in: warns once per process (process warning, code EMBEDSTACK_FALLBACK) saying why.
 */
function fallBack(why: string): EmbeddingBackend {
  if (!state.warnedFallback) {
    state.warnedFallback = true;
    const message =
      `${FALLBACK_ENV}=reference: running on the pure-TypeScript reference backend (much slower than native code), because ${why}`;
    if (typeof process !== 'undefined' && typeof process.emitWarning === 'function') {
      process.emitWarning(message, { type: 'EmbedstackWarning', code: 'EMBEDSTACK_FALLBACK' });
    }
  }
  return referenceBackend;
}

/** The package every facade depends on for running on the CPU; importing it registers backend 'cpu'. */
export const DEFAULT_BACKEND_PACKAGE = '@embedstack/cpu-backend';

/**
 * Optional backend packages loaded on demand when their backend is asked for by name
 * (or EMBEDSTACK_BACKEND) and not registered yet: importing the package registers it.
 */
export const OPTIONAL_BACKEND_PACKAGES: Readonly<Record<string, string>> = {
  cuda: '@embedstack/cuda-backend',
  'cuda-host': '@embedstack/cuda-backend',
};

/** Options of {@link loadDefaultBackend}. Every field is optional. */
export interface LoadDefaultBackendOptions {
  /** A backend object (used as is) or name (looked up in the registry). Default: the registry's choice. */
  backend?: string | EmbeddingBackend | null;
  /**
   * Where `@embedstack/cpu-backend` is resolved from: the calling package's
   * `import.meta.url` (or a file path), so that the facade's own dependency is found.
   * Default: core's own location.
   */
  from?: string | URL;
  /** Loads the default backend package (tests and bundlers replace it). Default: `createRequire(from)(DEFAULT_BACKEND_PACKAGE)`. */
  load?: () => unknown;
}

/**
 * The backend a facade runs on: the one place that loads the default backend.
 * An EmbeddingBackend object is used as is. Otherwise, when no backend is
 * registered (or 'cpu' is asked for and not registered), `@embedstack/cpu-backend`
 * is loaded first (importing it registers 'cpu'), and with no backend named, the
 * optional backend packages that are installed (OPTIONAL_BACKEND_PACKAGES, resolved
 * from `from`, then the working directory; skipped when absent or broken); an
 * optional backend asked for by name and not registered ('cuda', 'cuda-host') has
 * its package loaded the same way, its failure reported; then core's registry decides
 * ({@link getBackend}: the name, EMBEDSTACK_BACKEND, setDefaultBackend, or the usable
 * backend of highest priority; 'reference' is always available by name).
 *
 * @throws BackendUnavailableError saying why the CPU backend could not be loaded or
 *   used and how to fix it; NotFoundError for an unknown name; InvalidTypeError for a
 *   `backend` that is neither a name nor a backend
 */
export function loadDefaultBackend(options: LoadDefaultBackendOptions | null = {}): EmbeddingBackend {
  const o = checkOptions<LoadDefaultBackendOptions>(options, ['backend', 'from', 'load'], 'options', { expected: 'an options object ({ backend, from, load })' });
  if (o.load !== undefined && typeof o.load !== 'function') throw invalidParameter('options.load', 'a function', o.load, InvalidTypeError);
  if (o.from !== undefined && typeof o.from !== 'string' && !(o.from instanceof URL)) throw invalidParameter('options.from', 'a file URL or path', o.from, InvalidTypeError);
  const backend = o.backend ?? undefined;
  if (typeof backend === 'object') {
    if (typeof backend.createTable !== 'function' || typeof backend.name !== 'string') {
      throw invalidParameter('backend', 'a backend name or an EmbeddingBackend', backend, InvalidTypeError);
    }
    return backend;
  }
  if (backend !== undefined && typeof backend !== 'string') {
    throw invalidParameter('backend', 'a backend name, an EmbeddingBackend, undefined or null', backend, InvalidTypeError);
  }
  const wanted = wantedBackend(backend);
  const from = o.from ?? import.meta.url;
  const automatic = wanted === undefined && registry.size === 0;
  if (automatic || (wanted === 'cpu' && !registry.has('cpu'))) {
    try {
      loadCpuBackend(o.load ?? (() => createRequire(from)(DEFAULT_BACKEND_PACKAGE)));
    } catch (e) {
      // EMBEDSTACK_FALLBACK=reference: with no backend named, the reference backend serves (warning once)
      if (!automatic || !fallbackRequested()) throw e;
      if (o.load === undefined) loadInstalledOptionalBackends(from);
      const usable = [...registry.values()].some((b) => b.isUsable());
      return usable ? getBackend(backend) : fallBack((e as Error).message);
    }
  }
  if (automatic && o.load === undefined) loadInstalledOptionalBackends(from);
  if (wanted !== undefined && !registry.has(wanted) && Object.hasOwn(OPTIONAL_BACKEND_PACKAGES, wanted)) {
    loadOptionalBackend(wanted, OPTIONAL_BACKEND_PACKAGES[wanted]!, from);
  }
  return getBackend(backend);
}

/**
 * With no backend named: loads each optional backend package that is installed (a
 * GPU backend installed next to a facade is then chosen when usable, by priority).
 * One that is not installed, or fails to load, is skipped: the CPU backend serves.
 */
function loadInstalledOptionalBackends(from: string | URL): void {
  for (const pkg of new Set(Object.values(OPTIONAL_BACKEND_PACKAGES))) {
    for (const base of [from, pathToFileURL(`${process.cwd()}/`)]) {
      try {
        createRequire(base)(pkg);
        break;
      } catch {
        // not installed where this base resolves (or broken): try the next base, then give up
      }
    }
  }
}

/**
 * Loads the optional package of backend `name`, resolved from `from` (the facade) or,
 * as optional packages are installed by the application, from the working directory.
 */
function loadOptionalBackend(name: string, pkg: string, from: string | URL): void {
  const errors: unknown[] = [];
  for (const base of [from, pathToFileURL(`${process.cwd()}/`)]) {
    try {
      createRequire(base)(pkg);
      return;
    } catch (cause) {
      errors.push(cause);
      if ((cause as { code?: string }).code !== 'MODULE_NOT_FOUND' || !String((cause as Error).message).includes(pkg)) break;
    }
  }
  const cause = errors[errors.length - 1];
  const missing = (cause as { code?: string }).code === 'MODULE_NOT_FOUND';
  throw new BackendUnavailableError(
    `Backend "${name}" was asked for but ${pkg} could not be loaded: ${(cause as Error).message}. ` +
      (missing ? `Fix: install it next to your application (npm install ${pkg}).` : `Fix: rebuild it (pnpm --filter ${pkg} rebuild).`),
    { cause },
  );
}

function loadCpuBackend(load: () => unknown): void {
  try {
    load();
  } catch (cause) {
    const missing = (cause as { code?: string }).code === 'MODULE_NOT_FOUND' && String((cause as Error).message).includes(DEFAULT_BACKEND_PACKAGE);
    const fix = missing
      ? `install it (npm install ${DEFAULT_BACKEND_PACKAGE}; every facade lists it as a dependency)`
      : `its native addon did not load; rebuild it (npx -y pnpm@10.34.9 --filter ${DEFAULT_BACKEND_PACKAGE} build, which needs a C++17 compiler and cmake)`;
    throw new BackendUnavailableError(
      `No embedstack backend is registered and ${DEFAULT_BACKEND_PACKAGE} could not be loaded: ${(cause as Error).message}. ` +
        `Fix: ${fix}, or register a backend with registerBackend(). ${REFERENCE_HINT}`,
      { cause },
    );
  }
  if (!registry.has('cpu')) {
    throw new BackendUnavailableError(`${DEFAULT_BACKEND_PACKAGE} loaded but did not register backend "cpu" (two copies of @embedstack/core?)`);
  }
}
