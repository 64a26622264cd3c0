/*
  ddnn/private/ddbackendimpl.h - the backend tier: the one seam between what a layer computes
  and how and where it is computed (in the spirit of libCEED's ceed/backend.h).

  A backend is registered under a resource name ("/cpu/ref", "/cpu/blas", "/cpu/dnnl", later
  "/gpu/cuda") and holds
    - its memory type and memory operations (allocate, free, copy, set), used by DDTensor;
    - one kernel table per element type (KernelTable<float>, KernelTable<double>): plain function
      pointers for stateless kernels (GEMM, pointwise activations, interpolation, normalization)
      and factories for kernels that are set up once per geometry and keep state (convolution,
      transposed convolution, pooling: descriptors, workspaces, cached weight reorders);
    - the name of the backend it falls back to for what it does not provide (an entry left NULL,
      or a factory that declines a geometry): /cpu/dnnl -> /cpu/blas -> /cpu/ref.
  Layers ask for a kernel through DDBackendFind() / DDBackendConvCreate() / DDBackendPoolCreate()
  starting from the backend chosen for them (-dd_backend, or -<prefix>dd_backend per layer), and
  never name a kernel library. A layer knows its primitives and its kernel table, nothing else.

  C++ only: backend implementations are C++ (src/backend/<backend>/).
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <ddlayer.h>
#if defined(__cplusplus)
  #include <cstdint>
  #include <functional>
  #include <memory>
  #include <string>
  #include <utility>
  #include <vector>

namespace ddnn
{
/* ------------------------------------------------------------------------------------------
   Geometry of the local kernels (spatial dimensions are padded to 3 with leading unit ones)
------------------------------------------------------------------------------------------ */
struct ConvGeom {
  PetscInt D = 0;             /* spatial dimensions of the problem (1-3) */
  PetscInt N = 0, Ci = 0, Co = 0;
  PetscInt in[3]  = {1, 1, 1}; /* input window */
  PetscInt out[3] = {1, 1, 1}; /* output */
  PetscInt k[3]   = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  PetscInt groups = 1; /* channel groups (PyTorch's groups): Ci and Co are multiples; weights (Co, Ci/groups, k...), transposed (Ci, Co/groups, k...) */
  /*
    groups over partitioned channels (a worker's channels need not be whole groups): cig, cog > 0 are the
    layer's channels per group, ci0, co0 the global indices of the local first input and output channels;
    weights (Co, cig, k...), transposed (Ci, cog, k...); output channel co reads input channel
    ((co0 + co) / cog) cig + j - ci0 (j < cig) where it is local. 0: the local channels are whole groups.
  */
  PetscInt cig = 0, cog = 0, ci0 = 0, co0 = 0;
  PetscInt KK() const { return k[0] * k[1] * k[2]; }
  PetscInt Cig() const { return cig > 0 ? cig : Ci / groups; }
  PetscInt Cog() const { return cog > 0 ? cog : Co / groups; }
  /* a 1 x 1, unit-stride, ungrouped convolution over whole channels: one matrix product per image on plain storage */
  bool UnitPointwise() const { return groups == 1 && cig == 0 && KK() == 1 && s[0] == 1 && s[1] == 1 && s[2] == 1; }
};

/*
  Transposed convolution: the input window x (N, Ci, in) and the output box y (N, Co, out);
  window entry li feeds box entry lo = li s + t d - pl (0 <= t < k) when 0 <= lo < out: pl is the
  left crop (the padding plus the box's offset), pr the right one, so that
  out = (in - 1) s - pl - pr + (k - 1) d + 1. Either crop may be negative (rows of the box no
  window entry reaches). Weights (Ci, Co, k0, k1, k2) as PyTorch stores a ConvTranspose's.
*/
struct ConvTGeom : ConvGeom {
  PetscInt pl[3] = {0, 0, 0}, pr[3] = {0, 0, 0};
};

/* A strided window of a tensor: element (n, c, i0, i1, i2) is p[n sn + c sc + i0 s0 + i1 s1 + i2 s2] */
template <class T>
struct View {
  T       *p = nullptr;
  PetscInt sn = 0, sc = 0, s0 = 0, s1 = 0, s2 = 0;
  T       &at(PetscInt n, PetscInt c, PetscInt i0, PetscInt i1, PetscInt i2) const { return p[n * sn + c * sc + i0 * s0 + i1 * s1 + i2 * s2]; }
};

/*
  Storage offsets of a box of a tensor's local storage, separable per dimension (true of every
  ddnn format, the blocked one included): the entry (n, c, i0, i1, i2) of the box is at
  t[0][n] + t[1][c] + t[2][i0] + t[3][i1] + t[4][i2]. cinner: the channel is the fastest storage
  dimension (channels-last or blocked), so loops should run over channels innermost.
*/
struct BoxOffsets {
  std::vector<PetscInt> t[5];
  bool                  cinner = false;
};

