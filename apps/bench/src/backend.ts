/**
 * Which embedstack backend the bench measures: 'cpu' (default: the native
 * backend, loaded by importing @embedstack/cpu-backend) or 'reference' (the pure
 * TypeScript oracle from core, for development), 'cuda' (the GPU; without a usable
 * device the CUDA backend's host mode 'cuda-host' runs instead, labelled as such),
 * or any other registered name.
 */
import { type EmbeddingBackend, getBackend, loadDefaultBackend } from '@embedstack/core';

export interface LoadedBackend {
  backend: EmbeddingBackend;
  /** Worker threads the backend uses for large batches. */
  threads: number;
  /** What the figures measure, when the name alone would mislead (host-mode CUDA). */
  note?: string;
}

const HOST_MODE_NOTE = 'CUDA host mode: the CUDA kernels run on CPU threads; not a GPU figure';

export async function loadBackend(name: string): Promise<LoadedBackend> {
  const loaded = (backend: EmbeddingBackend, note?: string): LoadedBackend => ({
    backend,
    threads: Math.max(1, backend.capabilities().threads),
    ...(note ? { note } : {}),
  });
  if (name === 'cuda') {
    // Loads @embedstack/cuda-backend (registering 'cuda' too); the GPU when one runs its kernels.
    const host = loadDefaultBackend({ backend: 'cuda-host', from: import.meta.url });
    try {
      return loaded(getBackend('cuda'));
    } catch (e) {
      return loaded(host, `${HOST_MODE_NOTE}; 'cuda' is not usable here: ${(e as Error).message}`);
    }
  }
  const backend = loadDefaultBackend({ backend: name, from: import.meta.url });
  return loaded(backend, name === 'cuda-host' ? HOST_MODE_NOTE : undefined);
}
