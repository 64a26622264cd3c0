/*
  Kernel objects over plain loop functions (C++ only): the reference backend's, and every CPU
  backend whose kernels take strided views (the BLAS GEMM convolution) or box offsets (the fast
  pooling loops). Loops is a struct of static function templates with the signatures of the
  reference loops in src/backend/kernels.hpp.
*/
#pragma once
#include <backend/kernels.hpp>
#include <backend/interface/backends.hpp>
#include <cstring>
#include <string>

namespace ddnn
{
/* The formats loop kernels over strided views take: x's own unless blocked; y like x */
inline PetscErrorCode StridedConvFormats(const ConvGeom &, bool, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, bool *ok)
{
  PetscFunctionBegin;
  if (*xf == DD_FORMAT_BLOCKED) {
    *xf  = DD_FORMAT_PLAIN;
    *xbs = 1;
  }
  *yf  = *xf;
  *ybs = 1;
  *ok  = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A convolution or transposed convolution on strided views (declines blocked tensors) */
template <class T, class Loops>
class LoopConvKernel : public ConvKernel
{
public:
  LoopConvKernel(const ConvKernelSpec &s, DDBackend b, const char *name) : spec(s), backend(b), label(name) { }
  const char    *Name() const override { return label.c_str(); }
  PetscErrorCode Forward(DDTensor x, DDTensor w, PetscObjectState, DDTensor b, DDTensor y) override
  {
    KernelEvent   e(backend, DD_KERNEL_CONV);
    View<const T> xv = CView(MakeView<T>(x, spec.x.lead, spec.x.org, spec.g.D));
    View<T>       yv = MakeView<T>(y, spec.y.lead, spec.y.org, spec.g.D);
    const T      *bp = b ? HostArray<const T>(b) : nullptr;
    PetscFunctionBegin;
    if (spec.transposed) Loops::TForward(spec.g, xv, HostArray<const T>(w), bp, yv);
    else Loops::Forward(spec.g, xv, HostArray<const T>(w), bp, yv);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode BackwardData(DDTensor dy, DDTensor w, PetscObjectState, DDTensor dx) override
  {
    KernelEvent   e(backend, DD_KERNEL_CONV);
    View<T>       xv = MakeView<T>(dx, spec.x.lead, spec.x.org, spec.g.D);
    View<const T> yv = CView(MakeView<T>(dy, spec.y.lead, spec.y.org, spec.g.D));
    PetscFunctionBegin;
    if (spec.transposed) Loops::TBackwardData(spec.g, yv, HostArray<const T>(w), xv);
    else Loops::BackwardData(spec.g, yv, HostArray<const T>(w), xv);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode BackwardWeights(DDTensor x, DDTensor dy, DDTensor dw, DDTensor db) override
  {
    KernelEvent   e(backend, DD_KERNEL_CONV);
    View<const T> xv = CView(MakeView<T>(x, spec.x.lead, spec.x.org, spec.g.D));
    View<const T> yv = CView(MakeView<T>(dy, spec.y.lead, spec.y.org, spec.g.D));
    T            *dbp = db ? HostArray<T>(db) : nullptr;
    PetscFunctionBegin;
    std::memset(HostArray<T>(dw), 0, sizeof(T) * dw->layout.size);
    if (dbp) std::memset(dbp, 0, sizeof(T) * db->layout.size);
    if (spec.transposed) Loops::TBackwardWeights(spec.g, xv, yv, HostArray<T>(dw), dbp);
    else Loops::BackwardWeights(spec.g, xv, yv, HostArray<T>(dw), dbp);
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  ConvKernelSpec spec;
  DDBackend      backend;
  std::string    label;
};

template <class T, class Loops>
PetscErrorCode LoopConvCreate(const ConvKernelSpec &spec, DDBackend b, const char *name, std::unique_ptr<ConvKernel> *k)
{
  PetscFunctionBegin;
  if (spec.x.t->layout.bdim >= 0 || spec.y.t->layout.bdim >= 0) PetscFunctionReturn(PETSC_SUCCESS); /* strided views only */
  k->reset(new LoopConvKernel<T, Loops>(spec, b, name));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A pooling over box offsets (any format) */
template <class T, class Loops>
class LoopPoolKernel : public PoolKernel
{
public:
  LoopPoolKernel(const PoolKernelSpec &s, DDBackend b, const char *name) : g(s.g), backend(b), label(name)
  {
    BoxOffsetsBuild(s.x.t->layout, s.D, s.x.org, s.xn, &xo);
    BoxOffsetsBuild(s.y.t->layout, s.D, s.y.org, s.yn, &yo);
    if (g.max) argmax.resize((size_t)(g.N * g.C * g.out[0] * g.out[1] * g.out[2]));
  }
  const char    *Name() const override { return label.c_str(); }
  PetscErrorCode Forward(DDTensor x, DDTensor y, bool) override
  {
    KernelEvent e(backend, DD_KERNEL_POOL);
    PetscFunctionBegin;
    Loops::Forward(g, HostArray<const T>(x), xo, HostArray<T>(y), yo, argmax.empty() ? nullptr : argmax.data());
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Backward(DDTensor dy, DDTensor dx) override
  {
    KernelEvent e(backend, DD_KERNEL_POOL);
    PetscFunctionBegin;
    Loops::Backward(g, HostArray<const T>(dy), yo, HostArray<T>(dx), xo, argmax.empty() ? nullptr : argmax.data());
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  PoolGeom              g;
  BoxOffsets            xo, yo;
  std::vector<PetscInt> argmax;
  DDBackend             backend;
  std::string           label;
};
} // namespace ddnn
