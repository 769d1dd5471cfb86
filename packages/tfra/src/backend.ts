import { type EmbeddingBackend, loadDefaultBackend } from '@embedstack/core';

/**
 * The backend tfra's tables live on: core's `loadDefaultBackend` (it loads
 * @embedstack/cpu-backend, a dependency of this package, when no backend is
 * registered; otherwise the registry decides: `EMBEDSTACK_BACKEND`,
 * `setDefaultBackend`, or the usable backend of highest priority). The facade
 * never touches a backend's internals: it only creates tables through core.
 *
 * @throws BackendUnavailableError saying why no backend could be loaded and how to fix it
 */
export function facadeBackend(): EmbeddingBackend {
  return loadDefaultBackend({ from: import.meta.url });
}