/*
  Local geometry of a pooling: for every spatial dimension (padded to 3) and local output index i,
  the window coordinate of its first valid tap, its number of valid taps (taps step by the
  dilation) and, for average pooling, its divisor factor (PyTorch's rule).
*/
struct PoolGeom {
  PetscInt              D = 0, N = 0, C = 0;
  PetscInt              out[3] = {1, 1, 1};
  PetscInt              d[3]   = {1, 1, 1};
  bool                  max    = true;
  std::vector<PetscInt> first[3], ntaps[3], div[3];
  /* where the argmax of output (n, c, i0, i1, i2) is kept: (n, c, i0, i1, i2) order, whatever the tensors'
     layout (the reference and fast loops read each other's) */
  PetscInt ArgmaxIndex(PetscInt n, PetscInt c, PetscInt i0, PetscInt i1, PetscInt i2) const { return (((n * C + c) * out[0] + i0) * out[1] + i1) * out[2] + i2; }
};

/*
  Local geometry of an interpolation: for every spatial dimension (padded to 3) and local output
  index i, the window coordinates of its two sources and their weights (y = w0 x[i0] + w1 x[i1]).
*/
struct UpsampleGeom {
  PetscInt              D = 0, N = 0, C = 0;
  PetscInt              out[3] = {1, 1, 1};
  bool                  linear = false;
  std::vector<PetscInt> i0[3], i1[3];
  std::vector<double>   w0[3], w1[3];
};

/*
  Parameters of the pointwise activations, with torch.nn's names and defaults: slope is leakyrelu's
  negative_slope (prelu passes its weight here), alpha elu's, beta and threshold softplus's, gelutanh
  selects gelu's tanh approximation.
*/
template <class T>
struct ActParams {
  T    slope = (T)0.01, alpha = (T)1, beta = (T)1, threshold = (T)20;
  bool gelutanh = false;
};

/* Dense products on row-major strided matrices, torch.nn.Linear's layout: X (N x Fi), W (Fo x Fi), Y (N x Fo) */
struct AffineGeom {
  PetscInt N = 0, Fi = 0, Fo = 0;
};

/*
  The spectral layer's mode mixing (the weight tensor R of a Fourier layer, Li et al. 2021; the
  layer's header gives its place between the transforms) on one rank's K modes: complex numbers stored
  as (real, imag) pairs, the modes the fastest index, the last mode dimension fastest among them
  (local entry k has local index k % nl in it, global index lstart + k % nl of the sd-point transform).
  The scale of local entry k is s_k = D / S, D = 2 for 0 < f < sd / 2 (f = lstart + k % nl: the
  half-spectrum's entries counted twice by the Hermitian adjoint) else 1, S = invS^-1 the transform's size.
*/
struct SpectralMixGeom {
  PetscInt N = 0, Ci = 0, Co = 0, K = 0; /* samples, input and output channels, local modes */
  PetscInt nl = 1, lstart = 0, sd = 1;  /* the last mode dimension: local entries, first global index, transform size */
  double   invS = 1;                    /* 1 / (s_1 ... s_d) */
};

/* ------------------------------------------------------------------------------------------
   Stateful kernels, set up once per geometry and layout
------------------------------------------------------------------------------------------ */
/* A window of a tensor a kernel reads or writes: dimensions lead, lead + 1 are N and C, the last D spatial */
struct KernelWindow {
  DDTensor t    = NULL; /* the tensor at set-up; later calls pass tensors of the same layout */
  PetscInt lead = 0;
  PetscInt org[DD_MAX_DIM] = {0}; /* storage coordinates of the window's first entry */
};

/* What a convolution (or transposed convolution) kernel is set up for on one worker */
struct ConvKernelSpec {
  ConvTGeom    g;                  /* geometry (a convolution: crops 0); no padding: the window is the halo'd input */
  bool         transposed = false; /* weights (Ci, Co, k...) and the geometry of ConvTGeom */
  bool         bias       = false; /* the layer has a bias (a call may still pass none) */
  bool         backward   = true;  /* set up the backward passes too */
  KernelWindow x, y;               /* the input window (g.in) and the output box (g.out) */
};

