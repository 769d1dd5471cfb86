// Whether a device runs this build's kernels: asks the runtime for a kernel's
// attributes, which fails with cudaErrorNoKernelImageForDevice (or
// cudaErrorInvalidDeviceFunction) when no compiled architecture fits the device.
// Device builds only.
#include <cuda_runtime_api.h>

#include <string>

namespace embedstack {
namespace cuda {

namespace {
__global__ void probeKernel(int* p) {
  if (p) *p = 1;
}
}  // namespace

bool deviceRunsKernels(int ordinal, std::string& why) {
  int previous = 0;
  cudaGetDevice(&previous);
  if (cudaSetDevice(ordinal) != cudaSuccess) {
    cudaGetLastError();
    why = "cannot select device " + std::to_string(ordinal);
    return false;
  }
  cudaFuncAttributes attributes;
  const cudaError_t e = cudaFuncGetAttributes(&attributes, probeKernel);
  cudaSetDevice(previous);
  if (e == cudaSuccess) return true;
  cudaGetLastError();
  why = std::string("device ") + std::to_string(ordinal) + ": " + cudaGetErrorName(e);
  return false;
}

}  // namespace cuda
}  // namespace embedstack
