/*
  DDLAYERGROUPNORM: distributed group normalization, paper 000 sec. 4.2.2 (torch.nn.GroupNorm).

  x (N, C, spatial...) on Px = Pn x Pc x Ps. The C channels form G groups of C/G consecutive
  channels; for each sample n and group g the statistics run over the group's channels and all
  spatial positions (m = C/G |S| entries):
    mean = (1/m) sum x,  var = (1/m) sum (x - mean)^2,  y = w_c (x - mean) / sqrt(var + eps) + b_c
  The batch is never summed over, so a batch split needs no communication; the spatial split
  all-sum-reduces (DDPRIMITIVEALLSUMREDUCE) per (sample, group) sums; a channel split is
  allowed when every group lies on one worker (then it needs no communication either).
  Forward:  local moments per (n, c) -> per (n, g) (Chan); S = A(sums); M2 = A(M2_i + m_i (mean_i - S/m)^2)
  Backward: s1 = sum dy, s2 = sum dy (x - mean) per (n, c);
            dw += B^* sum_n s2 rstd, db += B^* sum_n s1;
            (G1, G2) = A(sum_{c in g} w_c s1, sum_{c in g} w_c s2 rstd);
            dx = rstd (w dy - G1/m - xhat G2/m)
  The per-channel weight and bias live and move as in DDLAYERBATCHNORM (normcommon.hpp).
*/
#include <sys/ddcxx.hpp>
#include <layer/impls/batchnorm/normcommon.hpp>
#include <cmath>

using namespace ddnn;

namespace
{
struct GroupNorm {
  PetscInt  groups = 0;
  PetscReal eps    = 1e-5;
  /* set-up */
  ChannelParams cp;
  DDTensor      w = NULL, b = NULL; /* owned by the layer's parameter list */
  DDTensor      wh = NULL, bh = NULL, dwh = NULL, dbh = NULL, tmp = NULL;
  DDTensor      st1 = NULL, st2 = NULL;
  DDPrimitive   A1 = NULL, A2 = NULL;
  DDTensor      xc = NULL, yc = NULL, dyc = NULL, dxc = NULL;
  PetscInt      Nl = 0, Cl = 0, Gl = 0, cpg = 1;
  double        m = 0; /* entries per (sample, group), global */
  /* the forward state */
  bool                xconformed = false;
  std::vector<double> cnt, mean, m2, gmu, grstd, mu, wv, bv, s1, s2, ka, kb, kc;
};
} // namespace

