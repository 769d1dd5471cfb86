import { type EmbeddingBackend, loadDefaultBackend } from '@embedstack/core';

/**
 * The one place this package chooses a backend: core's `loadDefaultBackend`. An
 * explicit backend object is used as is; a name or nothing goes to core's registry
 * (the named backend, else `EMBEDSTACK_BACKEND`, else the usable one of highest
 * priority), after loading @embedstack/cpu-backend (a dependency of this package)
 * when no backend is registered.
 *
 * @throws BackendUnavailableError (why the CPU backend could not be loaded, and the
 *   fix); NotFoundError for an unknown name; InvalidTypeError for a bad `backend`
 */
export function resolveBackend(backend?: string | EmbeddingBackend | null): EmbeddingBackend {
  return loadDefaultBackend({ backend, from: import.meta.url });
}
