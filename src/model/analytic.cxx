/*
  The analytic form of the performance model (issue 16, item 4): the predictions of model.cxx for
  a layer that is not set up, from its description, a partition shape and a rank, so that
  configurations too large to build here (paper 000 sec. 5: the 3-D U-Net at 1152^3 on 18^3
  tasks; paper 003 sec. VI: the 1K/2K mesh models on up to 2048 GPUs) can be priced.

  It is the same model: both price their data with one formula, ddnn::ModelLayerTimes_Private()
  (model.cxx, src/model/modelimpl.hpp); this file computes that data from the description, the
  set-up model from the set-up layer (tests/test_16_model_analytic.cxx checks equality):
  - compute: the calibrated fit of the layer's kind (concat and the loss their own; a concatenation
    into its consumer's halo "concat-halo" where the cache has it), on the local
    work of DDLayerGetModelWork() (GEMM flops of the convolution, bytes of the others); for the
    convolution the further terms of its input and output bytes and of the flops its idle vector
    lanes waste and of the rows of its column matrix and the flops of its passes the backend chain
    does not run by Winograd (model.cxx's GemmBytes(), DDBackendConvWinograd()), and for a first
    layer (no input gradient) the weight gradient's own fit ("conv-wgrad"); the share 1 - L2 / M of
    the cold fits (":cold") when the layer's predicted memory M on the rank exceeds the core's L2
    cache (as LayerCold()); average pooling its own fit (spec->average); on P = prod(parts) ranks the fits
    measured on P ranks ("<backend>@P") where the calibration has them; plus the per-run cost of a
    pointwise walk between differently stored input and output;
  - point-to-point: the halo exchange of paper 000 App. B (each worker's window follows its
    piece of the balanced output; one message per neighbor holding part of it, faces, edges and
    corners alike: paper 003 sec. V-A's FP/BPx halo terms), messages and bytes per rank from
    the pieces, priced alpha + beta n per rank, max(sent, received), or by the calibrated halo fit;
  - collectives: the weight broadcast (forward) and gradient sum-reduction (backward) of the
    convolution, the normalization's broadcast and statistics all-reductions, the loss's reduce
    and broadcast, priced with the measured fits of their group size ("bcast-g<g>", "allsum-g<g>";
    the reduce direction as the set-up model takes it) and at group sizes not measured with
    Thakur et al.'s formulas (paper 003 ref. [22]);
  - memory per rank: output (plus the halo its consumer grows on it), the exchange engine's
    message buffers, weights and gradients (on their owner), the workers' copies and statistics.
  Supported: sample, spatial and hybrid partitions (channels not split), plain storage, zero padding.
*/
#include <ddmodel.h>
#include <ddnn/private/ddimpl.h>
#include <primitive/exchange.hpp>
#include <backend/interface/backends.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include "modelimpl.hpp"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include <sys/ddcxx.hpp>