/*
  ConvKernel - a local convolution or transposed convolution of one worker.
  Forward:         y box = conv(x window, w) + b                (overwritten; b NULL: no bias)
  BackwardData:    dx window (+)= J_x^* dy                      (OverwritesDx(): written, else added)
  BackwardWeights: dw = J_w^* dy, db = J_b^* dy                 (overwritten; db NULL: not wanted)
  w, b, dw, db are the (broadcast) parameter tensors, C order. wstate is w's PetscObjectState, so
  that kernels that reorder the weights do it only when they changed.
*/
class ConvKernel
{
public:
  virtual ~ConvKernel() = default;
  virtual const char    *Name() const = 0;
  virtual bool           OverwritesDx() const { return false; }
  /*
    Conv + activation fusion (DDLAYERCONV with -net_fuse): asks the kernel to write act(conv(x, w) + b)
    in Forward from now on (an epilogue or post-op). Returns false, and changes nothing, where the
    kernel cannot; the layer then applies the activation itself. Backward passes are unchanged.
  */
  virtual bool           FuseActivation(DDActivationType act) { return false; }
  virtual PetscErrorCode Forward(DDTensor x, DDTensor w, PetscObjectState wstate, DDTensor b, DDTensor y)     = 0;
  virtual PetscErrorCode BackwardData(DDTensor dy, DDTensor w, PetscObjectState wstate, DDTensor dx)          = 0;
  virtual PetscErrorCode BackwardWeights(DDTensor x, DDTensor dy, DDTensor dw, DDTensor db)                   = 0;
};

/* What a pooling kernel is set up for on one worker */
struct PoolKernelSpec {
  PetscInt     D = 0, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  PetscInt     padl[3] = {0, 0, 0}, padr[3] = {0, 0, 0}; /* taps of the window outside the tensor, per side */
  PetscInt     n[3]    = {1, 1, 1};                      /* the global spatial extents of the input */
  PetscInt     p[3]    = {0, 0, 0};                      /* the layer's padding */
  PetscInt     oend[3] = {0, 0, 0};                      /* one past the last global output index of this worker */
  DDPoolType   type     = DD_POOL_MAX;
  bool         countpad = true;
  PetscInt     divisor  = 0;   /* average pooling's divisor_override (0: none; g.div holds it) */
  PoolGeom     g;           /* the loops' geometry */
  KernelWindow x, y;        /* the input window and the output box */
  PetscInt     xn[5] = {0}, yn[5] = {0}; /* their sizes (N, C, spatial) */
};

/*
  PoolKernel - a local pooling of one worker: y box = pool(x window); Backward: dx window (+)= J^* dy.
  ModifiesDy(): Backward may change dy (the layer passes a copy). NeedsTrainingForward(): Backward
  needs the state of a Forward in training mode (a workspace).
*/
class PoolKernel
{
public:
  virtual ~PoolKernel() = default;
  virtual const char    *Name() const = 0;
  virtual bool           OverwritesDx() const { return false; }
  virtual bool           ModifiesDy() const { return false; }
  virtual PetscErrorCode Forward(DDTensor x, DDTensor y, bool training) = 0;
  virtual PetscErrorCode Backward(DDTensor dy, DDTensor dx)             = 0;
};

/*
  What an interpolation kernel is set up for on one worker: the geometry (UpsampleGeom, window
  coordinates of the sources) and the separable storage offsets of the input window (xo) and the
  output box (yo) in their tensors' local storages.
*/
struct UpsampleKernelSpec {
  UpsampleGeom g;
  BoxOffsets   xo, yo;
};

/*
  UpsampleKernel - a local interpolation of one worker, set up once (a device backend keeps the
  geometry and offsets in its memory). x, y, dy, dx are the local storages (of the backend's memory).
  Forward:  y box = interp(x window)              (overwritten)
  Backward: dx window += interp^*(dy box)         (added: the caller zeroes dx first)
*/
class UpsampleKernel
{
public:
  virtual ~UpsampleKernel() = default;
  virtual const char    *Name() const                          = 0;
  virtual PetscErrorCode Forward(const void *x, void *y)       = 0;
  virtual PetscErrorCode Backward(const void *dy, void *dx)    = 0;
};

/*
  What a loss kernel is set up for (the loss layer, paper 000 sec. 4.3; torch.nn.MSELoss, L1Loss and
  CrossEntropyLoss, src/layer/impls/loss/loss.cxx gives the formulas): the type, and for
  cross-entropy the probability (soft) targets, ignore_index, label smoothing and class weights
  (empty: ones). The logits' class dimension is dimension 1, on one worker.
*/
struct LossKernelSpec {
  DDLossType          type      = DD_LOSS_MSE;
  bool                prob      = false;
  PetscInt            ignore    = -100;
  double              smoothing = 0;
  std::vector<double> weights;
};

