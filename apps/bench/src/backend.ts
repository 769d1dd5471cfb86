/**
 * Which embedstack backend the bench measures: 'cpu' (default: the native
 * backend, loaded by importing @embedstack/cpu-backend) or 'reference' (the pure
 * TypeScript oracle from core, for development), or any other registered name.
 */
import { type EmbeddingBackend, getBackend, hasBackend, referenceBackend, registerBackend } from '@embedstack/core';

export interface LoadedBackend {
  backend: EmbeddingBackend;
  /** Worker threads the backend uses for large batches. */
  threads: number;
}

export async function loadBackend(name: string): Promise<LoadedBackend> {
  if (name === 'reference') {
    if (!hasBackend('reference')) registerBackend(referenceBackend);
  } else if (name === 'cpu') {
    try {
      // A variable specifier: the package is resolved at run time (and may be missing).
      const specifier = '@embedstack/cpu-backend';
      await import(specifier);
    } catch (e) {
      throw new Error(
        `Cannot load @embedstack/cpu-backend (${(e as Error).message}). Build it with \`npx pnpm@10.34.9 build\`, ` +
          'or measure the pure TypeScript oracle with --backend reference.',
      );
    }
  }
  const backend = getBackend(name);
  return { backend, threads: Math.max(1, backend.capabilities().threads) };
}
