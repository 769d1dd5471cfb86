/**
 * Which embedstack backend the bench measures: the registry's default (EMBEDSTACK_BACKEND,
 * else 'cpu': the native backend, loaded by importing @embedstack/cpu-backend),
 * 'reference' (the pure TypeScript oracle from core, for development), 'cuda' (the GPU;
 * without a usable device the CUDA backend's host mode 'cuda-host' runs instead,
 * labelled as such), or any other registered name.
 */
import { type EmbeddingBackend, getBackend, listBackends, loadDefaultBackend } from '@embedstack/core';

export interface LoadedBackend {
  backend: EmbeddingBackend;
  /** Worker threads the backend uses for large batches. */
  threads: number;
  /** How the run names what it measured: "'cpu' on <cpu model>, 2 threads". */
  label: string;
  /** What the figures measure, when the name alone would mislead (host-mode CUDA). */
  note?: string;
}

const HOST_MODE_NOTE = 'CUDA host mode: the CUDA kernels run on CPU threads; not a GPU figure';

/** "'name' on device, N threads" from the backend's own description of its devices. */
export function describeBackend(backend: EmbeddingBackend, threads: number): string {
  const devices = backend.devices().map((d) => d.name ?? d.id);
  const on = devices.length > 0 ? ` on ${[...new Set(devices)].join(', ')}` : '';
  return `'${backend.name}'${on}, ${threads} thread${threads === 1 ? '' : 's'}`;
}

/**
 * The CPU level the native CPU backend runs (EMBEDSTACK_CPU=baseline|avx2|avx512 sets it), as
 * "avx2 code (prebuilt binary)"; null for backends without levels.
 */
export function describeCpuLevel(backend: EmbeddingBackend): string | null {
  const b = backend as EmbeddingBackend & { cpuLevel?: () => { level: string; build: string } };
  if (typeof b.cpuLevel !== 'function' || !backend.isUsable()) return null;
  const { level, build } = b.cpuLevel();
  return `${level} code (${build === 'prebuilt' ? 'prebuilt binary' : 'source build'})`;
}

/** The backends the bench loads by name (others must be registered by a module it imports). */
export const KNOWN_BACKENDS: readonly string[] = ['cpu', 'reference', 'cuda', 'cuda-host'];

/**
 * The one-line message for a backend the user named that cannot be measured (an unknown name, a
 * backend this machine cannot run), said about where the name came from: `--backend`, EMBEDSTACK_BACKEND
 * or the default; null for any other error (a bug, whose stack is worth printing).
 */
export function backendUsageError(name: string, e: unknown, source: 'cli' | 'env' | 'default'): string | null {
  const code = (e as { code?: unknown } | null)?.code;
  const where =
    source === 'cli' ? `option '--backend <name>' argument '${name}'` : source === 'env' ? `EMBEDSTACK_BACKEND="${name}" (no --backend given)` : `the default backend '${name}'`;
  if (code === 'NOT_FOUND') {
    const names = [...new Set([...KNOWN_BACKENDS, ...listBackends()])];
    return `error: ${where} is invalid. Expected one of ${names.join(', ')} but received "${name}".`;
  }
  if (code === 'BACKEND_UNAVAILABLE') return `error: ${where}: the backend cannot run here. ${(e as Error).message}`;
  return null;
}

export async function loadBackend(name: string): Promise<LoadedBackend> {
  const loaded = (backend: EmbeddingBackend, note?: string): LoadedBackend => {
    const threads = Math.max(1, backend.capabilities().threads);
    const level = describeCpuLevel(backend);
    return { backend, threads, label: `${describeBackend(backend, threads)}${level ? `, ${level}` : ''}`, ...(note ? { note } : {}) };
  };
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
  return loaded(backend, backend.name === 'cuda-host' ? HOST_MODE_NOTE : undefined);
}
