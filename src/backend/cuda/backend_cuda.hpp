/* The /gpu/cuda backend's entry points for the registry and the tests (C++ only; builds with DDNN_WITH_CUDA). */
#pragma once
#include <ddnn/private/ddbackendimpl.h>
#include <memory>

/* registers /gpu/cuda (also with no device: the name is known, asking for it is the error below) */
PetscErrorCode DDBackendCreate_Cuda(void);
/* an error "no CUDA device" naming cudaGetDeviceCount()'s count and error when this process has none */
PetscErrorCode DDBackendCudaCheckDevice_Private(void);
/* the number of CUDA devices registration found (0 with no device or no driver) */
PetscErrorCode DDBackendCudaGetDeviceCount_Private(int *);
/* raises (and clears) a failure kept by a kernel entry (GEMM, pointwise) that could not return an error */
PetscErrorCode DDBackendCudaCheckPending_Private(void);
/* the convolution kernels on cuDNN (conv_cudnn.cxx); no kernel where cuDNN cannot express the geometry */
template <class T>
PetscErrorCode DDBackendCudaConvCreate_Private(const ddnn::ConvKernelSpec &, std::unique_ptr<ddnn::ConvKernel> *);
/* the cuDNN version this process loaded (cudnnGetVersion()) */
size_t DDBackendCudaCudnnVersion_Private(void);
/* keeps a failure of a kernel entry that returns nothing (the first one wins), raised by DDBackendCudaCheckPending_Private() */
void DDBackendCudaPend_Private(const char what[], const char msg[]);
/* the loss layer's passes and the dropout masks on the device (loss_cuda.cxx) */
template <class T>
PetscErrorCode DDBackendCudaLossCreate_Private(const ddnn::LossKernelSpec &, std::unique_ptr<ddnn::LossKernel> *);
template <class T>
void DDBackendCudaDropout_Private(uint64_t key, double p, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, const PetscInt shape[]);
