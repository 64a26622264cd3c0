/* Hyper-parameter arrays of sliding-window layers (kernel, stride, padding, dilation), C++ only. */
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <backend/kernels.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <initializer_list>
#include <string>
#include <vector>

namespace ddnn
{
/* a few leading entries followed by a vector's */
inline std::vector<PetscInt> Cat(std::initializer_list<PetscInt> a, const std::vector<PetscInt> &b)
{
  std::vector<PetscInt> r(a);
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

/*
  Parameters of a convolution or transposed convolution over Pn x Pci x Pco x Pss workers (paper 000
  sec. 4.1.2, Fig. 4): the weights, Co x Ci/G x k... (transposed: Ci x Co/G x k...) for c->groups = G, on Pr = Pco x Pci
  (Pci x Pco), the channel pieces following x's; the bias (Co) on Pb = Pco; with bcastW, their
  broadcasts w^ = B w, b^ = B b onto all Pn x Pss replicas (otherwise w^ is w). rank(co, n, ci, s)
  is the rank of a worker. C has the members named below. The bias lives on the workers of ci piece
  c->cib (the first non-empty one), which add it.
  Groups (G > 1): the in-group dimension of the weights is not split. A (co, ci) block of the work
  partition whose pieces cut groups needs, of the rows of its output channels (transposed: of its
  input channels), the columns of the input (output) channels it holds of each row's group, which
  is no block of a tensor product partition; so the weights live on Pr = Pco x 1 (transposed
  Pci x 1), rows following y's (x's) channel pieces, and w^ = B w broadcasts them over the ci (co)
  workers too. Each worker's kernel uses the columns of its own channels and leaves zero gradients
  in the others, so dw = B^* dw^ still sums each entry's contributions.
*/
template <class C, class Rank>
PetscErrorCode ConvSetUpParameters(DDLayer l, C *c, DDTensor x, PetscInt D, const PetscInt k[3], PetscInt Pn, PetscInt Pci, PetscInt Pco, PetscInt Pss, bool transposed, Rank rank)
{
  MPI_Comm              comm = PetscObjectComm((PetscObject)l);
  std::vector<PetscInt> ones((size_t)D, 1);
  /* (i1, i2): the two channel indices in the weights' order; groups: i2 is not split (P2 = 1), its workers share the weights */
  const bool     grouped = c->groups > 1;
  const PetscInt P1 = transposed ? Pci : Pco, P2 = grouped ? 1 : (transposed ? Pco : Pci), Pshare = grouped ? (transposed ? Pco : Pci) : 1;
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
  std::vector<PetscInt> shape, cl((size_t)Pci), rl((size_t)P1);
  if (transposed) shape = {x->shape[1], c->co / c->groups};
  else shape = {c->co, x->shape[1] / c->groups};
  for (PetscInt j = 3 - D; j < 3; j++) shape.push_back(k[j]);
  for (PetscInt ci = 0; ci < Pci; ci++) cl[ci] = x->ranges[1][ci + 1] - x->ranges[1][ci];
  /* groups: the rows follow the pieces of y's output channels (transposed: x's input channels) */
  for (PetscInt i1 = 0; i1 < P1 && grouped; i1++) rl[i1] = transposed ? cl[i1] : l->output->ranges[1][i1 + 1] - l->output->ranges[1][i1];
  PetscCall(DDTensorCreate(comm, &c->w));
  PetscCall(DDTensorSetPartition(c->w, c->Pr));
  PetscCall(DDTensorSetShape(c->w, 2 + D, shape.data()));
  PetscCall(DDTensorSetDataType(c->w, x->dtype));
  PetscCall(DDTensorSetMemType(c->w, x->memtype));
  if (grouped) PetscCall(DDTensorSetOwnershipRanges(c->w, 0, rl.data()));
  else PetscCall(DDTensorSetOwnershipRanges(c->w, transposed ? 0 : 1, cl.data()));
  PetscCall(DDTensorSetUp(c->w));
  PetscCall(DDLayerAddParameter_Private(l, "weight", c->w));
  if (c->bcastW) {
    std::vector<PetscMPIInt> rw;
    for (PetscInt n = 0; n < Pn; n++)
      for (PetscInt sl = 0; sl < Pss; sl++)
        for (PetscInt sh = 0; sh < Pshare; sh++)
          for (PetscInt i1 = 0; i1 < P1; i1++)
            for (PetscInt i2 = 0; i2 < P2; i2++) {
              PetscInt co, ci;
              coci(i1, grouped ? sh : i2, co, ci);
              rw.push_back(rank(co, n, ci, sl));
            }
    PetscCall(MakePartition(comm, Cat({Pn * Pss * Pshare, P1, P2}, ones), rw, &c->Pww));
    PetscCall(DDTensorCreateBroadcast(c->w, c->Pww, &c->wh));
    PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, c->w, c->wh, &c->Bw));
    PetscCall(DDLayerAddReplica_Private(l, c->w, c->wh, c->Bw)); /* the network may keep w^ (DDNetSetWeightMode()) */
  } else {
    PetscCall(PetscObjectReference((PetscObject)c->w));
    c->wh = c->w;
  }
  if (!c->bias) PetscFunctionReturn(PETSC_SUCCESS);
  std::vector<PetscMPIInt> rb;
  for (PetscInt co = 0; co < Pco; co++) rb.push_back(rank(co, 0, c->cib, 0));
  PetscCall(MakePartition(comm, {Pco}, rb, &c->Pb));
  PetscCall(DDTensorCreate(comm, &c->b));
  PetscCall(DDTensorSetPartition(c->b, c->Pb));
  PetscCall(DDTensorSetShape(c->b, 1, &c->co));
  PetscCall(DDTensorSetDataType(c->b, x->dtype));
  PetscCall(DDTensorSetMemType(c->b, x->memtype));
  PetscCall(DDTensorSetUp(c->b));
  PetscCall(DDLayerAddParameter_Private(l, "bias", c->b));
  if (c->bcastW) {
    std::vector<PetscMPIInt> rbw;
    for (PetscInt n = 0; n < Pn; n++)
      for (PetscInt sl = 0; sl < Pss; sl++)
        for (PetscInt co = 0; co < Pco; co++) rbw.push_back(rank(co, n, c->cib, sl));
    PetscCall(MakePartition(comm, {Pn * Pss, Pco}, rbw, &c->Pwb));
    PetscCall(DDTensorCreateBroadcast(c->b, c->Pwb, &c->bh));
    PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, c->b, c->bh, &c->Bb));
    PetscCall(DDLayerAddReplica_Private(l, c->b, c->bh, c->Bb));
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
  The formats of x^ and y that the local kernels of a convolution (transposed or not) want, from the
  layer's backend chain (oneDNN's preferred ones for float32 on /cpu/dnnl, strided ones for loops over
  views); *which is the backend that decided, whose chain then makes the kernels. They come from a
  rank-independent geometry (ci, co channels per worker, 8 output entries per spatial dimension), so
  that every rank picks the same formats. groupsplit: groups over partitioned channels, whose local
  problems are marked by ConvGeom's cig, cog (the backends that cannot take them decline).