/*
  LossKernel - the local passes of a loss over one worker's piece (p: the prediction or logits, t:
  the target, laid out as at set-up or alike; element losses: p and t have one shape; cross-entropy
  with class indices: t is (N, spatial...)). Sums in double.
  Forward:  *sum = the sum of the terms (elements, or cross-entropy's positions), *den = the sum
            of cross-entropy's mean weights (w of the target class, 0 where ignored; 1 per position
            with probability targets; element losses: left as it is); y (reduction none; NULL
            otherwise) gets the terms. Cross-entropy with class indices: *nbad counts the positions
            whose target is neither a class index in [0, C) nor ignore_index (they add nothing), *bad
            is one of their values. Nothing is written when p is inactive.
  Backward: the gradients dp = g dl/dp and (element losses and probability targets) dt = g dl/dt,
            g = dy at the position or element (reduction none; dy non-NULL), else g0. dp, dt NULL:
            not wanted. fast: dp, dt and dy are stored like p (dt: or like t, tlikeb), cross-entropy's
            class dimension not blocked: the kernel may take the runs of the storage (the host loops'
            fast path; the same bits as the generic walk). Only the bulks are written (the caller
            zeroes halos).
*/
class LossKernel
{
public:
  virtual ~LossKernel() = default;
  virtual const char    *Name() const                                                                                                                  = 0;
  virtual PetscErrorCode Forward(DDTensor p, DDTensor t, DDTensor y, double *sum, double *den, PetscInt *nbad, double *bad)                           = 0;
  virtual PetscErrorCode Backward(DDTensor p, DDTensor t, DDTensor dy, double g0, DDTensor dp, DDTensor dt, bool fast, bool tlikeb)                     = 0;
};

/*
  FFT: what a local FFT kernel is set up for on one worker (one stage of the fft primitive's pencil
  decomposition, src/primitive/impls/fft/fft.cxx). The array a is (A, L, B) in C order: A outer
  entries, the transform along the L middle entries (stride B), B inner entries; b is (A, K, B).
  Complex entries are (real, imaginary) pairs of T.
    real:    a real (A, L) with B = 1; the real-to-complex transform keeps the first K = m entries
             of the half-spectrum (m <= L/2 + 1).
    complex: a complex (A, L, B); the forward complex transform keeps K = 2 m entries, the
             frequencies 0..m-1 and L-m..L-1 (the two corner blocks of the FNO's weights).
  a and b are the arrays at set-up, in the memory of the backend's type (a kernel may plan on
  them; later calls pass arrays of the same shapes). Both are non-empty (A, B >= 1).
*/
struct FftKernelSpec {
  bool     real = false;
  PetscInt L = 0, m = 0, K = 0, A = 0, B = 0;
  void    *a = nullptr, *b = nullptr;
};

/*
  FftKernel - the local transforms of one stage, unnormalized (FFTW's and cuFFT's convention).
  Forward: b = T F a (F: the batched 1-D DFT along L, exp(-2 pi i jk/L); T: keep the K entries).
  Adjoint: a = F^* T^* b, the exact adjoint of Forward for the real inner products of a and b:
           T^* zero-pads; in the real case the kept entries are first weighted by 1/2 except k = 0
           and k = L/2 (then c2r, which counts each conjugate partner once more); complex: the
           unnormalized backward transform. a is overwritten; b is not changed.
*/
class FftKernel
{
public:
  virtual ~FftKernel() = default;
  virtual const char    *Name() const                     = 0;
  virtual PetscErrorCode Forward(const void *a, void *b)  = 0;
  virtual PetscErrorCode Adjoint(const void *b, void *a)  = 0;
};

/* Coefficients of the optimizers' update kernels (PyTorch's torch.optim rules, evaluated in double) */
struct SGDCoefficients {
  double lr = 0, momentum = 0, weight_decay = 0;
  bool   nesterov = false;
  bool   first    = false; /* first step: the momentum buffer starts as the gradient */
};
struct AdamCoefficients {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double bc1 = 1, bc2 = 1;  /* bias corrections 1 - beta1^t, 1 - beta2^t at step t */
  bool   decoupled = false; /* AdamW: p *= 1 - lr wd; Adam: g += wd p */
};

