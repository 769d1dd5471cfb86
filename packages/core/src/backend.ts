import { BackendUnavailableError, InvalidTypeError, invalidParameter, NotFoundError } from './errors.js';
import type { RawTable } from './rawTable.js';
import type { ResolvedTableOptions } from './tableOptions.js';

export interface DeviceInfo {
  /** 'cpu:0', 'cuda:0', ... */
  id: string;
  kind: 'cpu' | 'cuda' | 'js';
  /** Bytes of memory the device offers tables, when known. */
  memoryBytes?: number;
  name?: string;
}

export interface BackendCapabilities {
  /** Offers synchronous operations (RawTable.sync). */
  sync: boolean;
  /** Worker threads used for large batches. */
  threads: number;
  device: 'cpu' | 'cuda' | 'js';
}

/** A backend creates tables on its devices. Registered in core's registry. */
export interface EmbeddingBackend {
  readonly name: string;
  /** Higher wins when no backend is named. cuda 20, cpu 10, reference 0. */
  readonly priority: number;
  /** False when the backend is present but cannot run (no GPU, failed build). */
  isUsable(): boolean;
  capabilities(): BackendCapabilities;
  devices(): DeviceInfo[];
  /** Options are resolved and valid. */
  createTable(options: ResolvedTableOptions): RawTable;
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

export function unregisterBackend(name: string): boolean {
  if (state.defaultName === name) state.defaultName = undefined;
  return registry.delete(name);
}

export function listBackends(): string[] {
  return [...registry.keys()];
}

export function hasBackend(name?: string): boolean {
  return name === undefined ? registry.size > 0 : registry.has(name);
}

/** Chooses the default backend by name; `undefined` returns to automatic choice. */
export function setDefaultBackend(name: string | undefined): void {
  if (name !== undefined && !registry.has(name)) {
    throw new NotFoundError(`Expected backend to be one of [${listBackends().join(', ')}] but received "${name}"`, {
      argument: 'name',
    });
  }
  state.defaultName = name;
}

/**
 * The backend called `name`; else `EMBEDSTACK_BACKEND`; else the one set by
 * setDefaultBackend; else the usable backend of highest priority.
 * @throws NotFoundError / BackendUnavailableError
 */
export function getBackend(name?: string): EmbeddingBackend {
  const wanted = name ?? (typeof process !== 'undefined' ? process.env.EMBEDSTACK_BACKEND : undefined) ?? state.defaultName;
  if (wanted !== undefined && wanted !== '') {
    const b = registry.get(wanted);
    if (!b) {
      throw new NotFoundError(
        `Expected backend to be one of [${listBackends().join(', ')}] but received "${wanted}"` +
          (name === undefined ? ' (from EMBEDSTACK_BACKEND or setDefaultBackend)' : ''),
        { argument: 'backend' },
      );
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
    throw new BackendUnavailableError(
      'No usable embedstack backend is registered. Install and import @embedstack/cpu-backend ' +
        '(it registers itself), or register one with registerBackend().' + reasons,
    );
  }
  return best;
}