static PetscErrorCode GroupNormGet(DDLayer l, GroupNorm **s, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERGROUPNORM, fn));
  *s = (GroupNorm *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerGroupNormSetGroups - Number of channel groups (torch.nn.GroupNorm's num_groups; required)

  Logically collective

  Input Parameters:
+ l      - a `DDLAYERGROUPNORM` layer
- groups - positive, dividing the number of channels

  Options Database Key:
. -layer_groupnorm_groups <G> - the number

  Notes:
  When the input's partition splits the channels, each worker's channels must be whole groups.

  Level: beginner

.seealso: `DDLAYERGROUPNORM`, `DDLayerGroupNormSetEpsilon()`
@*/
PetscErrorCode DDLayerGroupNormSetGroups(DDLayer l, PetscInt groups)
DD_CXX_TRY
{
  GroupNorm *s;

  PetscFunctionBegin;
  PetscCall(GroupNormGet(l, &s, "DDLayerGroupNormSetGroups"));
  PetscCheck(groups >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Group normalization needs a positive number of groups, not %" PetscInt_FMT " (-layer_groupnorm_groups)", groups);
  s->groups = groups;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerGroupNormSetEpsilon - The eps added to the variance (default 1e-5)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERGROUPNORM` layer
- eps - positive and finite (NaN and inf are errors, `PETSC_ERR_ARG_OUTOFRANGE`)

  Options Database Key:
. -layer_groupnorm_eps <eps> - the value

  Level: intermediate

.seealso: `DDLAYERGROUPNORM`
@*/
PetscErrorCode DDLayerGroupNormSetEpsilon(DDLayer l, PetscReal eps)
DD_CXX_TRY
{
  GroupNorm *s;

  PetscFunctionBegin;
  PetscCall(GroupNormGet(l, &s, "DDLayerGroupNormSetEpsilon"));
  PetscCheck(eps > 0 && !PetscIsInfOrNanReal(eps), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerGroupNormSetEpsilon(): Group normalization eps %g must be positive and finite (-layer_groupnorm_eps)", (double)eps);
  s->eps = eps;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode GroupNorm_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  GroupNorm *s = (GroupNorm *)l->data;
  PetscReal  v;
  PetscInt   g;
  PetscBool  set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer groupnorm options");
  PetscCall(PetscOptionsInt("-layer_groupnorm_groups", "Number of channel groups", "DDLayerGroupNormSetGroups", s->groups, &g, &set));
  if (set) PetscCall(DDLayerGroupNormSetGroups(l, g));
  PetscCall(PetscOptionsReal("-layer_groupnorm_eps", "Added to the variance", "DDLayerGroupNormSetEpsilon", s->eps, &v, &set));
  if (set) PetscCall(DDLayerGroupNormSetEpsilon(l, v));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_Reset(DDLayer l)
{
  GroupNorm *s = (GroupNorm *)l->data;

  PetscFunctionBegin;
  PetscCall(s->cp.Reset());
  s->w = s->b = NULL;
  for (DDTensor *t : {&s->wh, &s->bh, &s->dwh, &s->dbh, &s->tmp, &s->st1, &s->st2, &s->xc, &s->yc, &s->dyc, &s->dxc}) PetscCall(DDTensorDestroy(t));
  PetscCall(DDPrimitiveDestroy(&s->A1));
  PetscCall(DDPrimitiveDestroy(&s->A2));
  s->Nl = s->Cl = s->Gl = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(GroupNorm_Reset(l));
  delete (GroupNorm *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  GroupNorm  *s    = (GroupNorm *)l->data;
  DDTensor    x    = xs[0], y;
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  PetscCall(NormCheckInput(l, x, "Group normalization"));
  const PetscInt C = x->shape[1], G = s->groups;
  PetscCheck(G > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs its number of groups (DDLayerGroupNormSetGroups() or -%slayer_groupnorm_groups)", prefix ? prefix : "", prefix ? prefix : "");
  PetscCheck(C % G == 0, comm, PETSC_ERR_ARG_INCOMP, "The number of groups %" PetscInt_FMT " does not divide the %" PetscInt_FMT " channels of the input (-%slayer_groupnorm_groups)", G, C, prefix ? prefix : "");
  s->cpg = C / G;
  for (PetscInt q = 1; q < x->part->shape[1]; q++) {
    const PetscInt r = x->ranges[1][q];
    PetscCheck(r % s->cpg == 0, comm, PETSC_ERR_ARG_INCOMP, "Group %" PetscInt_FMT " (channels %" PetscInt_FMT " to %" PetscInt_FMT ") straddles channel workers %" PetscInt_FMT " and %" PetscInt_FMT " (dimension 1 of the partition splits at channel %" PetscInt_FMT "); split the channels at multiples of %" PetscInt_FMT, r / s->cpg, (r / s->cpg) * s->cpg, (r / s->cpg + 1) * s->cpg - 1, q - 1, q, r, s->cpg);
  }
  s->m = (double)s->cpg;
  for (PetscInt k = 2; k < x->order; k++) s->m *= (double)x->shape[k];
  s->Nl = x->active ? x->layout.n[0] : 0;
  s->Cl = x->active ? x->layout.n[1] : 0;
  s->Gl = s->Cl / s->cpg;
  PetscCall(CreateLike(x, &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscCall(s->cp.SetUp(comm, x));
  PetscCall(s->cp.CreateParam(x, &s->w));
  PetscCall(DDLayerAddParameter_Private(l, "weight", s->w));
  PetscCall(s->cp.CreateParam(x, &s->b));
  PetscCall(DDLayerAddParameter_Private(l, "bias", s->b));
  PetscCall(s->cp.CreateParam(x, &s->tmp));
  PetscCall(s->cp.CreateWorkerCopy(s->w, &s->wh));
  PetscCall(s->cp.CreateWorkerCopy(s->b, &s->bh));
  PetscCall(DDTensorDuplicate(s->wh, &s->dwh));
  PetscCall(DDTensorDuplicate(s->bh, &s->dbh));
  PetscCall(CreateStatistics(x, true, 1, s->cpg, &s->st1, &s->A1));
  PetscCall(CreateStatistics(x, true, 2, s->cpg, &s->st2, &s->A2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_InitParams(DDLayer l, PetscInt64 seed)
{
  GroupNorm *s = (GroupNorm *)l->data;

  PetscFunctionBegin;
  if (l->inittype == DD_INIT_UNIFORM) {
    PetscCall(DDTensorInitialize_Private(s->w, DD_INIT_UNIFORM, l->initscale, 2 * seed + 1, 1, 1, 1.0));
    PetscCall(DDTensorInitialize_Private(s->b, DD_INIT_UNIFORM, l->initscale, 2 * seed + 2, 1, 1, 1.0));
  } else {
    PetscCall(DDTensorSet(s->w, l->inittype == DD_INIT_ZEROS ? 0.0 : 1.0));
    PetscCall(DDTensorSet(s->b, 0.0));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  GroupNorm     *s = (GroupNorm *)l->data;
  DDTensor       x, yo;
  const PetscInt Nl = s->Nl, Cl = s->Cl, Gl = s->Gl, cpg = s->cpg, NC = Nl * Cl, NG = Nl * Gl;
  const bool     act = xs[0]->active ? true : false;

  PetscFunctionBegin;
  PetscCall(NormConform(xs[0], l->output, &s->xc, &x, true));
  s->xconformed = x != xs[0];
  PetscCall(NormConform(y, l->output, &s->yc, &yo, false));
  PetscCall(s->cp.ToWorkers(s->w, s->wh));
  PetscCall(s->cp.ToWorkers(s->b, s->bh));
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    s->cnt.resize(NC);
    s->mean.resize(NC);
    s->m2.resize(NC);
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normmoments, x->layout, HostArray<const T>(x), true, s->cnt.data(), s->mean.data(), s->m2.data()));
    /* per (sample, group): merge the group's channels */
    std::vector<double> gc(NG, 0.0), gm(NG, 0.0), gq(NG, 0.0);
    for (PetscInt n = 0; n < Nl; n++)
      for (PetscInt g = 0; g < Gl; g++) {
        double &c0 = gc[n * Gl + g], &m0 = gm[n * Gl + g], &q0 = gq[n * Gl + g];
        for (PetscInt j = 0; j < cpg; j++) {
          const PetscInt i = n * Cl + g * cpg + j;
          if (s->cnt[i] <= 0) continue;
          const double nt = c0 + s->cnt[i], dl = s->mean[i] - m0, f = s->cnt[i] / nt;
          m0 += dl * f;
          q0 += s->m2[i] + dl * dl * c0 * f;
          c0 = nt;
        }
      }
    double *st = HostArray<double>(s->st1);
    if (act)
      for (PetscInt i = 0; i < NG; i++) st[i] = gc[i] * gm[i];
    PetscCall(AllSum(s->A1, s->st1));
    s->gmu.assign(NG, 0.0);
    s->grstd.assign(NG, 1.0);
    if (act)
      for (PetscInt i = 0; i < NG; i++) {
        s->gmu[i]      = st[i] / s->m;
        const double e = gm[i] - s->gmu[i];
        st[i]          = gq[i] + gc[i] * e * e;
      }
    PetscCall(AllSum(s->A1, s->st1));
    if (act)
      for (PetscInt i = 0; i < NG; i++) s->grstd[i] = 1.0 / std::sqrt(st[i] / s->m + (double)s->eps);
    PetscCall(ParamValues<T>(s->wh, Cl, 1.0, s->wv));
    PetscCall(ParamValues<T>(s->bh, Cl, 0.0, s->bv));
    s->mu.resize(NC);
    std::vector<double> a(NC), b(NC);
    for (PetscInt n = 0; n < Nl; n++)
      for (PetscInt c = 0; c < Cl; c++) {
        const PetscInt i = n * Cl + c, gi = n * Gl + c / cpg;
        s->mu[i]         = s->gmu[gi];
        a[i]             = s->wv[c] * s->grstd[gi];
        b[i]             = s->bv[c];
      }
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normscaleshift, x->layout, HostArray<const T>(x), yo->layout, HostArray<T>(yo), true, s->mu.data(), a.data(), b.data()));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  GroupNorm     *s  = (GroupNorm *)l->data;
  DDTensor       dx = dxs ? dxs[0] : NULL, x = s->xconformed ? s->xc : l->saved[0], g, dxo = NULL;
  const PetscInt Nl = s->Nl, Cl = s->Cl, Gl = s->Gl, cpg = s->cpg, NC = Nl * Cl;
  const bool     act = x->active ? true : false;

  PetscFunctionBegin;
  PetscCall(NormConform(dy, l->output, &s->dyc, &g, true));
  if (dx) PetscCall(NormConform(dx, l->output, &s->dxc, &dxo, false));
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    s->s1.assign(NC, 0.0);
    s->s2.assign(NC, 0.0);
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normbwdsums, x->layout, HostArray<const T>(x), g->layout, HostArray<const T>(g), true, s->mu.data(), s->s1.data(), s->s2.data()));
    /* parameter gradients: local partial sums over this worker's samples and positions */
    if (s->dwh->active) {
      HostValues<T> dw, db;
      PetscCall(dw.Get(s->dwh));
      PetscCall(db.Get(s->dbh));
      for (PetscInt c = 0; c < Cl; c++) {
        double aw = 0, ab = 0;
        for (PetscInt n = 0; n < Nl; n++) {
          aw += s->s2[n * Cl + c] * s->grstd[n * Gl + c / cpg];
          ab += s->s1[n * Cl + c];
        }
        dw()[c] = (T)aw;
        db()[c] = (T)ab;
      }
      PetscCall(dw.Restore(true));
      PetscCall(db.Restore(true));
    }
    PetscCall(s->cp.FromWorkers(s->dwh, s->tmp, l->grads[0]));
    PetscCall(s->cp.FromWorkers(s->dbh, s->tmp, l->grads[1]));
    if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
    double *st = HostArray<double>(s->st2);
    if (act)
      for (PetscInt n = 0; n < Nl; n++)
        for (PetscInt gg = 0; gg < Gl; gg++) {
          double g1 = 0, g2 = 0;
          for (PetscInt j = 0; j < cpg; j++) {
            const PetscInt c = gg * cpg + j;
            g1 += s->wv[c] * s->s1[n * Cl + c];
            g2 += s->wv[c] * s->s2[n * Cl + c];
          }
          st[n * 2 * Gl + gg]      = g1;
          st[n * 2 * Gl + Gl + gg] = g2 * s->grstd[n * Gl + gg];
        }
    PetscCall(AllSum(s->A2, s->st2));
    s->ka.resize(NC);
    s->kb.resize(NC);
    s->kc.resize(NC);
    if (act)
      for (PetscInt n = 0; n < Nl; n++)
        for (PetscInt c = 0; c < Cl; c++) {
          const PetscInt gg = c / cpg, i = n * Cl + c;
          const double   r = s->grstd[n * Gl + gg], G1 = st[n * 2 * Gl + gg], G2 = st[n * 2 * Gl + Gl + gg];
          s->ka[i]         = s->wv[c] * r;
          s->kb[i]         = -r * r * G2 / s->m;
          s->kc[i]         = -r * G1 / s->m;
        }
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normbwdapply, x->layout, HostArray<const T>(x), g->layout, HostArray<const T>(g), dxo->layout, HostArray<T>(dxo), true, s->mu.data(), s->ka.data(), s->kb.data(), s->kc.data()));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (dx && dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode GroupNorm_View(DDLayer l, PetscViewer viewer)
{
  GroupNorm *s = (GroupNorm *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "groups %" PetscInt_FMT ", eps %g\n", s->groups, (double)s->eps));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERGROUPNORM - "groupnorm": distributed group normalization (paper 000 sec. 4.2.2), torch.nn.GroupNorm

  Input N x C or N x C x spatial; output of the same shape, distribution and storage format.
  The channels form G groups (-layer_groupnorm_groups, required, dividing C); every sample's
  groups are normalized with their mean and biased variance over the group's channels and the
  spatial dimensions, then scaled and shifted per channel by the learnable weight (ones) and
  bias (zeros): PyTorch's affine=True, the only mode here. Training and evaluation modes
  behave the same (no running statistics).

  Distribution: the spatial split all-sum-reduces per-(sample, group) sums
  (`DDPRIMITIVEALLSUMREDUCE`); batch and channel splits need no communication. A channel split
  must keep every group on one worker (an error names the group that straddles two). weight and
  bias live on the channel split, on the workers with coordinate 0 in the other dimensions, and
  are broadcast to every worker by Forward (their gradients sum-reduced by its adjoint).

  Options Database Keys:
+ -layer_groupnorm_groups <G> - number of groups
- -layer_groupnorm_eps <eps> - added to the variance (default 1e-5)

  Level: beginner

.seealso: `DDLayerGroupNormSetGroups()`, `DDLayerGroupNormSetEpsilon()`, `DDLAYERBATCHNORM`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_GroupNorm(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new GroupNorm;
  l->ops->setfromoptions = GroupNorm_SetFromOptions;
  l->ops->setup          = GroupNorm_SetUp;
  l->ops->forward        = GroupNorm_Forward;
  l->ops->backward       = GroupNorm_Backward;
  l->ops->initparams     = GroupNorm_InitParams;
  l->ops->view           = GroupNorm_View;
  l->ops->reset          = GroupNorm_Reset;
  l->ops->destroy        = GroupNorm_Destroy;
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda normalization kernels; per-channel values through host copies */
  PetscFunctionReturn(PETSC_SUCCESS);
}

