/* Hyper-parameter arrays of sliding-window layers (kernel, stride, padding, dilation), C++ only. */
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <backend/kernels.hpp>
#include <backend/cpu/conv_dnnl.hpp>
#include <initializer_list>
#include <string>
#include <vector>

namespace ddnn
{
/* An integer per spatial dimension, given with 1 entry (all dimensions) or D entries. */
struct SpatialParam {
  PetscInt    n = 0;         /* entries given, 0: not given */
  PetscInt    v[3] = {0, 0, 0};
  const char *opt = "";      /* its option key, for error messages */
  PetscErrorCode Set(MPI_Comm comm, PetscInt cnt, const PetscInt vals[], const char *what)
  {
    PetscFunctionBegin;
    PetscCheck(cnt >= 1 && cnt <= 3, comm, PETSC_ERR_ARG_SIZ, "%s needs 1 to 3 entries, %" PetscInt_FMT " given", what, cnt);
    n = cnt;
    for (PetscInt j = 0; j < cnt; j++) v[j] = vals[j];
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* out[3] (padded with leading defaults) for D spatial dimensions; errors name the option */
  PetscErrorCode Resolve(DDLayer l, PetscInt D, PetscInt dflt, bool required, PetscInt minv, PetscInt out[3]) const
  {
    const char *prefix;
    PetscFunctionBegin;
    PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
    PetscCheck(n || !required, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs -%s%s (or its setter)", prefix ? prefix : "", prefix ? prefix : "", opt);
    PetscCheck(n <= 1 || n == D, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_SIZ, "-%s%s has %" PetscInt_FMT " entries but the input has %" PetscInt_FMT " spatial dimension(s)", prefix ? prefix : "", opt, n, D);
    for (PetscInt j = 0; j < 3; j++) out[j] = (j < 3 - D) ? 1 : (n == 0 ? dflt : (n == 1 ? v[0] : v[j - (3 - D)]));
    for (PetscInt j = 3 - D; j < 3; j++) PetscCheck(out[j] >= minv, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "-%s%s entry %" PetscInt_FMT " must be at least %" PetscInt_FMT, prefix ? prefix : "", opt, out[j], minv);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode FromOptions(PetscOptionItems *PetscOptionsObject, const char *key, const char *text, const char *man)
  {
    PetscInt  vals[8], cnt = 8;
    PetscBool set;
    PetscFunctionBegin;
    opt = key + 1;
    for (PetscInt j = 0; j < 3; j++) vals[j] = v[j];
    PetscCall(PetscOptionsIntArray(key, text, man, vals, &cnt, &set));
    if (set) {
      PetscCheck(cnt >= 1 && cnt <= 3, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "%s has %" PetscInt_FMT " entries; give 1 to 3", key, cnt);
      n = cnt;
      for (PetscInt j = 0; j < cnt; j++) v[j] = vals[j];
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
/* a few leading entries followed by a vector's */
inline std::vector<PetscInt> Cat(std::initializer_list<PetscInt> a, const std::vector<PetscInt> &b)
{
  std::vector<PetscInt> r(a);
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

/*
  Parameters of a convolution or transposed convolution over Pn x Pci x Pco x Pss workers (paper 000
  sec. 4.1.2, Fig. 4): the weights, Co x Ci x k... (transposed: Ci x Co x k...), on Pr = Pco x Pci
  (Pci x Pco), the channel pieces following x's; the bias (Co) on Pb = Pco; with bcastW, their
  broadcasts w^ = B w, b^ = B b onto all Pn x Pss replicas (otherwise w^ is w). rank(co, n, ci, s)
  is the rank of a worker. C has the members named below.
*/
template <class C, class Rank>
PetscErrorCode ConvSetUpParameters(DDLayer l, C *c, DDTensor x, PetscInt D, const PetscInt k[3], PetscInt Pn, PetscInt Pci, PetscInt Pco, PetscInt Pss, bool transposed, Rank rank)
{
  MPI_Comm              comm = PetscObjectComm((PetscObject)l);
  std::vector<PetscInt> ones((size_t)D, 1);
  /* (i1, i2): the two channel indices in the weights' order */
  const PetscInt P1 = transposed ? Pci : Pco, P2 = transposed ? Pco : Pci;
  auto           coci = [&](PetscInt i1, PetscInt i2, PetscInt &co, PetscInt &ci) {
    co = transposed ? i2 : i1;
    ci = transposed ? i1 : i2;
  };

  PetscFunctionBegin;
  {
    std::vector<PetscMPIInt> r;
    for (PetscInt i1 = 0; i1 < P1; i1++)
      for (PetscInt i2 = 0; i2 < P2; i2++) {
        PetscInt co, ci;
        coci(i1, i2, co, ci);
        r.push_back(rank(co, 0, ci, 0));
      }
    PetscCall(MakePartition(comm, Cat({P1, P2}, ones), r, &c->Pr));
  }
  std::vector<PetscInt> shape, cl((size_t)Pci);
  if (transposed) shape = {x->shape[1], c->co};
  else shape = {c->co, x->shape[1]};
  for (PetscInt j = 3 - D; j < 3; j++) shape.push_back(k[j]);
  for (PetscInt ci = 0; ci < Pci; ci++) cl[ci] = x->ranges[1][ci + 1] - x->ranges[1][ci];
  PetscCall(DDTensorCreate(comm, &c->w));
  PetscCall(DDTensorSetPartition(c->w, c->Pr));
  PetscCall(DDTensorSetShape(c->w, 2 + D, shape.data()));
  PetscCall(DDTensorSetDataType(c->w, x->dtype));
  PetscCall(DDTensorSetOwnershipRanges(c->w, transposed ? 0 : 1, cl.data()));
  PetscCall(DDTensorSetUp(c->w));
  PetscCall(DDLayerAddParameter_Private(l, "weight", c->w));
  if (c->bcastW) {
    std::vector<PetscMPIInt> rw;
    for (PetscInt n = 0; n < Pn; n++)
      for (PetscInt sl = 0; sl < Pss; sl++)
        for (PetscInt i1 = 0; i1 < P1; i1++)
          for (PetscInt i2 = 0; i2 < P2; i2++) {
            PetscInt co, ci;
            coci(i1, i2, co, ci);
            rw.push_back(rank(co, n, ci, sl));
          }
    PetscCall(MakePartition(comm, Cat({Pn * Pss, P1, P2}, ones), rw, &c->Pww));
    PetscCall(DDTensorCreateBroadcast(c->w, c->Pww, &c->wh));
    PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, c->w, c->wh, &c->Bw));
  } else {
    PetscCall(PetscObjectReference((PetscObject)c->w));
    c->wh = c->w;
  }
  if (!c->bias) PetscFunctionReturn(PETSC_SUCCESS);
  std::vector<PetscMPIInt> rb;
  for (PetscInt co = 0; co < Pco; co++) rb.push_back(rank(co, 0, 0, 0));
  PetscCall(MakePartition(comm, {Pco}, rb, &c->Pb));
  PetscCall(DDTensorCreateFromPartition(c->Pb, x->dtype, 1, &c->co, &c->b));
  PetscCall(DDLayerAddParameter_Private(l, "bias", c->b));
  if (c->bcastW) {
    std::vector<PetscMPIInt> rbw;
    for (PetscInt n = 0; n < Pn; n++)
      for (PetscInt sl = 0; sl < Pss; sl++)
        for (PetscInt co = 0; co < Pco; co++) rbw.push_back(rank(co, n, 0, sl));
    PetscCall(MakePartition(comm, {Pn * Pss, Pco}, rbw, &c->Pwb));
    PetscCall(DDTensorCreateBroadcast(c->b, c->Pwb, &c->bh));
    PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, c->b, c->bh, &c->Bb));
  } else {
    PetscCall(PetscObjectReference((PetscObject)c->b));
    c->bh = c->b;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  y = R y^: with reduceY, y^ is the output broadcast onto the Pci x Pn x Pco x Pss workers and R
  the sum-reduce over ci (paper 000 sec. 4.1.2, Fig. 4). ps: the spatial partition shape.
*/
template <class C, class Rank>
PetscErrorCode ConvSetUpOutputReduce(DDLayer l, C *c, PetscInt Pn, PetscInt Pci, PetscInt Pco, PetscInt Pss, const std::vector<PetscInt> &ps, Rank rank)
{
  MPI_Comm                 comm = PetscObjectComm((PetscObject)l);
  std::vector<PetscMPIInt> r;

  PetscFunctionBegin;
  for (PetscInt ci = 0; ci < Pci; ci++)
    for (PetscInt n = 0; n < Pn; n++)
      for (PetscInt co = 0; co < Pco; co++)
        for (PetscInt sl = 0; sl < Pss; sl++) r.push_back(rank(co, n, ci, sl));
  PetscCall(MakePartition(comm, Cat({Pci, Pn, Pco}, ps), r, &c->Pwy));
  PetscCall(DDTensorCreateBroadcast(l->output, c->Pwy, &c->yh));
  PetscCall(MakePrimitive(comm, DDPRIMITIVESUMREDUCE, c->yh, l->output, &c->Ry));
  PetscFunctionReturn(PETSC_SUCCESS);
}
/*
  The formats of x^ and y that the local kernels of a convolution (transposed or not) want:
  oneDNN's preferred ones for float32 (usednnl), strided ones for the reference loops. They come
  from a rank-independent geometry (ci, co channels per worker, 8 output entries per spatial
  dimension), so that every rank picks the same formats.
*/
inline PetscErrorCode ConvKernelFormats(DDTensor x, PetscInt D, const PetscInt k[3], const PetscInt s[3], const PetscInt d[3], PetscInt ci, PetscInt co, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, bool *usednnl)
{
  PetscFunctionBegin;
  *xf      = x->format;
  *xbs     = x->bs;
  *yf      = DD_FORMAT_PLAIN;
  *ybs     = 1;
  *usednnl = false;
#if DDNN_WITH_DNNL
  if (x->dtype == DD_FLOAT32) {
    ConvGeom q;
    q.D  = D;
    q.N  = 2;
    q.Ci = PetscMax(1, ci);
    q.Co = PetscMax(1, co);
    for (PetscInt j = 0; j < 3; j++) {
      PetscInt &narrow = transposed ? q.in[j] : q.out[j], &wide = transposed ? q.out[j] : q.in[j];
      q.k[j] = k[j];
      q.s[j] = s[j];
      q.d[j] = d[j];
      narrow = j < 3 - D ? 1 : 8;
      wide   = (narrow - 1) * s[j] + (k[j] - 1) * d[j] + 1;
    }
    PetscCall(DnnlConv::Preferred(q, transposed, xf, xbs, yf, ybs));
    *usednnl = true;
  }
#endif
  if (!*usednnl) { /* the reference loops need strided formats */
    if (*xf == DD_FORMAT_BLOCKED) *xf = DD_FORMAT_PLAIN;
    *yf = *xf;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
