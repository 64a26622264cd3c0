/*
  The convolution kernels of /gpu/cuda on cuDNN (issue 11, part 1): convolution and transposed
  convolution, forward, backward-data and backward-weights, 1-3-D, any stride and dilation, channel
  groups, float32 and float64, on the strided windows of plain and channels-last tensors (a halo'd
  input window is a sub-box of its tensor's storage: cuDNN's Nd tensor descriptors carry its strides).

  The math is the local convolution of paper 000 sec. 4.1 (the halo'd window is already padded), and
  its adjoints: a transposed convolution is the adjoint of the convolution that maps its output box to
  its input window (weights (Ci, Co/groups, k...) are that convolution's filter, Co/groups input
  channels per group), so
    convolution:   Forward = cuDNN forward,       BackwardData = backward-data,  BackwardWeights = backward-filter
    transposed:    Forward = cuDNN backward-data, BackwardData = forward,        BackwardWeights = backward-filter
  with the roles of the window and the box swapped for the transposed one. The bias is added with
  cudnnAddTensor and its gradient summed with cudnnConvolutionBackwardBias.

  Declined (no kernel: the caller's error names the kernel kind) where cuDNN cannot say it:
  blocked tensors, groups over partitioned channels (ConvGeom's cig > 0), or windows whose extent is
  not the one cuDNN's output-size rule gives. A transposed convolution whose crops are not those of a
  symmetric padding p = pl with 0 <= pr <= pl < pr + s (PyTorch's padding and output_padding), as
  the pieces of a distributed one have (a piece's box starts and ends anywhere in the full output,
  paper 000 sec. 4.1 with the halo of the adjoint), runs through a packed buffer E holding its full
  output (crops 0: extent (in - 1) s + (k - 1) d + 1 per dimension, cuDNN padding 0): the forward
  writes E and the box takes E's rows it covers (zero where the box reaches beyond E); the backward
  passes read the box's gradient embedded in E (zero elsewhere), which is the exact adjoint. On channels-last tensors the filter is given to cuDNN channels-last too (its NHWC
  kernels want data and filter in one format): the weights, (Co, Ci/groups, k...) in C order, are
  permuted into a device buffer on every call that reads them, and the weight gradient back. Empty pieces (no samples, channels or positions) are kept: nothing to compute, and the
  weight gradients are zero (the bias is still written where there are output positions).

  Algorithms: cuDNN's find (cudnnFind*Algorithm, which times them) once per kernel at set-up; the
  fastest that succeeds within the workspace bound -dd_cudnn_workspace_mb (default 1024) is kept,
  with one workspace from the backend's pool for the three passes. Where no algorithm of a pass
  takes the strided window or box (cuDNN 9.19 on an H200 has no float64 channels-last kernels for
  backward-data, nor for 3-D at all), that pass runs on packed plain copies: the window and box are
  gathered into packed (N, C, spatial) buffers (cuda::Copy), the pass runs with the plain filter, and
  its result is scattered back, added where the pass accumulates (cuda::Axpby). float32 runs in float32 (FMA math)
  unless -dd_cuda_tf32 allows TF32 tensor cores (PyTorch's torch.backends.cudnn.allow_tf32).
*/
#include <sys/ddcxx.hpp>
#include <backend/interface/backends.hpp>
#include <backend/common/loopkernels.hpp>
#include <backend/cuda/backend_cuda.hpp>
#include <backend/cuda/cudakernels.hpp>
#include <cudnn.h>
#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>

using namespace ddnn;