/* ------------------------------------------------------------------------------------------
   The kernel table of one element type
------------------------------------------------------------------------------------------ */
template <class T>
struct KernelTable {
  /* convolution: the formats this backend wants for x^ and y (ok = false: declines the dtype/geometry), and the factory (NULL kernel: declined) */
  PetscErrorCode (*convformats)(const ConvGeom &q, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, bool *ok) = nullptr;
  PetscErrorCode (*convcreate)(const ConvKernelSpec &, std::unique_ptr<ConvKernel> *)                                                           = nullptr;
  /*
    the passes (forward, backward data, backward weights) its convolution kernel for geometry q runs by Winograd's
    algorithm, as convcreate would choose them (the performance model prices them apart); false: this backend
    declines q (as its convformats/convcreate would), the next one along the chain decides. NULL: no Winograd
  */
  bool (*convwinograd)(const ConvGeom &q, bool transposed, bool passes[3]) = nullptr;
  PetscErrorCode (*poolcreate)(const PoolKernelSpec &, std::unique_ptr<PoolKernel> *)                                                           = nullptr;
  /* local FFTs of a stage of the fft primitive (NULL kernel: declined) */
  PetscErrorCode (*fftcreate)(const FftKernelSpec &, std::unique_ptr<FftKernel> *) = nullptr;
  /* GEMM (the dense layer): Y = X W^T (+ b); dX = dY W; dW += dY^T X, db += column sums of dY */
  void (*affinefwd)(const AffineGeom &, const T *x, PetscInt ldx, const T *w, PetscInt ldw, const T *b, T *y, PetscInt ldy)         = nullptr;
  void (*affinebwddata)(const AffineGeom &, const T *dy, PetscInt ldy, const T *w, PetscInt ldw, T *dx, PetscInt ldx)              = nullptr;
  void (*affinebwdweights)(const AffineGeom &, const T *x, PetscInt ldx, const T *dy, PetscInt ldy, T *dw, PetscInt ldw, T *db)   = nullptr;
  /* interpolation: y = interp(x); dx += interp^*(dy) */
  void (*upsamplefwd)(const UpsampleGeom &, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo) = nullptr;
  void (*upsamplebwd)(const UpsampleGeom &, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo) = nullptr;
  /* interpolation set up once per geometry (a device backend's form; a backend providing it is used through it, else through upsamplefwd/bwd) */
  PetscErrorCode (*upsamplecreate)(const UpsampleKernelSpec &, std::unique_ptr<UpsampleKernel> *) = nullptr;
  /* the loss layer's local passes */
  PetscErrorCode (*losscreate)(const LossKernelSpec &, std::unique_ptr<LossKernel> *) = nullptr;
  /*
    inverted dropout over the bulk of one piece: y = x / (1 - p) where UniformFromCounter(key, g) >= p,
    else 0, with g the entry's global C-order index in a tensor of the global shape (x and y: one piece, any layouts)
  */
  void (*dropout)(uint64_t key, double p, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, const PetscInt shape[]) = nullptr;
  /* pointwise activations over runs: y = f(x); dx = f'(x) dy (dy may alias dx) */
  void (*actfwd)(DDActivationType, const ActParams<T> &, const T *x, T *y, PetscInt n)               = nullptr;
  void (*actbwd)(DDActivationType, const ActParams<T> &, const T *x, const T *dy, T *dx, PetscInt n) = nullptr;
  /*
    the same over a whole bulk, each tensor in its own layout (the bulks of one piece): a device
    backend's form, one launch however the bulk breaks into runs (a halo'd output has one run per
    row); a layer takes it where the first backend of its chain with pointwise kernels has it
  */
  void (*actfwdbulk)(DDActivationType, const ActParams<T> &, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y)                                  = nullptr;
  void (*actbwdbulk)(DDActivationType, const ActParams<T> &, const DDLayout &Lx, const T *x, const DDLayout &Lg, const T *dy, const DDLayout &Ld, T *dx) = nullptr;
  /*
    normalization over the bulk of one rank's piece (batch norm: per channel; group norm, persample:
    per (sample, channel)), statistics in double: cnt, mean, m2 = sum (x - mean)^2; y = a (x - mu) + b;
    the backward sums sdy = sum dy, sdyx = sum dy (x - mu); dx = a dy + b (x - mu) + c
  */
  void (*normmoments)(const DDLayout &, const T *x, bool persample, double *cnt, double *mean, double *m2)                                                                   = nullptr;
  void (*normscaleshift)(const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, bool persample, const double *mu, const double *a, const double *b)                      = nullptr;
  void (*normbwdsums)(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, bool persample, const double *mu, double *sdy, double *sdyx)                        = nullptr;
  /* optimizer updates over one contiguous run of a parameter, its gradient and its state */
  void (*sgdupdate)(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &)         = nullptr;
  void (*adamupdate)(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &) = nullptr;
  void (*normbwdapply)(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, const DDLayout &Lo, T *dx, bool persample, const double *mu, const double *a, const double *b, const double *c) = nullptr;
  /*
    layer normalization over R rows of M contiguous entries (row-major, plain), statistics in double:
    lnsums: s[r] = sum x (mean NULL) or sum (x - mean[r])^2;  lnapply: y = w (x - mean) rstd + b;
    lnbwdsums: dw = sum_r dy xhat, db = sum_r dy (set), g1[r] = sum w dy, g2[r] = sum w dy xhat;
    lnbwdapply: dx = rstd (w dy - G1[r] - xhat G2[r]), xhat = (x - mean) rstd
  */
  void (*lnsums)(PetscInt R, PetscInt M, const T *x, const double *mean, double *s)                                                                                     = nullptr;
  void (*lnapply)(PetscInt R, PetscInt M, const T *x, const double *mean, const double *rstd, const T *w, const T *b, T *y)                                             = nullptr;
  void (*lnbwdsums)(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, T *dw, T *db, double *g1, double *g2)           = nullptr;
  void (*lnbwdapply)(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, const double *G1, const double *G2, T *dx) = nullptr;
  /*
    the spectral layer's mode mixing (SpectralMixGeom), X (N, Ci, K), W (Ci, Co, K), Y and dY (N, Co, K)
    complex: spectralmix Y[n,o,k] = s_k sum_i X[n,i,k] W[i,o,k]; spectralmixadjoint, its adjoint in X
    and in W with G = s_k dY: dX[n,i,k] = sum_o G[n,o,k] conj(W[i,o,k]) (set), dW[i,o,k] += sum_n
    conj(X[n,i,k]) G[n,o,k] (accumulated); host or device pointers by the backend's memory
  */
  void (*spectralmix)(const SpectralMixGeom &, const T *X, const T *W, T *Y)                                   = nullptr;
  void (*spectralmixadjoint)(const SpectralMixGeom &, const T *X, const T *W, const T *dY, T *dX, T *dW) = nullptr;
};

