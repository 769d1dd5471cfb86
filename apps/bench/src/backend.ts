/**
 * Which embedstack backend the bench measures: 'cpu' (default: the native
 * backend, loaded by importing @embedstack/cpu-backend) or 'reference' (the pure
 * TypeScript oracle from core, for development), or any other registered name.
 */
import { type EmbeddingBackend, loadDefaultBackend } from '@embedstack/core';

export interface LoadedBackend {
  backend: EmbeddingBackend;
  /** Worker threads the backend uses for large batches. */
  threads: number;
}

export async function loadBackend(name: string): Promise<LoadedBackend> {
  const backend = loadDefaultBackend({ backend: name, from: import.meta.url });
  return { backend, threads: Math.max(1, backend.capabilities().threads) };
}
