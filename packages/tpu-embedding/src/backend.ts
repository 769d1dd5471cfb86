import { createRequire } from 'node:module';
import {
  BackendUnavailableError,
  type EmbeddingBackend,
  getBackend,
  hasBackend,
  InvalidTypeError,
  invalidParameter,
} from '@embedstack/core';

/**
 * The one place this package chooses a backend. An explicit backend object is used
 * as is; otherwise core's registry decides (`getBackend(name)`: the named backend,
 * else `EMBEDSTACK_BACKEND`, else the usable one of highest priority). When no
 * backend is registered at all, `@embedstack/cpu-backend` (a dependency of this
 * package) is loaded first; importing it registers the 'cpu' backend.
 *
 * @throws BackendUnavailableError when no backend is registered and the CPU backend
 *   cannot be loaded (its native build is missing); NotFoundError for an unknown name
 */
export function resolveBackend(backend?: string | EmbeddingBackend | null): EmbeddingBackend {
  if (typeof backend === 'object' && backend !== null) {
    if (typeof backend.createTable !== 'function') throw invalidParameter('backend', 'an EmbeddingBackend', backend, InvalidTypeError);
    return backend;
  }
  if (backend !== undefined && backend !== null && typeof backend !== 'string') {
    throw invalidParameter('backend', 'a backend name, an EmbeddingBackend, undefined or null', backend, InvalidTypeError);
  }
  if (!hasBackend()) loadCpuBackend();
  return getBackend(backend ?? undefined);
}

function loadCpuBackend(): void {
  try {
    createRequire(import.meta.url)('@embedstack/cpu-backend');
  } catch (e) {
    throw new BackendUnavailableError(
      'No embedstack backend is registered and @embedstack/cpu-backend could not be loaded ' +
        `(${(e as Error).message}). Build it (pnpm build) or register a backend with registerBackend().`,
      { cause: e },
    );
  }
}