/* Names of the kernel kinds, for log events and messages */
typedef enum {
  DD_KERNEL_CONV,
  DD_KERNEL_POOL,
  DD_KERNEL_GEMM,
  DD_KERNEL_UPSAMPLE,
  DD_KERNEL_POINTWISE,
  DD_KERNEL_NORM,
  DD_KERNEL_OPTIMIZER,
  DD_KERNEL_FFT,
  DD_KERNEL_LOSS,
  DD_KERNEL_DROPOUT,
  DD_KERNEL_SPECTRAL,
  DD_KERNEL_NKINDS
} DDKernelKind;
} // namespace ddnn

/* ------------------------------------------------------------------------------------------
   The backend object
------------------------------------------------------------------------------------------ */
struct _DDBackendMemOps {
  PetscErrorCode (*malloc)(size_t, void **);             /* zeroed */
  PetscErrorCode (*free)(void *);
  PetscErrorCode (*copy)(void *, const void *, size_t);  /* within this backend's memory */
  PetscErrorCode (*set)(void *, int, size_t);
  /* host memory the device copies to and from fastest (CUDA: page-locked), for the exchange
     engine's staging buffers when MPI does not take device pointers; host backends: ordinary memory */
  PetscErrorCode (*hostmalloc)(size_t, void **); /* zeroed */
  PetscErrorCode (*hostfree)(void *);
  /* raises a failure that a kernel entry returning nothing (pointwise, GEMM) kept; NULL: none can */
  PetscErrorCode (*check)(void);
};

/*
  Vector operations of a memory type: DDTensor's arithmetic over the bulk of a layout (any storage
  format: the operations walk the layout), and the exchange engine's packing of runs (off[i],
  len[i]) into and out of message buffers. A device backend implements them as kernels on its memory.
*/
struct _DDBackendVecOps {
  PetscErrorCode (*set)(DDDataType, const DDLayout *, void *y, PetscReal v);
  PetscErrorCode (*scale)(DDDataType, const DDLayout *, void *y, PetscReal a);
  PetscErrorCode (*copy)(DDDataType, const DDLayout *Lx, const void *x, const DDLayout *Ly, void *y);
  PetscErrorCode (*axpby)(DDDataType, PetscReal a, const DDLayout *Lx, const void *x, PetscReal b, const DDLayout *Ly, void *y); /* y = a x + b y */
  PetscErrorCode (*pack)(DDDataType, size_t nruns, const PetscInt off[], const PetscInt len[], PetscInt total, const void *src, void *buf);
  PetscErrorCode (*unpack)(DDDataType, size_t nruns, const PetscInt off[], const PetscInt len[], PetscInt total, const void *buf, void *dst, PetscBool add);
  PetscErrorCode (*fill)(DDDataType, size_t nruns, const PetscInt off[], const PetscInt len[], PetscInt total, void *dst, PetscReal v); /* dst[runs] = v */
  /* run lists prepared once for repeated use (a device backend keeps them in its memory): the
     exchange engine's plans on device memory; NULL on host memory, whose loops read the lists */
  PetscErrorCode (*runsprepare)(size_t nruns, const PetscInt off[], const PetscInt len[], PetscInt total, void **runs);
  PetscErrorCode (*runsfree)(void *runs);
  PetscErrorCode (*packp)(DDDataType, const void *runs, const void *src, void *buf);
  PetscErrorCode (*unpackp)(DDDataType, const void *runs, const void *buf, void *dst, PetscBool add);
  PetscErrorCode (*fillp)(DDDataType, const void *runs, void *dst, PetscReal v);
  /* reductions over the bulk (a device backend's, so that DDTensorDot/Sum/Norm need no host copy;
     NULL on host memory, whose loops in tensorops.cxx read the storage directly) */
  PetscErrorCode (*dot)(DDDataType, const DDLayout *Lx, const void *x, const DDLayout *Ly, const void *y, double *d); /* sum over the bulk of x y, in double */
  PetscErrorCode (*norms)(DDDataType, const DDLayout *L, const void *x, double r[4]); /* r = sum x, sum |x|, sum x^2, max |x| over the bulk (NaN propagates into every entry) */
};

