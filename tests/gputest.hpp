/*
  What the GPU test suites (test_13_gpu, test_21_gpu_kernels) share: the device count and the skip
  macros (a device test is skipped with a visible message where there is no device or the build
  lacks CUDA or cuDNN), and the check of the failures that kernel entries returning nothing keep.
*/
#pragma once
#include "ddtest.hpp"
#if DDNN_WITH_CUDA
  #include <backend/cuda/backend_cuda.hpp>
#endif

namespace ddtest
{
/* the number of CUDA devices this process sees (0 without DDNN_WITH_CUDA) */
inline int DeviceCount()
{
  int n = 0;
#if DDNN_WITH_CUDA
  DDT(DDBackendCudaGetDeviceCount_Private(&n));
#endif
  return n;
}
} // namespace ddtest

/* raises a failure kept by a kernel entry that returns nothing */
#if DDNN_WITH_CUDA
  #define CHECK_PENDING() DDT(DDBackendCudaCheckPending_Private())
#else
  #define CHECK_PENDING() (void)0
#endif
#define REQUIRE_CUDA_BUILD() \
  do { \
    if (!DDNN_WITH_CUDA) GTEST_SKIP() << "ddnn built without DDNN_WITH_CUDA: the GPU backend is not in this build"; \
  } while (0)
#define REQUIRE_CUDNN() \
  do { \
    if (!DDNN_WITH_CUDNN) GTEST_SKIP() << "ddnn built without cuDNN: /gpu/cuda has no convolution kernel in this build"; \
  } while (0)
#define REQUIRE_DEVICE() \
  do { \
    REQUIRE_CUDA_BUILD(); \
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount() found 0; this device test did not run"; \
  } while (0)