*/
inline PetscErrorCode ConvKernelFormats(DDLayer l, DDTensor x, PetscInt D, const PetscInt k[3], const PetscInt s[3], const PetscInt d[3], PetscInt ci, PetscInt co, PetscInt groups, bool groupsplit, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, DDBackend *which)
{
  DDBackend b;
  ConvGeom  q;

  PetscFunctionBegin;
  PetscCall(DDLayerGetBackend_Private(l, &b));
  *xf  = x->format;
  *xbs = x->bs;
  *yf  = DD_FORMAT_PLAIN;
  *ybs = 1;
  q.D  = D;
  q.N  = 2;
  q.Ci = PetscMax(1, ci);
  q.Co = PetscMax(1, co);
  q.groups = groups;
  if (groupsplit) { /* groups over partitioned channels: the local channels need not be whole groups (ConvGeom's cig, cog) */
    q.groups = 1;
    q.cig    = PetscMax(1, x->shape[1] / groups);
    q.cog    = PetscMax(1, co / groups); /* a marker: the formats do not depend on the exact value */
  }
  for (PetscInt j = 0; j < 3; j++) {
    PetscInt &narrow = transposed ? q.in[j] : q.out[j], &wide = transposed ? q.out[j] : q.in[j];
    q.k[j] = k[j];
    q.s[j] = s[j];
    q.d[j] = d[j];
    narrow = j < 3 - D ? 1 : 8;
    wide   = (narrow - 1) * s[j] + (k[j] - 1) * d[j] + 1;
  }
  PetscCall(DDBackendConvFormats(b, x->dtype, q, transposed, xf, xbs, yf, ybs, which));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The local kernel of a worker: the convolution of window x (storage origin xorg, N and C at
  dimensions xlead, xlead + 1) onto box y (yorg, ylead), from the chain of backend b; rank-local
  failures are raised on every rank of comm.
*/
inline PetscErrorCode ConvKernelCreate(MPI_Comm comm, DDBackend b, const ConvTGeom &g, bool transposed, bool bias, bool backward, DDTensor x, PetscInt xlead, const PetscInt xorg[], DDTensor y, PetscInt ylead, const PetscInt yorg[], bool create, std::unique_ptr<ConvKernel> *k)
{
  PetscErrorCode kerr = PETSC_SUCCESS;
  PetscMPIInt    r;

  PetscFunctionBegin;
  if (create) {
    ConvKernelSpec spec;
    spec.g          = g;
    spec.transposed = transposed;
    spec.bias       = bias;
    spec.backward   = backward;
    spec.x.t        = x;
    spec.x.lead     = xlead;
    spec.y.t        = y;
    spec.y.lead     = ylead;
    for (PetscInt j = 0; j < x->layout.order; j++) spec.x.org[j] = xorg[j];
    for (PetscInt j = 0; j < y->layout.order; j++) spec.y.org[j] = yorg[j];
    kerr = DDBackendConvCreate(b, spec, k); /* rank-local: checked on every rank below */
  }
  PetscCallMPI(MPI_Comm_rank(comm, &r));
  DDCheckAll(comm, kerr == PETSC_SUCCESS, PETSC_ERR_LIB, "The %s kernel of rank %d could not be set up on backend %s (error %d)", transposed ? "transposed convolution" : "convolution", r, b->name, (int)kerr);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The distribution shared by the convolution and the transposed convolution (paper 000 sec. 4.1.2,
  Fig. 4): x^ = B_x x over the Pco output-channel workers, the halo H_x, y = R_y y^ over the Pci
  input-channel workers, and the weights w^ = B_w w, b^ = B_b b broadcast to the batch and spatial
  workers. The layers derive from it and add their kernels.
*/
struct ConvDistribution {
  PetscBool   bias = PETSC_TRUE; /* hyper-parameters */
  PetscInt    co   = 0;          /* output channels */
  PetscInt    groups = 1;        /* channel groups (PyTorch's groups) */
  PetscInt    D = 0, lead = 0, So[3] = {1, 1, 1};
  bool        bcastX = false, reduceY = false, bcastW = false, xdirect = false;
  DDBackend   kb = NULL; /* the backend whose chain makes the local kernels */
  PetscInt    Pn = 1, Pci = 1, Pss = 1, Ps[3] = {1, 1, 1};
  DDPartition Pwx = NULL, Pwy = NULL, Py = NULL, Pr = NULL, Pww = NULL, Pb = NULL, Pwb = NULL;
  DDTensor    xh = NULL, dxh = NULL, yh = NULL, dyh = NULL, w = NULL, b = NULL, wh = NULL, bh = NULL, dwh = NULL, dbh = NULL, dwr = NULL, dbr = NULL;
  DDPrimitive Bx = NULL, Hx = NULL, Ry = NULL, Bw = NULL, Bb = NULL;
  /* copies in the set-up layouts for tensors whose halos differ (one per role: their layouts differ) */
  DDTensor         xcopy = NULL, ycopy = NULL, dycopy = NULL, dxcopy = NULL;
  bool             active = false, hasout = false, biasworker = false;
  PetscInt         xorg[DD_MAX_DIM] = {0}, yorg[DD_MAX_DIM] = {0};

  /* ---- set-up steps shared by the convolution and the transposed convolution ---- */
  PetscInt                 Pco = 1;      /* output-channel workers */
  PetscInt                 cib = 0;      /* the input-channel piece whose workers add the bias: the first non-empty one */
  std::vector<PetscMPIInt> wr;           /* rank of worker (co, n, ci, s) */
  DDTensorFormat           yformat = DD_FORMAT_PLAIN;
  PetscInt                 ybs     = 1;
  PetscMPIInt WorkerRank(PetscInt co, PetscInt n, PetscInt ci, PetscInt sl) const { return wr[((co * Pn + n) * Pci + ci) * Pss + sl]; }
  std::vector<PetscInt> SpatialShape() const { return std::vector<PetscInt>(Ps, Ps + D); }
  /* groups over partitioned channels: the workers' local channels need not be whole groups */
  bool GroupSplit() const { return groups > 1 && (Pci > 1 || Pco > 1); }

  /*
    The channels of this worker's local problem g (g.Ci input channels of x^ from global channel
    Lx.start[xc], g.Co of the box from Ly.start[yc]) with groups over partitioned channels: the
    layer's channels per group and the global offsets, for the kernels to connect each output
    channel to the input channels of its group they hold (ConvGeom's cig, cog, ci0, co0). Any piece
    boundaries work, those that cut groups included (paper 000 sec. 4.1.2's Pco x Pci blocks).
  */
  void SetLocalGroups(ConvGeom &g, PetscInt cin, const DDLayout &Lx, PetscInt xc, const DDLayout &Ly, PetscInt yc) const
  {
    g.groups = groups;
    g.cig = g.cog = g.ci0 = g.co0 = 0;
    if (!GroupSplit()) return;
    g.groups = 1;
    g.cig    = cin / groups;
    g.cog    = co / groups;
    g.ci0    = Lx.start[xc];
    g.co0    = Ly.start[yc];
  }

  /*
    The work partition Pco x Pn x Pci x Ps (paper 000 Fig. 4) from x's partition and the number of
    output-channel workers pco: which broadcasts and reductions are needed, and the workers' ranks
    (co = 0 are x's workers, the others the lowest ranks x does not use). what names the layer in errors.
  */
  PetscErrorCode SetUpWorkPartition(DDLayer l, DDTensor x, PetscInt pco, const char what[], bool transposedKey = false)
  {
    MPI_Comm    comm = PetscObjectComm((PetscObject)l);
    DDPartition Px   = x->part;
    PetscMPIInt size;
    PetscFunctionBegin;
    PetscCallMPI(MPI_Comm_size(comm, &size));
    Pco = pco;
    Pn  = Px->shape[0];
    Pci = Px->shape[1];
    Pss = 1;
    for (PetscInt j = 0; j < D; j++) {
      Ps[j] = Px->shape[2 + j];
      Pss *= Ps[j];
    }
    {
      const char *prefix;
      const char *key = transposedKey ? "convtranspose" : "conv";
      PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
      if (!prefix) prefix = "";
      PetscCheck(groups >= 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "The %s's groups %" PetscInt_FMT " must be positive (-%slayer_%s_groups)", what, groups, prefix, key);
      PetscCheck(x->shape[1] % groups == 0, comm, PETSC_ERR_ARG_INCOMP, "The %s's input channels %" PetscInt_FMT " are not divisible by its groups %" PetscInt_FMT " (-%slayer_%s_groups)", what, x->shape[1], groups, prefix, key);
      PetscCheck(co % groups == 0, comm, PETSC_ERR_ARG_INCOMP, "The %s's output channels %" PetscInt_FMT " are not divisible by its groups %" PetscInt_FMT " (-%slayer_%s_groups, -%slayer_%s_out_channels)", what, co, groups, prefix, key, prefix, key);
    }
    const PetscInt W = Pco * Pn * Pci * Pss;
    PetscCheck(W <= size, comm, PETSC_ERR_ARG_SIZ, "The %s's work partition needs %" PetscInt_FMT " ranks (Pco %" PetscInt_FMT " x Pn %" PetscInt_FMT " x Pci %" PetscInt_FMT " x spatial %" PetscInt_FMT ") but the communicator has %d", what, W, Pco, Pn, Pci, Pss, size);
    bcastX  = Pco > 1;
    reduceY = Pci > 1;
    for (cib = 0; cib < Pci - 1 && x->ranges[1][cib + 1] == x->ranges[1][cib]; cib++) { }
    bcastW  = Pn * Pss * (groups > 1 ? (transposedKey ? Pco : Pci) : 1) > 1; /* groups: the weights are shared by the ci (transposed: co) workers too */
    PetscCall(ReplicaRanks(comm, Px, Pco, what, wr));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /*
    x^, the input of the local kernels: x broadcast over the Pco workers (B_x), x itself, or x in the
    format the backend's kernels want (from ConvKernelFormats, which also gives the output's format).
  */
  PetscErrorCode SetUpKernelInput(DDLayer l, DDTensor x, const PetscInt k[3], const PetscInt s[3], const PetscInt d[3], bool transposed)
  {
    MPI_Comm       comm = PetscObjectComm((PetscObject)l);
    DDTensorFormat xf;
    PetscInt       xbs;
    PetscFunctionBegin;
    PetscCall(ConvKernelFormats(l, x, D, k, s, d, x->shape[1] / Pci, co / Pco, groups, GroupSplit(), transposed, &xf, &xbs, &yformat, &ybs, &kb));
    { /* the storage the kernels want must be every rank's (an option such as -dd_dnnl_plain_pointwise or -dd_backend given to some ranks only) */
      const std::string v = std::string(kb ? kb->name : "none") + " x " + DDTensorFormats[xf] + "/" + std::to_string(xbs) + " y " + DDTensorFormats[yformat] + "/" + std::to_string(ybs);
      PetscCall(DDCheckSameString(comm, "The convolution's kernel backend and storage formats (-dd_backend, -dd_dnnl_plain_pointwise)", v.c_str()));
    }
    xdirect = false;
    if (bcastX) {
      PetscCall(MakePartition(comm, Cat({Pco, Pn, Pci}, SpatialShape()), wr, &Pwx));
      PetscCall(DDTensorCreateBroadcast(x, Pwx, &xh));
      PetscCall(DDTensorSetBlockSize(xh, xbs));
      PetscCall(DDTensorSetFormat(xh, xf));
      lead = 1;
    } else if (x->format == xf && (xf != DD_FORMAT_BLOCKED || x->bs == xbs)) {
      PetscCall(PetscObjectReference((PetscObject)x));
      xh      = x;
      xdirect = true;
      lead    = 0;
    } else {
      PetscCall(DDTensorDuplicate(x, &xh));
      PetscCall(DDTensorSetBlockSize(xh, xbs));
      PetscCall(DDTensorSetFormat(xh, xf));
      lead = 0;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* B_x, once the halo exchange has grown x^ */
  PetscErrorCode SetUpInputBroadcast(DDLayer l, DDTensor x)
  {
    PetscFunctionBegin;
    if (bcastX) PetscCall(MakePrimitive(PetscObjectComm((PetscObject)l), DDPRIMITIVEBROADCAST, x, xh, &Bx));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* The output y (N, co, So...) on Py = Pn x Pco x Ps (x's partition when spatial-only), x's batch ownership, balanced spatially */
  PetscErrorCode SetUpOutput(DDLayer l, DDTensor x)
  {
    MPI_Comm              comm = PetscObjectComm((PetscObject)l);
    DDTensor              y;
    std::vector<PetscInt> shape = Cat({x->shape[0], co}, std::vector<PetscInt>(So + 3 - D, So + 3));
    PetscFunctionBegin;
    if (!bcastX && !reduceY) {
      PetscCall(PetscObjectReference((PetscObject)x->part));
      Py = x->part;
    } else {
      std::vector<PetscMPIInt> r;
      for (PetscInt n = 0; n < Pn; n++)
        for (PetscInt c = 0; c < Pco; c++)
          for (PetscInt sl = 0; sl < Pss; sl++) r.push_back(WorkerRank(c, n, 0, sl));
      PetscCall(MakePartition(comm, Cat({Pn, Pco}, SpatialShape()), r, &Py));
    }
    std::vector<PetscInt> nl(Pn);
    for (PetscInt n = 0; n < Pn; n++) nl[n] = x->ranges[0][n + 1] - x->ranges[0][n];
    PetscCall(DDTensorCreate(comm, &y));
    PetscCall(DDTensorSetPartition(y, Py));
    PetscCall(DDTensorSetShape(y, 2 + D, shape.data()));
    PetscCall(DDTensorSetDataType(y, x->dtype));
    PetscCall(DDTensorSetOwnershipRanges(y, 0, nl.data()));
    PetscCall(DDTensorSetBlockSize(y, ybs));
    PetscCall(DDTensorSetFormat(y, yformat));
    PetscCall(DDTensorSetMemType(y, x->memtype));
    PetscCall(DDTensorSetUp(y));
    PetscCall(DDLayerSetOutput_Private(l, y));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* R_y (when Pci > 1), then the weights w^ = B_w w and the bias b^ = B_b b */
  PetscErrorCode SetUpReductionAndParameters(DDLayer l, DDTensor x, const PetscInt k[3], bool transposed);

  /*
    The local frame on the window [wa, wb) of x^ (the halo's window) and the box yt: whether this rank
    works and adds the bias (ci = cib), and the storage origins of the window and the box.
  */
  void SetUpLocalFrame(DDTensor x, DDTensor yt, const PetscInt wa[])
  {
    const DDLayout &Lx = xh->layout, &Ly = yt->layout;
    active     = xh->active ? true : false;
    biasworker = active && (bcastX ? xh->part->coords[2] : x->part->coords[1]) == cib;
    for (PetscInt j = 0; j < Lx.order; j++) xorg[j] = Lx.lo[j];
    for (PetscInt j = 0; j < D; j++) xorg[lead + 2 + j] = wa[lead + 2 + j] - Lx.start[lead + 2 + j] + Lx.lo[lead + 2 + j];
    for (PetscInt j = 0; j < Ly.order; j++) yorg[j] = Ly.lo[j];
  }

  /* Destroys what set-up built (w and b belong to the layer's parameter list) */
  PetscErrorCode ResetDistribution()
  {
    PetscFunctionBegin;
    for (DDPartition *p : {&Pwx, &Pwy, &Py, &Pr, &Pww, &Pb, &Pwb}) PetscCall(DDPartitionDestroy(p));
    for (DDTensor *t : {&xh, &dxh, &yh, &dyh, &xcopy, &ycopy, &dycopy, &dxcopy, &wh, &bh, &dwh, &dbh, &dwr, &dbr}) PetscCall(DDTensorDestroy(t));
    w = b = NULL;
    for (DDPrimitive *p : {&Bx, &Hx, &Ry, &Bw, &Bb}) PetscCall(DDPrimitiveDestroy(p));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* Forward's inputs of the local kernel: x^ (the broadcast x, x itself, or x in the kernel's format), w^, b^ */
  PetscErrorCode ForwardInputs(DDLayer l, DDTensor x, DDTensor *xhat)
  {
    PetscFunctionBegin;
    if (bcastX) {
      DDTensor xin;
      PetscCall(ConformLayout(x, l->setupin[0], &xcopy, &xin, true));
      PetscCall(DDPrimitiveApply(Bx, xin, xh));
      *xhat = xh;
    } else if (xdirect) {
      PetscCall(ConformLayout(x, xh, &xcopy, xhat, true)); /* x itself unless its halo changed */
    } else {
      PetscCall(DDTensorCopy(x, xh));
      *xhat = xh;
    }
    if (bcastW) { /* w^ = B_w w, b^ = B_b b, unless the network keeps the replicas (refreshed when w changed) */
      PetscBool kept;
      PetscCall(DDLayerReplicaForward_Private(l, wh, &kept));
      if (!kept) PetscCall(DDPrimitiveApply(Bw, w, wh));
      if (bias) {
        PetscCall(DDLayerReplicaForward_Private(l, bh, &kept));
        if (!kept) PetscCall(DDPrimitiveApply(Bb, b, bh));
      }
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* x^ as the last Forward left it, for Backward (x: the saved input) */
  DDTensor SavedInput(DDTensor x) const
  {
    if (bcastX || !xdirect) return xh;
    return x->layouthash == xh->layouthash ? x : xcopy;
  }
  /*
    The parameter gradients from dw^, db^: B_w^* and B_b^* sum them over the workers that share the
    weights; replicas the network keeps add dw^, db^ to its bucket, summed once per backward
  */
  PetscErrorCode AccumulateWeightGradients(DDLayer l)
  {
    PetscFunctionBegin;
    if (bcastW) {
      PetscBool kept;
      PetscCall(DDLayerReplicaBackward_Private(l, wh, NULL, dwh, &kept));
      if (!kept) {
        if (!dwr) PetscCall(DDTensorDuplicate(w, &dwr));
        PetscCall(DDPrimitiveApplyAdjoint(Bw, dwh, dwr));
        PetscCall(DDTensorAXPY(l->grads[0], 1.0, dwr));
      }
      if (bias) {
        PetscCall(DDLayerReplicaBackward_Private(l, bh, NULL, dbh, &kept));
        if (!kept) {
          if (!dbr) PetscCall(DDTensorDuplicate(b, &dbr));
          PetscCall(DDPrimitiveApplyAdjoint(Bb, dbh, dbr));
          PetscCall(DDTensorAXPY(l->grads[1], 1.0, dbr));
        }
      }
    } else {
      PetscCall(DDTensorAXPY(l->grads[0], 1.0, dwh));
      if (bias) PetscCall(DDTensorAXPY(l->grads[1], 1.0, dbh));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
inline PetscErrorCode ConvDistribution::SetUpReductionAndParameters(DDLayer l, DDTensor x, const PetscInt k[3], bool transposed)
{
  auto rank = [this](PetscInt c, PetscInt n, PetscInt ci, PetscInt sl) { return WorkerRank(c, n, ci, sl); };
  PetscFunctionBegin;
  if (reduceY) PetscCall(ConvSetUpOutputReduce(l, this, Pn, Pci, Pco, Pss, SpatialShape(), rank));
  PetscCall(ConvSetUpParameters(l, this, x, D, k, Pn, Pci, Pco, Pss, transposed, rank));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