struct _p_DDBackend {
  char                        name[64];     /* resource name, e.g. "/cpu/dnnl" */
  char                        fallback[64]; /* where what it lacks is found ("" for none) */
  char                        description[128];
  DDMemType                   memtype;
  struct _DDBackendMemOps     mem;
  struct _DDBackendVecOps     vec;
  ddnn::KernelTable<float>    f32;
  ddnn::KernelTable<double>   f64;
  PetscLogEvent               events[ddnn::DD_KERNEL_NKINDS]; /* "<kind> <name>": -log_view says which kernel ran */
};

namespace ddnn
{
template <class T>
inline const KernelTable<T> &Table(DDBackend b);
template <>
inline const KernelTable<float> &Table<float>(DDBackend b) { return b->f32; }
template <>
inline const KernelTable<double> &Table<double>(DDBackend b) { return b->f64; }

/* the backend b falls back to (NULL at the end of the chain) */
DDBackend DDBackendNext_Private(DDBackend b);
PetscErrorCode DDBackendMissing_Private(DDBackend b, DDDataType dt, DDKernelKind kind);
/*
  The first backend along b's fallback chain whose table of type T has entry m (non-NULL): the
  function in *fn, the backend in *which. Errors (naming the kernel kind and the backend) when none has it.
*/
template <class T, class F>
inline PetscErrorCode DDBackendFind(DDBackend b, F KernelTable<T>::*m, DDKernelKind kind, F *fn, DDBackend *which = nullptr)
{
  PetscFunctionBegin;
  for (DDBackend w = b; w; w = DDBackendNext_Private(w))
    if (Table<T>(w).*m) {
      *fn = Table<T>(w).*m;
      if (which) *which = w;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  PetscCall(DDBackendMissing_Private(b, sizeof(T) == 4 ? DD_FLOAT32 : DD_FLOAT64, kind));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The convolution formats along b's chain: the first backend that provides convformats for dt and
  accepts the geometry decides (in *which); the kernel is later created from *which's chain.
*/
PetscErrorCode DDBackendConvFormats(DDBackend b, DDDataType dt, const ConvGeom &q, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, DDBackend *which);
/* A convolution kernel from the first backend along b's chain that accepts spec (for x's dtype) */
PetscErrorCode DDBackendConvCreate(DDBackend b, const ConvKernelSpec &spec, std::unique_ptr<ConvKernel> *k);
/*
  The passes (forward, backward data, backward weights) that the convolution kernel of element type dt
  for geometry q, from the first backend along b's chain that takes q, runs by Winograd's algorithm
*/
PetscErrorCode DDBackendConvWinograd(DDBackend b, DDDataType dt, const ConvGeom &q, bool transposed, bool passes[3]);
/* the same for a set-up convolution layer's local geometry, on its backend and data type (all false for other layers) */
PetscErrorCode DDLayerConvWinogradPasses_Private(DDLayer layer, bool passes[3]);
/* whether a set-up convolution layer's local kernel is a 1 x 1 unit-stride ungrouped one on plain storage (the
   performance model's "conv-pointwise" kind); false for other layers */
PetscErrorCode DDLayerConvPlainPointwise_Private(DDLayer layer, bool *pointwise);
/*
  The local kernels of a set-up layer on this rank, to be timed alone (the performance model's
  per-configuration estimate, paper 003 sec. V-A), each on private copies of the layer's tensors
  (its output, input and gradients, and its kernel's own state, stay as they are), without
  exchanges or collectives; an empty pass does not run on this rank (no local output, or the
  backward data with nodx). key names the configuration: layer kind, kernel, data type, geometry,
  layouts (empty: nothing to time); with copies false only the key is made. The copies are this
  rank's alone (nothing here is collective); where they cannot reproduce the layer's local storage,
  untimed is set and nothing is to be timed. Destroy the copies with LayerKernelRunDestroy().
    convolution (DDLayerConvKernelRun_Private()): pass[0] the forward (with the input's conversion to
      the kernel's format where the layer converts it, and a fused activation the kernel applies; one
      it does not is the activation layer's), pass[1] the backward data (and the conversion back),
      pass[2] the backward weights;
    pooling (DDLayerPoolKernelRun_Private()): a kernel of its own made from the layer's set-up (a max
      pool's workspace is the kernel's state: the layer's own stays for its backward), pass[0] the
      forward in training mode, pass[1] the backward (zeroing dx where the kernel adds into it, and
      dy's copy where the kernel rescales it, as the layer does)
*/
struct LayerKernelRun {
  std::string                     key;
  std::vector<DDTensor>           tensors; /* the copies (to flush for a cold call) */
  std::function<PetscErrorCode()> pass[3];
  bool                            untimed = false;
};
PetscErrorCode DDLayerConvKernelRun_Private(DDLayer layer, bool nodx, bool copies, LayerKernelRun *run);
PetscErrorCode DDLayerPoolKernelRun_Private(DDLayer layer, bool nodx, bool copies, LayerKernelRun *run);
/*
    spectral (DDLayerSpectralKernelRun_Private()): pass[0] the forward (the first transform's stages, the
      mode mixing, the second transform's adjoint), pass[1] the backward (the second transform, the mode
      mixing's adjoint, and the first transform's adjoint unless nodx); each stage's local FFT kernel, and
      in place of each repartition between the stages one local copy of its destination's bulk (from its
      source where the two hold the same local box, a format conversion there; else from a copy of the
      destination): the repartitions' messages are the model's communication; with withmoves false no
      such copies (the model prices each repartition whole by its fit: copies, packing and messages)
*/
PetscErrorCode DDLayerSpectralKernelRun_Private(DDLayer layer, bool nodx, bool withmoves, bool copies, LayerKernelRun *run);
PetscErrorCode LayerKernelRunDestroy(LayerKernelRun *run);
/* A pooling kernel likewise */
PetscErrorCode DDBackendPoolCreate(DDBackend b, const PoolKernelSpec &spec, std::unique_ptr<PoolKernel> *k);
/*
  An FFT kernel of element type dt from the first backend along b's chain that accepts spec, and
  that backend (*which: its memory type is the arrays'; its FFT event times the calls)
*/
PetscErrorCode DDBackendFftCreate(DDBackend b, DDDataType dt, const FftKernelSpec &spec, std::unique_ptr<FftKernel> *k, DDBackend *which);
} // namespace ddnn
/* the backend whose chain a DDPRIMITIVEFFT's kernels come from (before set-up; NULL: the default) */
PETSC_EXTERN PetscErrorCode DDPrimitiveFFTSetBackend_Private(DDPrimitive, DDBackend);
namespace ddnn
{
/* one stage of a set-up DDPRIMITIVEFFT on this rank: x -> a by a repartition, b = T fft(a) by k (NULL: no pencils here) */
struct FftStageView {
  DDTensor   a = NULL, b = NULL;
  FftKernel *k = nullptr;
};
/* the stages in the forward's order (the last b goes to y by a final repartition); the primitive keeps them */
PetscErrorCode DDPrimitiveFFTGetStages_Private(DDPrimitive, std::vector<FftStageView> *);
} // namespace ddnn

/* Registration (backends register themselves in DDBackendRegisterAll()) */
PETSC_EXTERN PetscErrorCode DDBackendRegister_Private(const struct _p_DDBackend *);
PETSC_EXTERN PetscErrorCode DDBackendRegisterAll(void);
PETSC_EXTERN PetscErrorCode DDBackendFinalizePackage_Private(void);
/* the backend a layer uses (its own, or the default) */
PETSC_EXTERN PetscErrorCode DDLayerGetBackend_Private(DDLayer, DDBackend *);

namespace ddnn
{
/* times a kernel call as the backend's event of that kind */
struct KernelEvent {
  PetscLogEvent ev;
  KernelEvent(DDBackend b, DDKernelKind k) : ev(b ? b->events[k] : 0)
  {
    if (ev) (void)PetscLogEventBegin(ev, 0, 0, 0, 0);
  }
  ~KernelEvent()
  {
    if (ev) (void)PetscLogEventEnd(ev, 0, 0, 0, 0);
  }
};

/* the local storage of a host tensor as T */
template <class T>
inline T *HostArray(DDTensor t)
{
  return (T *)t->array;
}
/* entry m of the kernel table along the chain of layer l's backend, and the backend that has it */
template <class T, class F>
inline PetscErrorCode LayerKernel(DDLayer l, F KernelTable<T>::*m, DDKernelKind kind, F *fn, DDBackend *which)
{
  DDBackend b;
  PetscFunctionBegin;
  PetscCall(DDLayerGetBackend_Private(l, &b));
  PetscCall(DDBackendFind<T>(b, m, kind, fn, which));
  PetscFunctionReturn(PETSC_SUCCESS);
}
/* calls entry m of the kernel table along layer l's backend chain with args, timed as the event of kind */
template <class T, class F, class... A>
inline PetscErrorCode CallKernel(DDLayer l, F KernelTable<T>::*m, DDKernelKind kind, A &&...args)
{
  DDBackend which;
  F         fn;
  PetscFunctionBegin;
  PetscCall(LayerKernel<T>(l, m, kind, &fn, &which));
  KernelEvent e(which, kind);
  fn(std::forward<A>(args)...);
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
#endif