#define DDCallCUDNN(call) \
  do { \
    cudnnStatus_t s_ = (call); \
    PetscCheck(s_ == CUDNN_STATUS_SUCCESS, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: %s failed: %s", #call, cudnnGetErrorString(s_)); \
  } while (0)

namespace
{
cudnnHandle_t theHandle = nullptr;

PetscErrorCode DestroyHandle(void)
{
  PetscFunctionBegin;
  if (theHandle) (void)cudnnDestroy(theHandle);
  theHandle = nullptr;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the process's cuDNN handle, made on first use (after the device was selected: tensors exist) */
PetscErrorCode Handle(cudnnHandle_t *h)
{
  PetscFunctionBegin;
  if (!theHandle) {
    DDCallCUDNN(cudnnCreate(&theHandle));
    PetscCall(PetscRegisterFinalize(DestroyHandle));
  }
  *h = theHandle;
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
constexpr cudnnDataType_t CudnnType()
{
  return std::is_same<T, float>::value ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

/*
  A strided box (N, C, sp) as cuDNN's Nd descriptor: nd = 4 for 1-D and 2-D problems (the 1-D one with
  height 1), 5 for 3-D. ddnn's views give unit dimensions stride 0; cuDNN wants positive strides, so
  those get the stride a packed tensor in the same memory order would give them.
*/
struct BoxDesc {
  int  dims[5], strides[5];
  bool cinner; /* channels are the innermost storage dimension */
};
template <class T>
BoxDesc Describe(int nd, PetscInt N, PetscInt C, const PetscInt sp[3], const View<T> &v)
{
  BoxDesc         d;
  const PetscInt  s[3] = {v.s0, v.s1, v.s2};
  PetscInt        dim[5], str[5];
  dim[0] = N, str[0] = v.sn, dim[1] = C, str[1] = v.sc;
  for (int j = 2; j < nd; j++) dim[j] = sp[3 - (nd - j)], str[j] = s[3 - (nd - j)];
  /* memory order, outermost first: N, C, spatial (plain) or N, spatial, C (channels innermost) */
  bool cinner = true;
  for (int j = 2; j < nd; j++)
    if (dim[j] > 1 && str[j] < str[1]) cinner = false;
  if (dim[1] <= 1) cinner = false;
  int order[5], m = 0;
  order[m++] = 0;
  if (!cinner) order[m++] = 1;
  for (int j = 2; j < nd; j++) order[m++] = j;
  if (cinner) order[m++] = 1;
  PetscInt inner = 1; /* the stride a unit dimension takes: the extent of what lies inside it */
  for (int q = nd - 1; q >= 0; q--) {
    const int j = order[q];
    if (dim[j] <= 1 || str[j] <= 0) str[j] = inner;
    inner = std::max(inner, str[j] * std::max<PetscInt>(dim[j], 1));
  }
  for (int j = 0; j < nd; j++) d.dims[j] = (int)dim[j], d.strides[j] = (int)str[j];
  d.cinner = cinner;
  return d;
}

template <class T>
class CudnnConvKernel : public ConvKernel
{
public:
  ~CudnnConvKernel() override
  {
    for (cudnnTensorDescriptor_t *t : {&adesc, &bdesc, &odesc, &biasdesc, &apk, &bpk})
      if (*t) (void)cudnnDestroyTensorDescriptor(*t);
    for (cudnnFilterDescriptor_t *f : {&fdesc, &fplain, &fdescT})
      if (*f) (void)cudnnDestroyFilterDescriptor(*f);
    for (cudnnConvolutionDescriptor_t *c : {&cdesc, &cdescT})
      if (*c) (void)cudnnDestroyConvolutionDescriptor(*c);
    if (wT) (void)backend->mem.free(wT);
    if (ws) (void)backend->mem.free(ws);
    if (wperm) (void)backend->mem.free(wperm);
    if (abuf) (void)backend->mem.free(abuf);
    if (bbuf) (void)backend->mem.free(bbuf);
    if (ebuf) (void)backend->mem.free(ebuf);
  }
  const char *Name() const override { return label.c_str(); }

  /* PETSC_SUCCESS with *ok = false: cuDNN cannot express this geometry */
  PetscErrorCode SetUp(const ConvKernelSpec &s, bool *ok)
  {
    const ConvTGeom &g  = s.g;
    const int        nd = g.D == 3 ? 5 : 4, ns = nd - 2;
    int              pad[3], str[3], dil[3];
    PetscInt         full[3] = {1, 1, 1}; /* crop: the extents of the full transposed output E */

    PetscFunctionBegin;
    spec    = s;
    *ok     = false;
    backend = DDBackendLookup_Private("/gpu/cuda");
    if (s.x.t->layout.bdim >= 0 || s.y.t->layout.bdim >= 0 || g.cig > 0 || g.groups < 1) PetscFunctionReturn(PETSC_SUCCESS);
    for (int j = 0; j < ns; j++) {
      const int q = 3 - ns + j;
      str[j]      = (int)g.s[q];
      dil[j]      = (int)g.d[q];
      pad[j]      = 0;
      if (s.transposed) {
        if (g.pr[q] >= 0 && g.pr[q] <= g.pl[q] && g.pl[q] < g.pr[q] + g.s[q]) pad[j] = (int)g.pl[q];
        else crop = true;
      }
    }
    if (crop)
      for (int j = 0; j < ns; j++) {
        const int q = 3 - ns + j;
        pad[j]      = 0;
        full[q]     = g.in[q] > 0 ? (g.in[q] - 1) * g.s[q] + (g.k[q] - 1) * g.d[q] + 1 : 0;
      }
    for (int j = 0; j < ns; j++) padA[j] = pad[j];
    /* the convolution's input side A and output side B: conv A = x window, B = y box; transposed the other way */
    const PetscInt CA = s.transposed ? g.Co : g.Ci, CB = s.transposed ? g.Ci : g.Co;
    const PetscInt *spA = s.transposed ? (crop ? full : g.out) : g.in, *spB = s.transposed ? g.in : g.out;
    /* the output box (Co channels): the bias is added to it and summed from its gradient, also where nothing is convolved */
    outbox = g.N > 0 && g.Co > 0;
    for (int j = 0; j < 3; j++) outbox = outbox && g.out[j] > 0;
    empty = !outbox || CA <= 0 || CB <= 0;
    for (int j = 0; j < 3; j++) empty = empty || spA[j] <= 0 || spB[j] <= 0;
    const View<T> xv = MakeView<T>(s.x.t, s.x.lead, s.x.org, g.D), yv = MakeView<T>(s.y.t, s.y.lead, s.y.org, g.D);
    if (outbox) {
      PetscCall(Handle(&h));
      const BoxDesc O = Describe<T>(nd, g.N, g.Co, g.out, yv);
      int           bd[5] = {1, (int)g.Co, 1, 1, 1}, bs[5] = {(int)g.Co, 1, 1, 1, 1};
      DDCallCUDNN(cudnnCreateTensorDescriptor(&odesc));
      DDCallCUDNN(cudnnCreateTensorDescriptor(&biasdesc));
      DDCallCUDNN(cudnnSetTensorNdDescriptor(odesc, CudnnType<T>(), nd, O.dims, O.strides));
      DDCallCUDNN(cudnnSetTensorNdDescriptor(biasdesc, CudnnType<T>(), nd, bd, bs));
    }
    if (empty) {
      *ok   = true;
      label = "cuDNN (nothing to convolve on this piece)";
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    const BoxDesc A = crop ? Packed(nd, g.N, CA, spA, Describe<T>(nd, g.N, CA, g.out, yv).cinner) : Describe<T>(nd, g.N, CA, spA, s.transposed ? yv : xv), B = Describe<T>(nd, g.N, CB, spB, s.transposed ? xv : yv);
    if (crop) PetscCall(CropSetUp(nd, A, Describe<T>(nd, g.N, CA, g.out, yv)));
    DDCallCUDNN(cudnnCreateTensorDescriptor(&adesc));
    DDCallCUDNN(cudnnCreateTensorDescriptor(&bdesc));
    DDCallCUDNN(cudnnCreateFilterDescriptor(&fdesc));
    DDCallCUDNN(cudnnCreateConvolutionDescriptor(&cdesc));
    DDCallCUDNN(cudnnSetTensorNdDescriptor(adesc, CudnnType<T>(), nd, A.dims, A.strides));
    DDCallCUDNN(cudnnSetTensorNdDescriptor(bdesc, CudnnType<T>(), nd, B.dims, B.strides));
    boxA = A, boxB = B, ndims = nd;
    int fd[5] = {(int)CB, (int)(CA / g.groups), 1, 1, 1};
    for (int j = 0; j < ns; j++) fd[2 + j] = (int)g.k[3 - ns + j];
    /* channels-last data: a channels-last filter (K, k..., C/groups) in a buffer */
    nhwc = A.cinner && B.cinner;
    wrows = fd[0], wcols = fd[1], wtaps = g.KK();
    if (nhwc) PetscCall(backend->mem.malloc(sizeof(T) * (size_t)(wrows * wcols * wtaps), &wperm));
    DDCallCUDNN(cudnnSetFilterNdDescriptor(fdesc, CudnnType<T>(), nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nd, fd));
    for (int j = 0; j < nd; j++) fdims[j] = fd[j];
    DDCallCUDNN(cudnnSetConvolutionNdDescriptor(cdesc, ns, pad, str, dil, CUDNN_CROSS_CORRELATION, CudnnType<T>()));
    DDCallCUDNN(cudnnSetConvolutionGroupCount(cdesc, (int)g.groups));
    PetscBool tf32 = PETSC_FALSE;
    PetscCall(PetscOptionsGetBool(NULL, NULL, "-dd_cuda_tf32", &tf32, NULL));
    DDCallCUDNN(cudnnSetConvolutionMathType(cdesc, tf32 && std::is_same<T, float>::value ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    /* the window must be exactly what cuDNN's output-size rule reads */
    int od[5];
    DDCallCUDNN(cudnnGetConvolutionNdForwardOutputDim(cdesc, adesc, fdesc, nd, od));
    for (int j = 0; j < nd; j++)
      if (od[j] != B.dims[j]) {
        PetscCall(PetscInfo(NULL, "/gpu/cuda conv: declined, the box's extent %d in dimension %d is not cuDNN's %d\n", B.dims[j], j, od[j]));
        PetscFunctionReturn(PETSC_SUCCESS);
      }
    PetscCall(FindAlgorithms(s.backward));
    if (crop) label += " through a full-size buffer";
    *ok = true;
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Forward(DDTensor x, DDTensor w, PetscObjectState, DDTensor b, DDTensor y) override
  {
    KernelEvent e(backend, DD_KERNEL_CONV);
    const T     one = 1, zero = 0;

    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    if (!outbox) PetscFunctionReturn(PETSC_SUCCESS);
    const T *xp = Ptr(x, spec.x);
    T       *yp = Ptr(y, spec.y);
    if (empty) DDCallCUDNN(cudnnSetTensor(h, odesc, yp, &zero));
    else if (!spec.transposed) PetscCall(PassForward(xp, w, yp, false));
    else if (!crop) PetscCall(PassBackwardData(w, xp, yp, false));
    else {
      PetscCall(PassBackwardData(w, xp, (T *)ebuf, false));
      PetscCall(CropToBox(yp));
    }
    if (b) DDCallCUDNN(cudnnAddTensor(h, &one, biasdesc, HostArray<const T>(b), &one, odesc, yp));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode BackwardData(DDTensor dy, DDTensor w, PetscObjectState, DDTensor dx) override
  {
    KernelEvent e(backend, DD_KERNEL_CONV);

    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    if (empty) PetscFunctionReturn(PETSC_SUCCESS);
    const T *dyp = Ptr(dy, spec.y);
    T       *dxp = Ptr(dx, spec.x);
    /* dx += J_x^* dy */
    if (!spec.transposed) PetscCall(PassBackwardData(w, dyp, dxp, true));
    else if (!crop) PetscCall(PassForward(dyp, w, dxp, true));
    else {
      PetscCall(EmbedBox(dyp));
      PetscCall(PassForward((const T *)ebuf, w, dxp, true));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode BackwardWeights(DDTensor x, DDTensor dy, DDTensor dw, DDTensor db) override
  {
    KernelEvent e(backend, DD_KERNEL_CONV);
    const T     one = 1, zero = 0;

    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    const T *xp = Ptr(x, spec.x), *dyp = Ptr(dy, spec.y);
    if (empty) PetscCall(backend->mem.set(dw->array, 0, sizeof(T) * (size_t)dw->layout.size));
    else if (!spec.transposed) PetscCall(PassBackwardFilter(xp, dyp, dw));
    else if (!crop) PetscCall(PassBackwardFilter(dyp, xp, dw));
    else {
      PetscCall(EmbedBox(dyp));
      PetscCall(PassBackwardFilter((const T *)ebuf, xp, dw));
    }
    if (db && outbox) DDCallCUDNN(cudnnConvolutionBackwardBias(h, &one, odesc, dyp, &zero, biasdesc, HostArray<T>(db)));
    else if (db) PetscCall(backend->mem.set(db->array, 0, sizeof(T) * (size_t)db->layout.size));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  ConvKernelSpec                     spec;
  DDBackend                          backend = nullptr;
  std::string                        label;
  bool                               empty = false, outbox = false; /* nothing to convolve; an output box to write */
  int                                padA[3] = {0, 0, 0};                  /* cuDNN's padding of A */
  /* crop: a transposed convolution through its full output E (packed), the box covering part of it */
  bool                               crop = false, ovempty = true;
  void                              *ebuf = nullptr;
  int64_t                            ebulk = 0;
  cuda::Layout                       ybox, yov, eov; /* the y box, its part inside E, and that part of E */
  cudnnHandle_t                      h     = nullptr;
  cudnnTensorDescriptor_t            adesc = nullptr, bdesc = nullptr, odesc = nullptr, biasdesc = nullptr; /* conv input, conv output, y box, bias */
  cudnnTensorDescriptor_t            apk = nullptr, bpk = nullptr;          /* the packed copies of A and B */
  cuda::Layout                       aview, bview, apack, bpack;            /* A, B as strided views and as packed buffers, for the copies */
  void                              *abuf = nullptr, *bbuf = nullptr;
  bool                               stage[3] = {false, false, false};     /* forward, backward-data, backward-filter run on packed copies */
  cudnnFilterDescriptor_t            fdesc = nullptr, fplain = nullptr; /* the filter as the strided data want it; plain, for the packed copies */
  int                                fdims[5] = {0};
  cudnnConvolutionDescriptor_t       cdesc = nullptr;
  cudnnConvolutionFwdAlgo_t          fwd   = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t      bwdd  = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t    bwdf  = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t                             wsfwd = 0, wsbwdd = 0, wsbwdf = 0;
  void                              *ws    = nullptr;

  BoxDesc                            boxA{}, boxB{};
  /* backward-data as a forward convolution (unit strides): B -> A with the transposed filter, flipped by CUDNN_CONVOLUTION */
  bool                               dgradfwd = false;
  float                              bwddms   = 0;
  cudnnConvolutionDescriptor_t       cdescT   = nullptr;
  cudnnFilterDescriptor_t            fdescT   = nullptr;
  cudnnConvolutionFwdAlgo_t          fwdT     = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t                             wsT      = 0;
  void                              *wT       = nullptr;
  int                                ndims = 4;
  bool                               nhwc  = false; /* the filter is channels-last, in wperm */
  PetscInt                           wrows = 0, wcols = 0, wtaps = 0;
  void                              *wperm = nullptr;

  static T *Ptr(DDTensor t, const KernelWindow &win) { return (T *)t->array + LayoutOffset(t->layout, win.org); }

  /* dst (layout to) = src (layout from), or += where add: the device copies between strided views, packed buffers and filter orders */
  static PetscErrorCode Move(const cuda::Layout &from, const void *src, const cuda::Layout &to, void *dst, bool add, const char what[])
  {
    PetscFunctionBegin;
    const int         dt = std::is_same<T, float>::value ? 0 : 1;
    const cudaError_t e  = add ? cuda::Axpby(dt, 1.0, from, src, 1.0, to, dst) : cuda::Copy(dt, from, src, to, dst);
    PetscCheck(e == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: the convolution's %s kernel failed: %s", what, cudaGetErrorString(e));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /*
    The filter (CB, CA/G, taps) = (G, O, I, S) entries (O = CB/G, I = CA/G) in one of four storage
    orders: C order (G, O, I, S); channels-last (G, O, S, I); swap: the forward full convolution's
    filter with the channel roles swapped per group, (G, I, O, S) or channels-last (G, I, S, O)
  */
  cuda::Layout FilterLayout(bool swap, bool last) const
  {
    const int64_t G = spec.g.groups, O = wrows / G, I = wcols, S = wtaps;
    cuda::Layout  L;
    L.order = 4, L.bulk = G * O * I * S;
    L.n[0] = G, L.n[1] = O, L.n[2] = I, L.n[3] = S;
    const int64_t st[4][4] = {{O * I * S, I * S, S, 1}, {O * S * I, S * I, 1, I}, {I * O * S, S, O * S, 1}, {I * S * O, 1, S * O, O}};
    for (int j = 0; j < 4; j++) L.stride[j] = st[2 * swap + last][j];
    L.contig = !swap && !last;
    return L;
  }
  /* the filter of a pass as cuDNN reads it: channels-last (permuted into wperm) where the pass runs on channels-last data, else w itself */
  PetscErrorCode Filter(int pass, DDTensor w, const T **fp, cudnnFilterDescriptor_t *fd)
  {
    PetscFunctionBegin;
    *fp = HostArray<const T>(w);
    *fd = stage[pass] ? fplain : fdesc;
    if (nhwc && !stage[pass]) {
      PetscCall(Move(FilterLayout(false, false), w->array, FilterLayout(false, true), wperm, false, "filter permutation"));
      *fp = (const T *)wperm;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* the fastest algorithm of a find that succeeded within the bound (*found false: none; why: what cuDNN said of each) */
  template <class Perf, class Algo>
  static void Pick(const Perf *p, int n, size_t bound, Algo *algo, size_t *bytes, bool *found, std::string *why, float *ms = nullptr)
  {
    *found = false;
    for (int i = 0; i < n; i++) {
      *why += " " + std::to_string((int)p[i].algo) + ":" + cudnnGetErrorString(p[i].status) + (p[i].status == CUDNN_STATUS_SUCCESS ? "/" + std::to_string(p[i].memory >> 20) + "MiB" : "");
      if (!*found && p[i].status == CUDNN_STATUS_SUCCESS && p[i].memory <= bound) {
        *algo  = p[i].algo;
        *bytes = p[i].memory;
        *found = true;
        if (ms) *ms = p[i].time;
      }
    }
  }

  /* A or B as a cuda::Layout: the strided view, or a packed buffer in plain (N, C, spatial) order */
  static cuda::Layout ViewLayout(const BoxDesc &d, int nd, bool packed)
  {
    cuda::Layout L;
    L.order = nd, L.bulk = 1;
    for (int j = 0; j < nd; j++) L.n[j] = d.dims[j], L.bulk *= d.dims[j];
    if (!packed) {
      for (int j = 0; j < nd; j++) L.stride[j] = d.strides[j];
      return L;
    }
    int64_t st = 1;
    for (int j = nd - 1; j >= 0; j--) L.stride[j] = st, st *= d.dims[j];
    L.contig = true;
    return L;
  }

  /* the packed descriptors and buffers, made once when a pass first needs them */
  PetscErrorCode MakePacked(void)
  {
    PetscFunctionBegin;
    if (apk) PetscFunctionReturn(PETSC_SUCCESS);
    aview = ViewLayout(boxA, ndims, false), apack = ViewLayout(boxA, ndims, true);
    bview = ViewLayout(boxB, ndims, false), bpack = ViewLayout(boxB, ndims, true);
    int as[5], bs[5];
    for (int j = 0; j < ndims; j++) as[j] = (int)apack.stride[j], bs[j] = (int)bpack.stride[j];
    DDCallCUDNN(cudnnCreateTensorDescriptor(&apk));
    DDCallCUDNN(cudnnCreateTensorDescriptor(&bpk));
    DDCallCUDNN(cudnnSetTensorNdDescriptor(apk, CudnnType<T>(), ndims, boxA.dims, as));
    DDCallCUDNN(cudnnSetTensorNdDescriptor(bpk, CudnnType<T>(), ndims, boxB.dims, bs));
    DDCallCUDNN(cudnnCreateFilterDescriptor(&fplain));
    DDCallCUDNN(cudnnSetFilterNdDescriptor(fplain, CudnnType<T>(), CUDNN_TENSOR_NCHW, ndims, fdims));
    PetscCall(backend->mem.malloc(sizeof(T) * (size_t)apack.bulk, &abuf));
    PetscCall(backend->mem.malloc(sizeof(T) * (size_t)bpack.bulk, &bbuf));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* a packed box (N, C, sp) in plain order, or channels innermost (N, sp, C) */
  static BoxDesc Packed(int nd, PetscInt N, PetscInt C, const PetscInt sp[3], bool cinner)
  {
    BoxDesc d;
    int     order[5], m = 0;
    order[m++] = 0;
    if (!cinner) order[m++] = 1;
    for (int j = 2; j < nd; j++) order[m++] = j;
    if (cinner) order[m++] = 1;
    d.dims[0] = (int)N, d.dims[1] = (int)C;
    for (int j = 2; j < nd; j++) d.dims[j] = (int)sp[3 - (nd - j)];
    int st = 1;
    for (int q = nd - 1; q >= 0; q--) {
      d.strides[order[q]] = st;
      st *= std::max(d.dims[order[q]], 1);
    }
    d.cinner = cinner;
    return d;
  }

  /*
    crop: E (the descriptor E of A) and the copies between the y box O and E: box index lo is E's
    lo + pl, so the box's rows [max(0, -pl), min(out, F - pl)) are E's rows from max(pl, 0)
  */
  PetscErrorCode CropSetUp(int nd, const BoxDesc &E, const BoxDesc &O)
  {
    const ConvTGeom &g = spec.g;
    PetscFunctionBegin;
    ebulk = 1;
    for (int j = 0; j < nd; j++) ebulk *= E.dims[j];
    PetscCall(backend->mem.malloc(sizeof(T) * (size_t)std::max<int64_t>(ebulk, 1), &ebuf));
    for (cuda::Layout *L : {&ybox, &yov, &eov}) L->order = nd;
    ovempty = false;
    for (int j = 0; j < nd; j++) {
      ybox.n[j] = O.dims[j], ybox.stride[j] = O.strides[j];
      yov.stride[j] = O.strides[j], eov.stride[j] = E.strides[j];
      if (j < 2) {
        yov.n[j] = eov.n[j] = O.dims[j];
        continue;
      }
      const int      q  = 3 - (nd - j);
      const PetscInt b0 = std::max<PetscInt>(0, -g.pl[q]), b1 = std::min<PetscInt>(g.out[q], E.dims[j] - g.pl[q]);
      yov.n[j] = eov.n[j] = std::max<PetscInt>(b1 - b0, 0);
      yov.lo[j] = b0, eov.lo[j] = b0 + g.pl[q];
      if (b1 <= b0) ovempty = true;
    }
    ybox.bulk = yov.bulk = eov.bulk = 1;
    for (int j = 0; j < nd; j++) ybox.bulk *= ybox.n[j], yov.bulk *= yov.n[j];
    eov.bulk = yov.bulk;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* crop: the box = its part of E, zero beyond E */
  PetscErrorCode CropToBox(T *yp)
  {
    PetscFunctionBegin;
    const int dt = std::is_same<T, float>::value ? 0 : 1;
    if (!ovempty && yov.bulk == ybox.bulk) PetscCall(Move(eov, ebuf, yov, yp, false, "crop"));
    else {
      const cudaError_t e = cuda::Set(dt, ybox, yp, 0.0);
      PetscCheck(e == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: the convolution's box zeroing kernel failed: %s", cudaGetErrorString(e));
      if (!ovempty) PetscCall(Move(eov, ebuf, yov, yp, false, "crop"));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* crop: E = the box's gradient where the box covers E, zero elsewhere */
  PetscErrorCode EmbedBox(const T *dyp)
  {
    PetscFunctionBegin;
    PetscCall(backend->mem.set(ebuf, 0, sizeof(T) * (size_t)ebulk));
    if (!ovempty) PetscCall(Move(yov, dyp, eov, ebuf, false, "embedding"));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /*
    cuDNN's find for the passes the kernel runs (the transposed forward is a backward-data), first on
    the strided descriptors, then, where none succeeds, on the packed ones (the pass is staged)
  */
  PetscErrorCode FindAlgorithms(bool backward)
  {
    PetscInt mb = 1024;
    int      n;
    bool     found;

    PetscFunctionBegin;
    PetscCall(PetscOptionsGetInt(NULL, NULL, "-dd_cudnn_workspace_mb", &mb, NULL));
    PetscCheck(mb >= 0, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "-dd_cudnn_workspace_mb %" PetscInt_FMT " must be >= 0", mb);
    const size_t bound = (size_t)mb << 20;
    const bool   need[3] = {!spec.transposed || backward, spec.transposed || backward, backward};
    const char  *what[3] = {"forward", "backward-data", "backward-filter"};
    std::string  algos;
    for (int pass = 0; pass < 3; pass++) {
      std::string why;
      if (!need[pass]) continue;
      found = false;
      /* cuDNN's find on the strided, then the packed descriptors; last its heuristics (cudnnGet*_v7) on the packed ones */
      for (int attempt = 0; attempt < 3 && !found; attempt++) {
        const bool packed = attempt > 0, heur = attempt == 2;
        if (packed) PetscCall(MakePacked());
        cudnnTensorDescriptor_t a = packed ? apk : adesc, b = packed ? bpk : bdesc;
        cudnnFilterDescriptor_t fdesc = packed ? fplain : this->fdesc;
        why += attempt == 0 ? " find (strided):" : attempt == 1 ? "; find (packed):" : "; heuristics (packed):";
        if (pass == 0) {
          cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
          if (heur) DDCallCUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, a, fdesc, cdesc, b, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p));
          else DDCallCUDNN(cudnnFindConvolutionForwardAlgorithm(h, a, fdesc, cdesc, b, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p));
          Pick(p, n, bound, &fwd, &wsfwd, &found, &why);
        } else if (pass == 1) {
          cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
          if (heur) DDCallCUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, fdesc, b, cdesc, a, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, p));
          else DDCallCUDNN(cudnnFindConvolutionBackwardDataAlgorithm(h, fdesc, b, cdesc, a, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, p));
          Pick(p, n, bound, &bwdd, &wsbwdd, &found, &why, &bwddms);
        } else {
          cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
          if (heur) DDCallCUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, a, b, cdesc, fdesc, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, p));
          else DDCallCUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(h, a, b, cdesc, fdesc, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, p));
          Pick(p, n, bound, &bwdf, &wsbwdf, &found, &why);
        }
        stage[pass] = found && packed;
      }
      PetscCheck(found, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: cuDNN found no %s algorithm for this convolution (%s %s, %s, groups %" PetscInt_FMT ") within -dd_cudnn_workspace_mb %" PetscInt_FMT ";%s", what[pass], spec.transposed ? "transposed" : "convolution",
                 std::is_same<T, float>::value ? "float32" : "float64", boxA.cinner ? "channels-last" : "plain", spec.g.groups, mb, why.c_str());
      const int algo = pass == 0 ? (int)fwd : pass == 1 ? (int)bwdd : (int)bwdf;
      algos += std::string(" ") + what[pass] + " " + std::to_string(algo) + (stage[pass] ? " (packed)" : "");
      if (pass == 1 && !stage[1]) {
        PetscCall(FindDgradAsForward(bound));
        if (dgradfwd) algos += " (as a forward full convolution, algorithm " + std::to_string((int)fwdT) + ")";
      }
    }
    const size_t bytes = std::max(std::max(wsfwd, wsT), std::max(wsbwdd, wsbwdf));
    if (bytes) PetscCall(backend->mem.malloc(bytes, &ws));
    label = std::string("cuDNN") + (spec.transposed ? " transposed" : "") + " (algorithms" + algos + ")";
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /*
    The three cuDNN passes on A (the convolution's input side) and B (its output side), strided or
    staged through the packed buffers; beta 1 accumulates into the output
  */
  /*
    The adjoint of a unit-stride convolution A -> B (paper 000 sec. 4.1: J_x^* is a convolution with
    the transposed, flipped kernel) as a forward convolution B -> A: padding (k - 1) d - p, the same
    dilation and groups, CUDNN_CONVOLUTION (cuDNN flips the taps), and the filter with its two
    channel roles swapped within each group, (G, CB/G, CA/G, taps) -> (G, CA/G, CB/G, taps), or
    channels-last (G, CA/G, taps, CB/G). Kept where it runs faster than the best backward-data
    algorithm, both timed at set-up as they run (accumulating, on scratch buffers; float64
    backward-data into a 2-D window is several times slower than the forward on an H200);
    -dd_cudnn_dgrad_forward <bool> forces it where it applies (true) or never (false).
  */
  PetscErrorCode FindDgradAsForward(size_t bound)
  {
    const ConvTGeom &g  = spec.g;
    const int        ns = ndims - 2;
    int              pad[3], one[3], dil[3], fd[5];
    int              n;
    bool             found;
    std::string      why;
    float            ms = 0;

    PetscFunctionBegin;
    for (int j = 0; j < ns; j++) {
      const int q = 3 - ns + j;
      if (g.s[q] != 1) PetscFunctionReturn(PETSC_SUCCESS);
      one[j] = 1, dil[j] = (int)g.d[q];
      pad[j] = (int)((g.k[q] - 1) * g.d[q] - padA[j]);
      if (pad[j] < 0) PetscFunctionReturn(PETSC_SUCCESS);
    }
    fd[0] = boxA.dims[1], fd[1] = boxB.dims[1] / (int)g.groups;
    for (int j = 2; j < ndims; j++) fd[j] = fdims[j];
    DDCallCUDNN(cudnnCreateConvolutionDescriptor(&cdescT));
    DDCallCUDNN(cudnnCreateFilterDescriptor(&fdescT));
    DDCallCUDNN(cudnnSetConvolutionNdDescriptor(cdescT, ns, pad, one, dil, CUDNN_CONVOLUTION, CudnnType<T>()));
    DDCallCUDNN(cudnnSetConvolutionGroupCount(cdescT, (int)g.groups));
    cudnnMathType_t math;
    DDCallCUDNN(cudnnGetConvolutionMathType(cdesc, &math));
    DDCallCUDNN(cudnnSetConvolutionMathType(cdescT, math));
    DDCallCUDNN(cudnnSetFilterNdDescriptor(fdescT, CudnnType<T>(), nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, ndims, fd));
    int od[5];
    DDCallCUDNN(cudnnGetConvolutionNdForwardOutputDim(cdescT, bdesc, fdescT, ndims, od));
    for (int j = 0; j < ndims; j++)
      if (od[j] != boxA.dims[j]) PetscFunctionReturn(PETSC_SUCCESS);
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    DDCallCUDNN(cudnnFindConvolutionForwardAlgorithm(h, bdesc, fdescT, cdescT, adesc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p));
    Pick(p, n, bound, &fwdT, &wsT, &found, &why, &ms);
    PetscBool force = PETSC_FALSE, set = PETSC_FALSE;
    PetscCall(PetscOptionsGetBool(NULL, NULL, "-dd_cudnn_dgrad_forward", &force, &set));
    bool use = found && (set ? (bool)force : true);
    if (use) PetscCall(backend->mem.malloc(sizeof(T) * (size_t)(wrows * wcols * wtaps), &wT));
    if (use && !set) { /* cuDNN's find times its passes with beta 0: time both as they run, accumulating */
      double tb, tf;
      PetscCall(TimeDgrad(false, &tb));
      PetscCall(TimeDgrad(true, &tf));
      use = tf < 0.9 * tb; /* clearly faster: the filter transposition costs a little */
      PetscCall(PetscInfo(NULL, "/gpu/cuda conv: backward-data %g ms, as a forward convolution %g ms (find: %g, %g)\n", tb, tf, (double)bwddms, (double)ms));
    }
    if (!use) {
      wsT = 0;
      if (wT) PetscCall(backend->mem.free(wT));
      wT = nullptr;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    dgradfwd = true;
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* the storage extent (entries) of a strided box */
  static size_t Extent(const BoxDesc &d, int nd)
  {
    size_t e = 1;
    for (int j = 0; j < nd; j++) e += (size_t)(d.dims[j] - 1) * (size_t)d.strides[j];
    return e;
  }

  /* the median time (ms) of backward-data (asfwd: as the forward full convolution) accumulating into scratch buffers of the window's and box's extents */
  PetscErrorCode TimeDgrad(bool asfwd, double *ms)
  {
    const size_t ea = Extent(boxA, ndims), eb = Extent(boxB, ndims), ew = (size_t)(wrows * wcols * wtaps);
    const size_t wsz = asfwd ? wsT : wsbwdd;
    void        *a = nullptr, *b = nullptr, *w = nullptr, *wk = nullptr;
    const T      one = 1;
    cudaEvent_t  e0, e1;
    float        t[3];

    PetscFunctionBegin;
    PetscCall(backend->mem.malloc(sizeof(T) * ea, &a));
    PetscCall(backend->mem.malloc(sizeof(T) * eb, &b));
    PetscCall(backend->mem.malloc(sizeof(T) * ew, &w));
    if (wsz) PetscCall(backend->mem.malloc(wsz, &wk));
    PetscCheck(cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: cudaEventCreate failed");
    for (int r = 0; r < 4; r++) { /* one warm-up */
      PetscCheck(cudaEventRecord(e0) == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: cudaEventRecord failed");
      if (asfwd) {
        PetscCall(Move(FilterLayout(false, false), w, FilterLayout(true, nhwc), wT, false, "filter transposition"));
        DDCallCUDNN(cudnnConvolutionForward(h, &one, bdesc, b, fdescT, wT, cdescT, fwdT, wk, wsT, &one, adesc, a));
      } else DDCallCUDNN(cudnnConvolutionBackwardData(h, &one, fdesc, w, bdesc, b, cdesc, bwdd, wk, wsbwdd, &one, adesc, a));
      PetscCheck(cudaEventRecord(e1) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: cudaEventRecord failed");
      if (r) PetscCheck(cudaEventElapsedTime(&t[r - 1], e0, e1) == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: cudaEventElapsedTime failed");
    }
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    std::sort(t, t + 3);
    *ms = t[1];
    for (void *q : {a, b, w, wk})
      if (q) PetscCall(backend->mem.free(q));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode PassForward(const T *a, DDTensor w, T *b, bool add)
  {
    const T                 one = 1, beta = add ? 1 : 0, zero = 0;
    const T                *f;
    cudnnFilterDescriptor_t fd;
    PetscFunctionBegin;
    PetscCall(Filter(0, w, &f, &fd));
    if (!stage[0]) DDCallCUDNN(cudnnConvolutionForward(h, &one, adesc, a, fd, f, cdesc, fwd, ws, wsfwd, &beta, bdesc, b));
    else {
      PetscCall(Move(aview, a, apack, abuf, false, "gather"));
      DDCallCUDNN(cudnnConvolutionForward(h, &one, apk, abuf, fd, f, cdesc, fwd, ws, wsfwd, &zero, bpk, bbuf));
      PetscCall(Move(bpack, bbuf, bview, b, add, "scatter"));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode PassBackwardData(DDTensor w, const T *b, T *a, bool add)
  {
    const T                 one = 1, beta = add ? 1 : 0, zero = 0;
    const T                *f;
    cudnnFilterDescriptor_t fd;
    PetscFunctionBegin;
    if (dgradfwd) {
      PetscCall(Move(FilterLayout(false, false), w->array, FilterLayout(true, nhwc), wT, false, "filter transposition"));
      DDCallCUDNN(cudnnConvolutionForward(h, &one, bdesc, b, fdescT, wT, cdescT, fwdT, ws, wsT, &beta, adesc, a));
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    PetscCall(Filter(1, w, &f, &fd));
    if (!stage[1]) DDCallCUDNN(cudnnConvolutionBackwardData(h, &one, fd, f, bdesc, b, cdesc, bwdd, ws, wsbwdd, &beta, adesc, a));
    else {
      PetscCall(Move(bview, b, bpack, bbuf, false, "gather"));
      DDCallCUDNN(cudnnConvolutionBackwardData(h, &one, fd, f, bpk, bbuf, cdesc, bwdd, ws, wsbwdd, &zero, apk, abuf));
      PetscCall(Move(apack, abuf, aview, a, add, "scatter"));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* dw (C order) = the filter gradient; through wperm where the pass runs on channels-last data */
  PetscErrorCode PassBackwardFilter(const T *a, const T *b, DDTensor dw)
  {
    const T one = 1, zero = 0;
    T      *df = nhwc && !stage[2] ? (T *)wperm : HostArray<T>(dw);
    PetscFunctionBegin;
    if (!stage[2]) DDCallCUDNN(cudnnConvolutionBackwardFilter(h, &one, adesc, a, bdesc, b, cdesc, bwdf, ws, wsbwdf, &zero, fdesc, df));
    else {
      PetscCall(Move(aview, a, apack, abuf, false, "gather"));
      PetscCall(Move(bview, b, bpack, bbuf, false, "gather"));
      DDCallCUDNN(cudnnConvolutionBackwardFilter(h, &one, apk, abuf, bpk, bbuf, cdesc, bwdf, ws, wsbwdf, &zero, fplain, df));
    }
    if (df != HostArray<T>(dw)) PetscCall(Move(FilterLayout(false, true), wperm, FilterLayout(false, false), dw->array, false, "filter permutation"));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
} // namespace

/* the convolution factory of /gpu/cuda (NULL kernel: cuDNN cannot express the geometry) */
template <class T>
PetscErrorCode DDBackendCudaConvCreate_Private(const ConvKernelSpec &spec, std::unique_ptr<ConvKernel> *k)
DD_CXX_TRY
{
  bool ok;

  PetscFunctionBegin;
  auto c = std::make_unique<CudnnConvKernel<T>>();
  PetscCall(c->SetUp(spec, &ok));
  if (ok) *k = std::move(c);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
template PetscErrorCode DDBackendCudaConvCreate_Private<float>(const ConvKernelSpec &, std::unique_ptr<ConvKernel> *);
template PetscErrorCode DDBackendCudaConvCreate_Private<double>(const ConvKernelSpec &, std::unique_ptr<ConvKernel> *);

/* the cuDNN version this process loaded (cudnnGetVersion(): 91900 for 9.19.0) */
size_t DDBackendCudaCudnnVersion_Private(void) { return cudnnGetVersion(); }
