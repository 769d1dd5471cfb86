import { runConformanceSuite } from '@embedstack/core/testing';
import { cudaHostBackend } from '@embedstack/cuda-backend';

// core's backend conformance suite, including the differential property tests
// against the reference backend, on the host mode: the CUDA kernels run by the host
// grid launcher on CPU threads (CI has no GPU; device.test.ts runs the same suite on one).
runConformanceSuite({ name: 'cuda-host', backend: () => cudaHostBackend, propertyRuns: 60 });
