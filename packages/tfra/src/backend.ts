import { createRequire } from 'node:module';
import { BackendUnavailableError, type EmbeddingBackend, getBackend, hasBackend } from '@embedstack/core';

/**
 * The ONE place where the tfra facade chooses its backend. When no backend is
 * registered yet, the CPU backend is loaded lazily (importing it registers it);
 * otherwise core's registry decides (`EMBEDSTACK_BACKEND`, `setDefaultBackend`, or
 * the usable backend of highest priority). The facade never touches a backend's
 * internals: it only creates tables through core.
 *
 * @throws BackendUnavailableError when nothing is registered and the CPU backend cannot be loaded
 */
export function facadeBackend(): EmbeddingBackend {
  if (!hasBackend()) {
    try {
      createRequire(import.meta.url)('@embedstack/cpu-backend');
    } catch (cause) {
      throw new BackendUnavailableError(
        'No embedstack backend is registered and @embedstack/cpu-backend could not be loaded ' +
          '(install it, build it with `pnpm --filter @embedstack/cpu-backend build`, or register a backend with registerBackend())',
        { cause },
      );
    }
  }
  return getBackend();
}