namespace
{
enum Kind { K_CONV, K_BN, K_ACT, K_POOL, K_UP, K_CONCAT, K_LOSS };

struct Layer {
  Kind     kind;
  PetscInt d = 0, D = 0; /* order, spatial dimensions */
  PetscInt in[DD_MAX_DIM], out[DD_MAX_DIM], P[DD_MAX_DIM];
  PetscInt ranks = 1;
  size_t   es    = 8;
};

/* the balanced pieces of ddnn's partitions (DDSplitOwnership_Private, as PetscSplitOwnership) */
inline PetscInt PieceStart(PetscInt n, PetscInt P, PetscInt c)
{
  return c * (n / P) + PetscMin(c, n % P);
}
inline PetscInt PieceSize(PetscInt n, PetscInt P, PetscInt c)
{
  return n / P + (c < n % P ? 1 : 0);
}

/* coordinates of worker r of a C-order grid (the last dimension fastest, as DMDA's x) */
void Coords(const Layer &L, PetscInt r, PetscInt c[])
{
  for (PetscInt k = L.d - 1; k >= 0; k--) {
    c[k] = r % L.P[k];
    r /= L.P[k];
  }
}

/* the source entries i0 <= i1 of output o of an upsampling by the integer factor m / n (upsample.cxx's
   Sources(), PyTorch's rule: nearest o / 2; linear (o + 0.5) / scale - 0.5 clamped at 0, in the data type) */
template <class T>
void LinearSources(PetscInt o, PetscInt n, PetscInt m, PetscInt &i0, PetscInt &i1)
{
  const T scale = (T)(1.0 / (double)(m / n));
  T       src   = scale * ((T)o + (T)0.5) - (T)0.5;
  if (src < (T)0) src = (T)0;
  i0 = PetscMin((PetscInt)std::floor(src), n - 1);
  i1 = i0 + (i0 < n - 1 ? 1 : 0);
}

void UpsampleSources(const DDModelLayerSpec &s, PetscInt o, PetscInt n, PetscInt m, PetscInt &i0, PetscInt &i1)
{
  if (m == n) i0 = i1 = o; /* a copy */
  else if (!s.linear) i0 = i1 = o >> 1;
  else if (s.dtype == DD_FLOAT32) LinearSources<float>(o, n, m, i0, i1);
  else LinearSources<double>(o, n, m, i0, i1);
}

/* the input window [wa, wb) of the worker at coordinate c along dimension k of the input (the
   layer's halo: conv paper 000 App. B with the output's balanced pieces; pool and upsample their
   clamped windows); the bulk where the layer needs no halo */
void Window(const Layer &L, const DDModelLayerSpec &s, PetscInt k, PetscInt c, PetscInt &wa, PetscInt &wb)
{
  const PetscInt n = L.in[k], P = L.P[k], st = PieceStart(n, P, c), nn = PieceSize(n, P, c);
  wa = st;
  wb = st + nn;
  if (k < 2) return;
  const PetscInt j = k - 2, m = L.out[k], o0 = PieceStart(m, P, c), o1 = o0 + PieceSize(m, P, c);
  if (L.kind == K_CONV) {
    if (o1 > o0) {
      wa = o0 * s.stride[j] - s.padding[j];
      wb = (o1 - 1) * s.stride[j] - s.padding[j] + s.kernel[j];
    } else wb = wa;
  } else if (L.kind == K_POOL) {
    if (o1 > o0) {
      wa = PetscMax(o0 * s.stride[j] - s.padding[j], 0);
      wb = PetscMin((o1 - 1) * s.stride[j] - s.padding[j] + s.kernel[j], n);
    } else wa = wb = st;
  } else if (L.kind == K_UP) {
    if (o1 > o0) {
      PetscInt a0, a1, b0, b1;
      UpsampleSources(s, o0, n, m, a0, a1);
      UpsampleSources(s, o1 - 1, n, m, b0, b1);
      wa = a0; /* the sources grow with the output index */
      wb = b1 + 1;
    } else wa = wb = st;
  }
}

/* whether the layer sets up a halo exchange on its input: always for the convolution, for pool
   and upsample when some worker's window leaves its bulk */
bool HasHalo(const Layer &L, const DDModelLayerSpec &s)
{
  if (L.kind == K_CONV) return true;
  if (L.kind != K_POOL && L.kind != K_UP) return false;
  for (PetscInt k = 2; k < L.d; k++)
    for (PetscInt c = 0; c < L.P[k]; c++) {
      PetscInt wa, wb, st = PieceStart(L.in[k], L.P[k], c);
      Window(L, s, k, c, wa, wb);
      if (PieceSize(L.out[k], L.P[k], c) > 0 && (wa < st || wb > st + PieceSize(L.in[k], L.P[k], c))) return true;
    }
  return false;
}

/* the storage halo the layer grows on its input at coordinates c (DDTensorEnsureHalo: the window beyond the bulk, padding included) */
void InputHalo(const Layer &L, const DDModelLayerSpec &s, const PetscInt c[], PetscInt lo[], PetscInt hi[])
{
  bool h = HasHalo(L, s);
  for (PetscInt k = 0; k < L.d; k++) {
    lo[k] = hi[k] = 0;
    if (!h) continue;
    PetscInt wa, wb, st = PieceStart(L.in[k], L.P[k], c[k]), n = PieceSize(L.in[k], L.P[k], c[k]);
    Window(L, s, k, c[k], wa, wb);
    lo[k] = PetscMax(0, st - wa);
    hi[k] = PetscMax(0, wb - (st + n));
  }
}

/* runs of a box of extents b in a row-major storage of extents a (ddnn::Runs::Build on its offsets) */
PetscInt64 BoxRuns(PetscInt d, const PetscInt b[], const PetscInt a[])
{
  PetscInt j = d - 1;
  while (j > 0 && b[j] == a[j]) j--;
  PetscInt64 r = 1;
  for (PetscInt k = 0; k < j; k++) r *= b[k];
  return r;
}

/* the message buffers the exchange engine allocates at set-up for one peer (Exchange::SetUp) */
PetscInt64 PeerBuffer(PetscInt64 total, PetscInt64 runs, PetscBool usetypes)
{
  if (usetypes && runs > 1 && total >= 64 * runs) return 0;
  return (PetscInt64)sizeof(double) * total + 1;
}

/* this rank's halo exchange: v = {messages sent, bytes sent, messages received, bytes received} forward; buffer bytes */
void HaloVolume(const Layer &L, const DDModelLayerSpec &s, const PetscInt me[], PetscInt64 v[4], PetscInt64 *buf)
{
  const PetscInt d         = L.d;
  PetscBool      usetypes  = ddnn::DDExchangeUseTypes();
  PetscInt       lo[DD_MAX_DIM], hi[DD_MAX_DIM], ext[DD_MAX_DIM], mst[DD_MAX_DIM], mn[DD_MAX_DIM], wa[DD_MAX_DIM], wb[DD_MAX_DIM];
  v[0] = v[1] = v[2] = v[3] = 0;
  *buf = 0;
  InputHalo(L, s, me, lo, hi);
  for (PetscInt k = 0; k < d; k++) {
    mst[k] = PieceStart(L.in[k], L.P[k], me[k]);
    mn[k]  = PieceSize(L.in[k], L.P[k], me[k]);
    ext[k] = mn[k] + lo[k] + hi[k];
    Window(L, s, k, me[k], wa[k], wb[k]);
  }
  /* every other worker q: what my window takes of its bulk (received), what its window takes of mine
     (sent); along each dimension only the coordinates where either is not empty (a few neighbors) */
  std::vector<PetscInt> cand[DD_MAX_DIM];
  for (PetscInt k = 0; k < d; k++)
    for (PetscInt c = 0; c < L.P[k]; c++) {
      PetscInt qs = PieceStart(L.in[k], L.P[k], c), qn = PieceSize(L.in[k], L.P[k], c), qa, qb;
      Window(L, s, k, c, qa, qb);
      if (c == me[k] || PetscMin(wb[k], qs + qn) > PetscMax(wa[k], qs) || PetscMin(qb, mst[k] + mn[k]) > PetscMax(qa, mst[k])) cand[k].push_back(c);
    }
  PetscInt q[DD_MAX_DIM], qi[DD_MAX_DIM];
  for (PetscInt k = 0; k < d; k++) {
    qi[k] = 0;
    q[k]  = cand[k][0];
  }
  while (true) {
    bool self = true;
    for (PetscInt k = 0; k < d; k++) self = self && q[k] == me[k];
    if (!self) {
      PetscInt   br[DD_MAX_DIM], bs[DD_MAX_DIM];
      PetscInt64 nr = 1, ns = 1;
      for (PetscInt k = 0; k < d; k++) {
        PetscInt qs = PieceStart(L.in[k], L.P[k], q[k]), qn = PieceSize(L.in[k], L.P[k], q[k]), qa, qb;
        Window(L, s, k, q[k], qa, qb);
        br[k] = PetscMax(0, PetscMin(wb[k], qs + qn) - PetscMax(wa[k], qs));
        bs[k] = PetscMax(0, PetscMin(qb, mst[k] + mn[k]) - PetscMax(qa, mst[k]));
        nr *= br[k];
        ns *= bs[k];
      }
      if (nr > 0) {
        v[2]++;
        v[3] += (PetscInt64)L.es * nr;
        *buf += PeerBuffer(nr, BoxRuns(d, br, ext), usetypes);
      }
      if (ns > 0) {
        v[0]++;
        v[1] += (PetscInt64)L.es * ns;
        *buf += PeerBuffer(ns, BoxRuns(d, bs, ext), usetypes);
      }
    }
    PetscInt k = d - 1;
    for (; k >= 0; k--) {
      if (++qi[k] < (PetscInt)cand[k].size()) {
        q[k] = cand[k][qi[k]];
        break;
      }
      qi[k] = 0;
      q[k]  = cand[k][0];
    }
    if (k < 0) break;
  }
}

PetscErrorCode Describe(const DDModelLayerSpec *s, Layer &L)
{
  const char *t = s->type;

  PetscFunctionBegin;
  PetscCheck(t, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "The layer description has no type");
  if (!strcmp(t, DDLAYERCONV)) L.kind = K_CONV;
  else if (!strcmp(t, DDLAYERBATCHNORM)) L.kind = K_BN;
  else if (!strcmp(t, DDLAYERACTIVATION)) L.kind = K_ACT;
  else if (!strcmp(t, DDLAYERPOOL)) L.kind = K_POOL;
  else if (!strcmp(t, DDLAYERUPSAMPLE)) L.kind = K_UP;
  else if (!strcmp(t, DDLAYERCONCAT)) L.kind = K_CONCAT;
  else if (!strcmp(t, DDLAYERLOSS)) L.kind = K_LOSS;
  else SETERRQ(PETSC_COMM_SELF, PETSC_ERR_SUP, "The analytic model has no form for layer type %s (conv, batchnorm, activation, pool, upsample, concat, loss)", t);
  PetscCheck(s->dtype == DD_FLOAT32 || s->dtype == DD_FLOAT64, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: data type %d is neither float32 nor float64", t, (int)s->dtype);
  PetscCheck(s->order >= 3 && s->order <= 5, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: order %" PetscInt_FMT " is not N x C x 1 to 3 spatial dimensions", t, s->order);
  L.d  = s->order;
  L.D  = s->order - 2;
  L.es = s->dtype == DD_FLOAT32 ? 4 : 8;
  L.ranks = 1;
  for (PetscInt k = 0; k < L.d; k++) {
    PetscCheck(s->shape[k] >= 1, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: shape[%" PetscInt_FMT "] = %" PetscInt_FMT " must be positive", t, k, s->shape[k]);
    PetscCheck(s->parts[k] >= 1 && s->parts[k] <= s->shape[k], PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: parts[%" PetscInt_FMT "] = %" PetscInt_FMT " must be in [1, shape[%" PetscInt_FMT "] = %" PetscInt_FMT "] (no empty pieces)", t, k, s->parts[k], k, s->shape[k]);
    L.in[k] = L.out[k] = s->shape[k];
    L.P[k]             = s->parts[k];
    L.ranks *= s->parts[k];
  }
  PetscCheck(s->parts[1] == 1, PETSC_COMM_SELF, PETSC_ERR_SUP, "Layer %s: the analytic model covers sample, spatial and hybrid partitions; parts[1] = %" PetscInt_FMT " splits the channels", t, s->parts[1]);
  for (PetscInt j = 0; j < L.D; j++) {
    const PetscInt k = 2 + j, n = s->shape[k];
    if (L.kind == K_CONV || L.kind == K_POOL) {
      PetscCheck(s->kernel[j] >= 1 && s->stride[j] >= 1 && s->padding[j] >= 0, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: kernel %" PetscInt_FMT ", stride %" PetscInt_FMT " must be positive and padding %" PetscInt_FMT " non-negative (spatial dimension %" PetscInt_FMT ")", t, s->kernel[j], s->stride[j], s->padding[j], j);
      PetscCheck(n + 2 * s->padding[j] >= s->kernel[j], PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Layer %s: kernel %" PetscInt_FMT " is larger than the padded input %" PetscInt_FMT " + 2 x %" PetscInt_FMT " (spatial dimension %" PetscInt_FMT ")", t, s->kernel[j], n, s->padding[j], j);
      PetscCheck(L.kind == K_CONV || 2 * s->padding[j] <= s->kernel[j], PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: padding %" PetscInt_FMT " must be at most half the kernel %" PetscInt_FMT, t, s->padding[j], s->kernel[j]);
      L.out[k] = (n + 2 * s->padding[j] - s->kernel[j]) / s->stride[j] + 1;
    } else if (L.kind == K_UP) {
      PetscCheck(s->stride[j] == 1 || s->stride[j] == 2, PETSC_COMM_SELF, PETSC_ERR_SUP, "Layer %s: the analytic model covers upsampling by 1 or 2; stride (scale) %" PetscInt_FMT " along spatial dimension %" PetscInt_FMT, t, s->stride[j], j);
      L.out[k] = n * s->stride[j];
    }
    PetscCheck(L.out[k] >= L.P[k], PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Layer %s: the output's %" PetscInt_FMT " entries along dimension %" PetscInt_FMT " cannot fill %" PetscInt_FMT " workers", t, L.out[k], k, L.P[k]);
  }
  if (L.kind == K_CONV) {
    PetscCheck(s->channels >= 1, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: output channels %" PetscInt_FMT " must be positive", t, s->channels);
    L.out[1] = s->channels;
  } else if (L.kind == K_CONCAT) {
    PetscCheck(s->channels >= 1, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: the second input's channels %" PetscInt_FMT " must be positive", t, s->channels);
    L.out[1] = s->shape[1] + s->channels;
  } else if (L.kind == K_LOSS)
    for (PetscInt k = 0; k < L.d; k++) L.out[k] = 1;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace

/*@C
  DDModelLayerSpecInitialize - Fills a layer description for the analytic performance model with its defaults

  Not collective

  Input Parameters:
+ type  - the layer type (`DDLAYERCONV`, `DDLAYERBATCHNORM`, `DDLAYERACTIVATION`, `DDLAYERPOOL`, `DDLAYERUPSAMPLE`, `DDLAYERCONCAT`, `DDLAYERLOSS`)
. dt    - the data type
. order - 2 + the number of spatial dimensions
. shape - the global shape of the (first) input, order entries
- parts - the workers along each dimension of the input's partition, order entries (NULL: one)

  Output Parameter:
. spec - the description: kernel 1, stride 1, padding 0, no bias, channels 0 (set them after this call)

  Level: intermediate

.seealso: `DDModelPredictLayer()`, `DDModelPredictLayerMax()`
@*/
PetscErrorCode DDModelLayerSpecInitialize(DDModelLayerSpec *spec, DDLayerType type, DDDataType dt, PetscInt order, const PetscInt shape[], const PetscInt parts[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidPointer(spec, 1);
  PetscValidIntPointer(shape, 5);
  PetscCheck(order >= 1 && order <= DD_MAX_DIM, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Order %" PetscInt_FMT " out of range [1, %d]", order, DD_MAX_DIM);
  PetscCall(PetscMemzero(spec, sizeof(*spec)));
  spec->type  = type;
  spec->dtype = dt;
  spec->order = order;
  for (PetscInt k = 0; k < order; k++) {
    spec->shape[k] = shape[k];
    spec->parts[k] = parts ? parts[k] : 1;
  }
  for (PetscInt j = 0; j < 3; j++) {
    spec->kernel[j] = 1;
    spec->stride[j] = 1;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDModelPredictLayer - The performance model's predictions for one worker of a layer that is not set up: work, messages and bytes, collectives, memory and times

  Not collective

  Input Parameters:
+ spec     - the layer: type, data type, global input shape, the partition's shape (parts), kernel, stride, padding, channels
. consumer - the layer that reads its output (its halo exchange grows the output's storage, which the
             memory and the pointwise walk count), or NULL; its shape must be this layer's output shape
. backend  - the backend whose calibrated fits price the kernels (NULL: the default backend)
- rank     - the worker, its index in the C order of the partition's coordinates (the last dimension
             fastest, as `DDPartitionCreateCartesian()` numbers them); 0 <= rank < prod(parts)

  Output Parameter:
. pred - the predictions, each equal to what the set-up layer's model reports on that rank:
         `DDLayerGetModelWork()`, `DDLayerGetModelRuns()`, `DDLayerGetModelComm()` (or, with
         spec->noinputgradient, `DDNetGetLayerModelComm()` of a network's first layer),
         `DDLayerGetModelCollectives()`, `DDLayerGetModelMemory()` and `DDLayerGetModelTime()`

  Notes:
  The analytic form of the model (paper 003 sec. V-A), for configurations that cannot be set up on
  this machine (paper 000 sec. 5, paper 003 sec. VI). The pieces are balanced as ddnn's partitions
  make them (the output's along each kernel dimension, paper 000 App. B); each worker's halo
  window follows its output piece, and it exchanges one message with every worker holding part of
  the window beyond its bulk (faces, edges and corners); entries past the global edge are zero
  padding, not messages. Weights live on worker 0 and are broadcast to every worker (their
  gradients sum-reduced), the normalization's statistics are all-sum-reduced over all workers;
  with spec->replicated (a network in the replicated weight mode, `DDNetSetWeightMode()`) the
  layer makes no weight collective, as a set-up layer whose replicas the network keeps
  (`DDModelPredictReplicatedWeights()` prices the network's bucketed ones).
  The times are the set-up model's formula on these data (`DDLayerGetModelTime()`): the fits
  measured on prod(parts) ranks where the calibration has them, the share 1 - L2 / M of the cold
  fits when the predicted memory M on the rank exceeds the core's L2 cache, the conv's weight-gradient fit with
  spec->noinputgradient, measured collectives at the group sizes calibrated. The loss is priced as
  one against targets of the prediction's shape (mse, l1), not class indices.

  Covered: convolution (stride, padding, bias; no dilation or groups), batch normalization (affine),
  activation (priced as ReLU), max or average pooling (spec->average), nearest or linear upsampling by 1 or 2, concatenation
  of two inputs along the channels, loss (mean reduction); partitions that split the batch and the
  spatial dimensions but not the channels, no empty pieces, the partition spanning the
  communicator. A configuration outside this is an error naming it. Storage is plain (float64, and
  float32 layers of fewer than 16 channels on /cpu/dnnl): with oneDNN's blocked float32 storage the
  messages, bytes, collectives, work, activations, parameters and work tensors are the same, but
  the halo memory (storage and message buffers) and the runs of the pointwise walks (so the
  pointwise layers' compute times) differ. Not in it: the network's own work in
  `DDNetBackward()` and the optimizer's update (`DDNetGetModelUpdateTime()`).

  Level: intermediate

.seealso: `DDModelPredictLayerMax()`, `DDLayerGetModelTime()`, `DDLayerGetModelComm()`, `DDLayerGetModelMemory()`
@*/
PetscErrorCode DDModelPredictLayer(const DDModelLayerSpec *spec, const DDModelLayerSpec *consumer, const char backend[], PetscInt rank, DDModelLayerPrediction *pred)
DD_CXX_TRY
{
  Layer       L, C;
  const char *bname = backend;
  PetscInt    me[DD_MAX_DIM], olo[DD_MAX_DIM], ohi[DD_MAX_DIM];
  PetscBool   ok = PETSC_TRUE;

  PetscFunctionBegin;
  PetscValidPointer(spec, 1);
  PetscValidPointer(pred, 5);
  PetscCall(Describe(spec, L));
  PetscCheck(rank >= 0 && rank < L.ranks, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %s: rank %" PetscInt_FMT " is not in [0, %" PetscInt_FMT ") (the product of parts)", spec->type, rank, L.ranks);
  if (!bname) PetscCall(DDBackendGetDefault(&bname));
  PetscCall(PetscMemzero(pred, sizeof(*pred)));
  Coords(L, rank, me);
  for (PetscInt k = 0; k < L.d; k++) pred->outshape[k] = L.out[k];
  /* the output's storage halo: grown by the consumer's exchange */
  for (PetscInt k = 0; k < L.d; k++) olo[k] = ohi[k] = 0;
  if (consumer) {
    PetscCall(Describe(consumer, C));
    PetscCheck(L.kind != K_LOSS, PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "A loss has no consumer");
    PetscCheck(C.d == L.d && consumer->dtype == spec->dtype, PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "The consumer (%s) reads a tensor of another order or data type than the %s's output", consumer->type, spec->type);
    for (PetscInt k = 0; k < L.d; k++) {
      PetscCheck(C.in[k] == L.out[k], PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "The consumer (%s) takes shape[%" PetscInt_FMT "] = %" PetscInt_FMT " but the %s's output has %" PetscInt_FMT, consumer->type, k, C.in[k], spec->type, L.out[k]);
      PetscCheck(C.P[k] == L.P[k], PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "The consumer (%s) has parts[%" PetscInt_FMT "] = %" PetscInt_FMT " but the %s's output keeps its input's %" PetscInt_FMT " (insert a repartition)", consumer->type, k, C.P[k], spec->type, L.P[k]);
    }
    InputHalo(C, *consumer, me, olo, ohi);
  }
  /* local pieces */
  PetscInt64 xbulk = 1, ybulk = 1, ystore = 1, ylast = 1;
  for (PetscInt k = 0; k < L.d; k++) {
    PetscInt yn = PieceSize(L.out[k], L.P[k], me[k]);
    xbulk *= PieceSize(L.in[k], L.P[k], me[k]);
    ybulk *= yn;
    ystore *= yn + olo[k] + ohi[k];
    ylast = yn;
  }
  if (L.kind == K_LOSS) ybulk = ystore = rank == 0 ? 1 : 0; /* the value, on the first worker */
  const PetscInt64 es = (PetscInt64)L.es;
  /* work (DDLayerGetModelWork) */
  PetscInt64 nw = 0; /* the convolution's weights */
  if (L.kind == K_CONV) {
    nw = L.out[1] * L.in[1];
    for (PetscInt j = 0; j < L.D; j++) nw *= spec->kernel[j];
    pred->flops[0] = 2.0 * (PetscReal)ybulk * (PetscReal)(nw / L.out[1]);
    pred->flops[1] = 2 * pred->flops[0];
  } else {
    PetscInt64 in = xbulk;
    if (L.kind == K_CONCAT) in += xbulk / L.in[1] * spec->channels;
    if (L.kind == K_LOSS) in *= 2; /* prediction and target */
    pred->bytes[0] = (PetscReal)es * (PetscReal)(in + ybulk);
    pred->bytes[1] = (PetscReal)es * (PetscReal)(in + 2 * ybulk);
  }
  /* the passes the backend chain runs by Winograd on this worker's geometry (DDLayerConvWinogradPasses_Private() of the set-up layer) */
  bool wino[3] = {false, false, false};
  if (L.kind == K_CONV && ybulk > 0) {
    ddnn::ConvGeom g;
    g.D  = L.D;
    g.N  = PieceSize(L.in[0], L.P[0], me[0]);
    g.Ci = L.in[1];
    g.Co = L.out[1];
    for (PetscInt j = 0; j < L.D; j++) {
      const PetscInt jj = j + 3 - L.D;
      g.k[jj]           = spec->kernel[j];
      g.s[jj]           = spec->stride[j];
      g.out[jj]         = PieceSize(L.out[2 + j], L.P[2 + j], me[2 + j]);
      g.in[jj]          = (g.out[jj] - 1) * g.s[jj] + g.k[jj]; /* the halo'd window */
    }
    DDBackend b = ddnn::DDBackendLookup_Private(bname);
    if (b) PetscCall(ddnn::DDBackendConvWinograd(b, spec->dtype, g, false, wino));
  }
  /* the pointwise walk (DDLayerGetModelRuns): input and output of the same local shape */
  bool sameshape = L.kind == K_BN || L.kind == K_ACT || ((L.kind == K_POOL || L.kind == K_UP) && xbulk == ybulk);
  if (L.kind == K_POOL || L.kind == K_UP)
    for (PetscInt k = 0; k < L.d; k++) sameshape = sameshape && PieceSize(L.in[k], L.P[k], me[k]) == PieceSize(L.out[k], L.P[k], me[k]);
  /* the runs of a walk over an input with halos lo, hi and the output (ForEachBulkRunPair(), plain storage): rows
     merged outward across the dimensions both hold whole, so they break at the innermost dimension either pads */
  auto walkruns = [&](const PetscInt lo[], const PetscInt hi[]) {
    PetscInt   j    = 0;
    PetscInt64 runs = 1;
    for (PetscInt k = 0; k < L.d; k++)
      if (lo[k] || hi[k] || olo[k] || ohi[k]) j = k;
    for (PetscInt k = 0; k < j; k++) runs *= PieceSize(L.out[k], L.P[k], me[k]);
    return runs;
  };
  if (sameshape && ybulk > 0) { /* the pointwise layers' input has no halo */
    const PetscInt none[DD_MAX_DIM] = {0};
    pred->runs                      = walkruns(none, none);
  }
  if (L.kind == K_CONV && ybulk > 0) { /* a convolution keeping the local shape (C_out = C_in, stride 1, "same" padding): runs
                                          of the walk over its halo'd input and its output (not priced: a GEMM kind) */
    PetscInt lo[DD_MAX_DIM], hi[DD_MAX_DIM];
    bool     same = true;
    InputHalo(L, *spec, me, lo, hi);
    for (PetscInt k = 0; k < L.d; k++) same = same && PieceSize(L.out[k], L.P[k], me[k]) == PieceSize(L.in[k], L.P[k], me[k]);
    if (same) pred->runs = walkruns(lo, hi);
  }
  /* this layer's halo exchange */
  PetscInt64 hv[4] = {0, 0, 0, 0}, hbuf = 0;
  bool       halo = HasHalo(L, *spec);
  if (halo) HaloVolume(L, *spec, me, hv, &hbuf);
  for (int k = 0; k < 4; k++) pred->comm[0][k] = hv[k];
  if (!spec->noinputgradient) {
    pred->comm[1][0] = hv[2];
    pred->comm[1][1] = hv[3];
    pred->comm[1][2] = hv[0];
    pred->comm[1][3] = hv[1];
  }
  /* collectives as model.cxx's CollectiveOf, in the order the layers set them up */
  std::vector<ddnn::ModelCollective> colls;
  const PetscInt                     Cin = L.in[1];
  auto                               coll = [&](int kind, PetscInt64 bytes, bool isreduce) {
    ddnn::ModelCollective c;
    c.kind     = kind;
    c.bytes    = bytes;
    c.group    = (PetscMPIInt)L.ranks;
    c.isreduce = isreduce;
    colls.push_back(c);
  };
  if (L.kind == K_CONV && L.ranks > 1 && !spec->replicated) {
    coll(1, es * nw, false); /* the weights' broadcast (its adjoint the gradient's sum-reduction) */
    if (spec->bias) coll(1, es * L.out[1], false);
  } else if (L.kind == K_BN && L.ranks > 1) {
    if (!spec->replicated) coll(1, es * Cin, false); /* the parameters' broadcast (kept replicas: the network's) */
    coll(2, 8 * Cin, false);
    coll(2, 16 * Cin, false);
  } else if (L.kind == K_LOSS && L.ranks > 1) {
    coll(1, es, true);  /* the partial sums' reduction */
    coll(1, es, false); /* the value's broadcast */
  }
  for (auto &c : colls) {
    pred->collcalls++;
    pred->collbytes += c.bytes;
  }
  /* memory (DDLayerGetModelMemory) */
  pred->memory[0] = es * ybulk;
  pred->memory[1] = es * (ystore - ybulk) + hbuf;
  if (L.kind == K_CONV) {
    const PetscInt64 np = nw + (spec->bias ? L.out[1] : 0);
    if (rank == 0) pred->memory[2] = 2 * es * np;
    if (L.ranks > 1) pred->memory[3] = es * np; /* the workers' copies */
  } else if (L.kind == K_BN) {
    if (rank == 0) pred->memory[2] = 4 * es * Cin;
    if (L.ranks > 1) pred->memory[3] = (rank == 0 ? 2 : 1) * es * Cin + 24 * Cin; /* running mean and its copy, the statistics */
  } else if (L.kind == K_LOSS) pred->memory[3] = 2 * es; /* the partial sum and the broadcast value */
  /* times (DDLayerGetModelTime): model.cxx's formula on this worker's data */
  {
    ddnn::ModelCostInput in;
    in.backend = bname;
    in.dtype   = spec->dtype;
    in.size    = (PetscMPIInt)L.ranks; /* the partition spans the communicator: the "<backend>@P" fits */
    in.kind    = L.kind == K_CONV ? DDLAYERCONV : L.kind == K_BN ? DDLAYERBATCHNORM : L.kind == K_POOL ? (spec->average ? ddnn::ModelKindPoolAvg : DDLAYERPOOL) : L.kind == K_UP ? DDLAYERUPSAMPLE : L.kind == K_CONCAT ? DDLAYERCONCAT : L.kind == K_LOSS ? DDLAYERLOSS : DDLAYERACTIVATION;
    in.nodx    = spec->noinputgradient ? true : false;
    if (L.kind == K_CONV) { /* plain storage: a 1 x 1 unit-stride convolution runs as such (DDLayerConvPlainPointwise_Private()) */
      in.pointwise = true;
      for (PetscInt j = 0; j < L.D; j++) in.pointwise = in.pointwise && spec->kernel[j] == 1 && spec->stride[j] == 1;
    }
    /* LayerCold: the share of the layer's memory on this rank beyond the core's L2 cache */
    in.cold = ddnn::ModelColdFraction_Private((double)(pred->memory[0] + pred->memory[1] + pred->memory[2] + pred->memory[3]));
    in.runs = pred->runs;
    if (pred->runs > 0) in.runlen = (double)ybulk / (double)pred->runs; /* LayerModelTime(): the output's bulk per run */
    in.rows = true; /* plain storage on both sides: the same storage order */
    for (PetscInt k = 0; k < L.d && L.kind == K_CONCAT; k++) in.outhalo = in.outhalo || olo[k] || ohi[k]; /* into the consumer's halo (the inputs have none) */
    if ((L.kind == K_POOL || L.kind == K_UP || in.outhalo) && ylast > 0) in.windowrows = (double)ybulk / (double)ylast; /* ModelWindowRows_Private() of plain storage */
    for (int b = 0; b < 2; b++) {
      in.flops[b] = pred->flops[b];
      in.bytes[b] = pred->bytes[b];
      for (int k = 0; k < 4; k++) in.p2p[b][k] = pred->comm[b][k];
      if (halo && !(b && spec->noinputgradient)) in.halo[b].push_back({pred->comm[b][0], pred->comm[b][1], pred->comm[b][2], pred->comm[b][3]});
      if (L.kind == K_CONV) { /* GemmBytes(): input and output bytes, the idle vector lanes' flops, the column rows, the direct passes' flops */
        in.gemm[b][0] = (double)es * (double)xbulk;
        in.gemm[b][1] = (double)es * (double)ybulk;
        in.gemm[b][2] = ddnn::ModelConvIdleFlops_Private((size_t)es, (double)L.out[1], (double)Cin, (double)pred->flops[0], b ? PETSC_TRUE : PETSC_FALSE);
        in.gemm[b][3] = ddnn::ModelConvColumnRows_Private((double)ybulk, (double)ylast, (double)L.out[1], (double)(nw / L.out[1]));
        in.gemm[b][4] = ddnn::ModelConvDirectFlops_Private(wino, (double)pred->flops[0], b ? PETSC_TRUE : PETSC_FALSE); /* 0 without a local output: no flops */
      }
    }
    in.colls = colls;
    PetscReal comp[2], comm[2];
    PetscCall(ddnn::ModelLayerTimes_Private(in, comp, comm, pred->tcoll, &ok));
    for (int b = 0; b < 2; b++) {
      pred->time[2 * b]     = comp[b];
      pred->time[2 * b + 1] = comm[b];
    }
  }
  pred->calibrated = ok;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the arguments of the bucket predictions checked; a NULL backend is the default one */
static PetscErrorCode BucketArguments(DDDataType dt, PetscInt ranks, PetscInt64 entries, const char **bname)
{
  PetscFunctionBegin;
  PetscCheck(ranks >= 1 && ranks <= PETSC_MPI_INT_MAX, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "ranks %" PetscInt_FMT " must be at least 1", ranks);
  PetscCheck(entries >= 0, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "entries %" PetscInt64_FMT " must not be negative", entries);
  PetscCheck(dt == DD_FLOAT32 || dt == DD_FLOAT64, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Unknown data type %d", (int)dt);
  if (!*bname) PetscCall(DDBackendGetDefault(bname));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDModelPredictReplicatedWeights - The performance model's time of the replicated weight mode's own collectives and copies for a network that is not set up

  Not collective

  Input Parameters:
+ backend - the backend whose calibration prices it (NULL: the default)
. dt      - the weights' data type
. ranks   - the worker group: the ranks that use the weights (all of a sample or spatial split)
- entries - the weights' entries (every parameter the layers broadcast, one bucket)

  Output Parameters:
+ tforward   - seconds of a forward after an optimizer update on the parameters' root (the slowest
               rank): a flag all-reduce, packing, one broadcast, unpacking
. tbackward  - seconds of a backward there: the copies of the replicas' gradients into the bucket,
               one all-reduce, the additions of the sums to the gradients, zeroing the bucket
- calibrated - whether the fits were there (NULL allowed)

  Notes:
  The terms `DDNetGetModelTime()` adds per bucket of a set-up network in the replicated mode
  (`DDNetSetWeightMode()`), for one bucket whose root holds every weight. With the layers priced with
  `DDModelLayerSpec`'s replicated flag (no weight collectives) a paper-scale step in that mode is
  the sum of the layers' and these. On one rank (ranks = 1) only the copies remain.

  Level: advanced

.seealso: `DDModelPredictLayerMax()`, `DDNetSetWeightMode()`, `DDNetGetModelTime()`
@*/
PetscErrorCode DDModelPredictReplicatedWeights(const char backend[], DDDataType dt, PetscInt ranks, PetscInt64 entries, PetscReal *tforward, PetscReal *tbackward, PetscBool *calibrated)
DD_CXX_TRY
{
  const char *bname = backend;
  PetscReal   t[2];
  PetscBool   ok = PETSC_TRUE;

  PetscFunctionBegin;
  PetscCall(BucketArguments(dt, ranks, entries, &bname));
  PetscCall(ddnn::ModelReplicaBucketTimes_Private(bname, (PetscMPIInt)ranks, dt, (PetscMPIInt)ranks, entries, entries, entries, 0, PETSC_FALSE, t, &ok));
  if (tforward) *tforward = t[0];
  if (tbackward) *tbackward = t[1];
  if (calibrated) *calibrated = ok;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDModelPredictDataParallelWeights - The performance model's time of the data-parallel weight mode's own collectives, copies and replica updates for a network that is not set up

  Not collective

  Input Parameters:
+ backend - the backend whose calibration prices it (NULL: the default)
. dt      - the weights' data type
. ranks   - the worker group: the ranks that use the weights (all of a sample or spatial split)
- entries - the weights' entries (every parameter the layers broadcast, one bucket)

  Output Parameters:
+ tforward   - seconds of a forward on the slowest rank: a flag all-reduce (no broadcast after an update)
. tbackward  - seconds of a backward and the replicas' update on the slowest rank (the parameters'
               root, which adds its gradient into the bucket and copies w into its own replica, or a
               worker, which updates its copy with the optimizer, priced as Adam's update): the
               copies of the replicas' gradients, one all-reduce, a flag all-reduce at the step,
               the copies and updates, zeroing the bucket
- calibrated - whether the fits were there (NULL allowed)

  Notes:
  The terms `DDNetGetModelTime()` adds per bucket of a set-up network in the data-parallel mode
  (`DDNetSetWeightMode()`), for one bucket whose root holds every weight, the larger of the
  root's and a worker's. With the layers priced with `DDModelLayerSpec`'s replicated flag (no
  weight collectives) a paper-scale step in that mode is the sum of the layers' and these. On one
  rank (ranks = 1) only the root's copies remain.

  Level: advanced

.seealso: `DDModelPredictReplicatedWeights()`, `DDNetSetWeightMode()`, `DDNetGetModelTime()`
@*/
PetscErrorCode DDModelPredictDataParallelWeights(const char backend[], DDDataType dt, PetscInt ranks, PetscInt64 entries, PetscReal *tforward, PetscReal *tbackward, PetscBool *calibrated)
DD_CXX_TRY
{
  const char *bname = backend;
  PetscReal   t[2], w[2] = {0, 0};
  PetscBool   ok = PETSC_TRUE;

  PetscFunctionBegin;
  PetscCall(BucketArguments(dt, ranks, entries, &bname));
  PetscCall(ddnn::ModelReplicaBucketTimes_Private(bname, (PetscMPIInt)ranks, dt, (PetscMPIInt)ranks, entries, entries, entries, 0, PETSC_TRUE, t, &ok)); /* the root */
  if (ranks > 1) PetscCall(ddnn::ModelReplicaBucketTimes_Private(bname, (PetscMPIInt)ranks, dt, (PetscMPIInt)ranks, entries, 0, entries, entries, PETSC_TRUE, w, &ok)); /* a worker */
  if (tforward) *tforward = PetscMax(t[0], w[0]);
  if (tbackward) *tbackward = PetscMax(t[1], w[1]);
  if (calibrated) *calibrated = ok;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDModelPredictLayerMax - The performance model's predictions for a layer that is not set up, the maximum over its workers

  Not collective

  Input Parameters:
+ spec     - the layer (see `DDModelPredictLayer()`)
. consumer - the layer that reads its output, or NULL
- backend  - the backend (NULL: the default)

  Output Parameter:
. pred - every count, byte and memory entry the maximum over the workers; the forward times those
         of the worker whose forward (compute + communication) is slowest, the backward times likewise,
         as `DDNetGetModelTime()` sums the slowest worker's time per layer; calibrated on all of them

  Notes:
  Walks every worker (prod(parts) of them; paper 000's 18^3 = 5832 is fine).

  Level: intermediate

.seealso: `DDModelPredictLayer()`
@*/
PetscErrorCode DDModelPredictLayerMax(const DDModelLayerSpec *spec, const DDModelLayerSpec *consumer, const char backend[], DDModelLayerPrediction *pred)
DD_CXX_TRY
{
  Layer                  L;
  DDModelLayerPrediction p;

  PetscFunctionBegin;
  PetscValidPointer(spec, 1);
  PetscValidPointer(pred, 4);
  PetscCall(Describe(spec, L));
  for (PetscInt r = 0; r < L.ranks; r++) {
    PetscCall(DDModelPredictLayer(spec, consumer, backend, r, &p));
    if (r == 0) {
      *pred = p;
      continue;
    }
    for (int b = 0; b < 2; b++) {
      pred->flops[b] = PetscMax(pred->flops[b], p.flops[b]);
      pred->bytes[b] = PetscMax(pred->bytes[b], p.bytes[b]);
      for (int k = 0; k < 4; k++) pred->comm[b][k] = PetscMax(pred->comm[b][k], p.comm[b][k]);
      if (p.time[2 * b] + p.time[2 * b + 1] > pred->time[2 * b] + pred->time[2 * b + 1]) {
        pred->time[2 * b]     = p.time[2 * b];
        pred->time[2 * b + 1] = p.time[2 * b + 1];
        pred->tcoll[b]        = p.tcoll[b];
      }
    }
    pred->runs      = PetscMax(pred->runs, p.runs);
    pred->collcalls = PetscMax(pred->collcalls, p.collcalls);
    pred->collbytes = PetscMax(pred->collbytes, p.collbytes);
    for (int k = 0; k < 4; k++) pred->memory[k] = PetscMax(pred->memory[k], p.memory[k]);
    pred->calibrated = (PetscBool)(pred->calibrated && p.calibrated);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
