// @embedstack/cuda-backend: the CUDA backend. Importing it registers backend 'cuda'
// (device mode, priority 20, usable when a GPU runs this build's kernels) and
// 'cuda-host' (the same kernels on CPU threads, by name only), and, through its
// dependency on @embedstack/cpu-backend, 'cpu'. Explicit exports only.
import { registerBackend } from '@embedstack/core';
import { cudaBackend, cudaHostBackend } from './backend.js';

export { CudaBackend, cudaBackend, cudaHostBackend, defaultPoolReleaseThreshold } from './backend.js';
export type { CudaBackendOptions, CudaMode, MemoryReport } from './backend.js';
export { CudaRawTable } from './cudaTable.js';
export type { MemoryBreakdown } from './cudaTable.js';
export { loadCudaAddon, cudaCandidatePaths, explainCudaAttempts, CUDA_ADDON_FILE } from './loader.js';
export type { CudaAddonLoad } from './loader.js';
export { PlacementField, PLACEMENT_FIELDS } from './native.js';
export type { CudaBinding, CudaNativeInfo, NativeDevice, NativeDeviceStatus } from './native.js';

registerBackend(cudaBackend);
registerBackend(cudaHostBackend);
