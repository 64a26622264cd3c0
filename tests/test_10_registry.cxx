/*
  Type registries (PETSc's XXXRegisterAll()/XXXRegister() lists): the built-in lists are
  registered once (calling ...RegisterAll() again replaces nothing), a user's layer type and
  optimizer type work by name (in code and from the options database), an unknown name is an
  error that names it and lists the known types, and the optimizer types (sgd, adam, adamw, each
  an implementation over the backend's update kernels) follow PyTorch's rules, checked against
  loops written here from the formulas, in float32 and float64, on any rank count.
*/
#include "layertest.hpp"
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddoptimizerimpl.h>
#include <tensor/layout.hpp>
#include <cmath>

using namespace ddtest;

PETSC_EXTERN PetscErrorCode DDOptimizerCreate_SGD(DDOptimizer);

/* ---- a user layer type: y = 3 x (dx = 3 dy) ---- */
static int scale3_created = 0;

static PetscErrorCode Scale3_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(DDTensorDuplicate(xs[0], &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode Scale3_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  PetscFunctionBegin;
  PetscCall(DDTensorCopy(xs[0], y));
  PetscCall(DDTensorScale(y, 3.0));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode Scale3_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  PetscFunctionBegin;
  if (dxs[0]) {
    PetscCall(DDTensorCopy(dy, dxs[0]));
    PetscCall(DDTensorScale(dxs[0], 3.0));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode DDLayerCreate_TestScale3(DDLayer l)
{
  PetscFunctionBegin;
  scale3_created++;
  l->ops->setup    = Scale3_SetUp;
  l->ops->forward  = Scale3_Forward;
  l->ops->backward = Scale3_Backward;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ---- a user optimizer type: sign descent p -= lr sign(g), no state ---- */
static PetscErrorCode SignSGD_SetUp(DDOptimizer opt)
{
  PetscFunctionBegin;
  opt->nstate = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode SignSGD_Step(DDOptimizer opt, PetscReal lr)
{
  PetscFunctionBegin;
  for (size_t i = 0; i < opt->params->size(); i++) {
    DDTensor p = (*opt->params)[i], g = (*opt->grads)[i];
    PetscCall(ddnn::DispatchType(p->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      T *pa = (T *)p->array, *ga = (T *)g->array;
      ddnn::ForEachBulkRun(p->layout, [&](PetscInt off, PetscInt len) {
        for (PetscInt j = off; j < off + len; j++) pa[j] -= (T)(lr * ((ga[j] > 0) - (ga[j] < 0)));
      });
      return PETSC_SUCCESS;
    }));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode DDOptimizerCreate_TestSignSGD(DDOptimizer opt)
{
  PetscFunctionBegin;
  opt->ops->setup = SignSGD_SetUp;
  opt->ops->step  = SignSGD_Step;
  PetscFunctionReturn(PETSC_SUCCESS);
}
/* a broken type: no step op */
static PetscErrorCode DDOptimizerCreate_TestBroken(DDOptimizer opt)
{
  PetscFunctionBegin;
  opt->ops->setup = SignSGD_SetUp;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static InputSpec Vector(PetscInt n)
{
  InputSpec s;
  s.shape  = {n};
  s.pshape = {Size()};
  return s;
}

TEST(Registry, RegisterAllIsIdempotentAndKeepsUserTypes)
{
  /* a user constructor under a built-in name is not replaced by a second RegisterAll() */
  DDT(DDOptimizerRegister(DDOPTIMIZERSGD, DDOptimizerCreate_TestSignSGD));
  DDT(DDOptimizerRegisterAll());
  DDT(DDLayerRegisterAll());
  DDT(DDPrimitiveRegisterAll());
  DDT(DDInitializePackage());
  DDOptimizer opt;
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt)); /* sgd by default: now the user's sign descent */
  DDTensor p = MakeInput(Vector(5), DD_FLOAT64, 1), g;
  DDT(DDTensorDuplicate(p, &g));
  DDT(DDTensorSet(g, -2.0));
  DDT(DDOptimizerSetLearningRate(opt, 0.5));
  DDT(DDOptimizerSetUp(opt, 1, &p, &g));
  PetscInt ns;
  DDT(DDOptimizerGetState(opt, &ns, NULL, NULL));
  EXPECT_EQ(ns, 0) << "the user's sgd has no momentum buffer";
  std::vector<double> before = GatherAll(p);
  DDT(DDOptimizerStep(opt));
  std::vector<double> after = GatherAll(p);
  for (size_t i = 0; i < after.size(); i++) EXPECT_DOUBLE_EQ(after[i], before[i] + 0.5);
  DDT(DDOptimizerDestroy(&opt));
  /* put the built-in back */
  DDT(DDOptimizerRegister(DDOPTIMIZERSGD, DDOptimizerCreate_SGD));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetUp(opt, 1, &p, &g));
  DDT(DDOptimizerGetState(opt, &ns, NULL, NULL));
  EXPECT_EQ(ns, 1) << "the built-in sgd has its momentum buffer again";
  DDT(DDOptimizerDestroy(&opt));
  /* every built-in layer type is listed exactly once */
  const char **names;
  int          n;
  DDT(PetscFunctionListGet(DDLayerList, &names, &n));
  for (const char *t : {DDLAYERCONV, DDLAYERCONVTRANSPOSE, DDLAYERPOOL, DDLAYERAFFINE, DDLAYERBATCHNORM, DDLAYERGROUPNORM, DDLAYERACTIVATION, DDLAYERDROPOUT, DDLAYERUPSAMPLE, DDLAYERLOSS, DDLAYERREPARTITION, DDLAYERADD, DDLAYERCONCAT, DDLAYERFLATTEN}) {
    int count = 0;
    for (int i = 0; i < n && names[i]; i++) count += std::string(names[i]) == t;
    EXPECT_EQ(count, 1) << "layer type " << t;
  }
  DDT(PetscFree(names));
  DDT(DDTensorDestroy(&p));
  DDT(DDTensorDestroy(&g));
}

TEST(Registry, UserLayerTypeByNameAndFromOptions)
{
  DDT(DDLayerRegister("test_scale3", DDLayerCreate_TestScale3));
  const int before = scale3_created;
  for (int fromoptions = 0; fromoptions < 2; fromoptions++) {
    auto R = RunLayer(
      [&](DDLayer l) {
        if (fromoptions) {
          DDT(DDLayerSetOptionsPrefix(l, "t10u_"));
          DDT(PetscOptionsSetValue(NULL, "-t10u_layer_type", "test_scale3"));
          DDT(DDLayerSetFromOptions(l));
          DDT(PetscOptionsClearValue(NULL, "-t10u_layer_type"));
        } else DDT(DDLayerSetType(l, "test_scale3"));
        DDLayerType type;
        DDT(DDLayerGetType(l, &type));
        EXPECT_STREQ(type, "test_scale3");
      },
      {Vector(11)}, DD_FLOAT64, 3);
    InputSpec s = Vector(11);
    DDTensor  x = MakeInput(s, DD_FLOAT64, 3 + 1), dy;
    std::vector<double> xv = GatherAll(x);
    ASSERT_EQ(R.y.size(), xv.size());
    for (size_t i = 0; i < xv.size(); i++) EXPECT_DOUBLE_EQ(R.y[i], 3 * xv[i]);
    DDT(DDTensorDuplicate(x, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 3 + 7, -1, 1));
    std::vector<double> dyv = GatherAll(dy);
    for (size_t i = 0; i < dyv.size(); i++) EXPECT_DOUBLE_EQ(R.dx[0][i], 3 * dyv[i]);
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&dy));
  }
  EXPECT_EQ(scale3_created - before, 2);
}

TEST(Registry, UnknownTypeNamesItAndListsTheKnownOnes)
{
  DDOptimizer opt;
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  std::string msg;
  EXPECT_EQ((int)Catch([&]() { return DDOptimizerSetType(opt, "adamx"); }, &msg), (int)PETSC_ERR_ARG_UNKNOWN_TYPE);
  EXPECT_NE(msg.find("\"adamx\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("(known types: sgd, adam, adamw)"), std::string::npos) << msg;
  DDOptimizerType type;
  DDT(DDOptimizerGetType(opt, &type));
  EXPECT_STREQ(type, "sgd") << "a failed SetType leaves the type";
  DDT(DDOptimizerSetOptionsPrefix(opt, "t10bad_"));
  DDT(PetscOptionsSetValue(NULL, "-t10bad_optimizer_type", "rmsprop"));
  EXPECT_EQ((int)Catch([&]() { return DDOptimizerSetFromOptions(opt); }, &msg), (int)PETSC_ERR_ARG_UNKNOWN_TYPE);
  EXPECT_NE(msg.find("\"rmsprop\""), std::string::npos) << msg;
  DDT(PetscOptionsClearValue(NULL, "-t10bad_optimizer_type"));
  /* a registered type must give the step op */
  DDT(DDOptimizerRegister("test_broken", DDOptimizerCreate_TestBroken));
  DD_EXPECT_ERROR(DDOptimizerSetType(opt, "test_broken"), PETSC_ERR_PLIB, "must set the setup and step ops");
  DDT(DDOptimizerDestroy(&opt));

  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  EXPECT_EQ((int)Catch([&]() { return DDLayerSetType(l, "convolution"); }, &msg), (int)PETSC_ERR_ARG_UNKNOWN_TYPE);
  EXPECT_NE(msg.find("\"convolution\""), std::string::npos) << msg;
  for (const char *t : {"conv, ", "pool", "affine", "loss", "flatten"}) EXPECT_NE(msg.find(t), std::string::npos) << t << " not in " << msg;
  DDT(DDLayerDestroy(&l));

  DDPrimitive prim;
  DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &prim));
  EXPECT_EQ((int)Catch([&]() { return DDPrimitiveSetType(prim, "allgather"); }, &msg), (int)PETSC_ERR_ARG_UNKNOWN_TYPE);
  EXPECT_NE(msg.find("\"allgather\""), std::string::npos) << msg;
  for (const char *t : {"broadcast", "sumreduce", "allsumreduce", "repartition", "halo", "scatter"}) EXPECT_NE(msg.find(t), std::string::npos) << t << " not in " << msg;
  DDT(DDPrimitiveDestroy(&prim));
}

/* PyTorch's rules, from the formulas (torch.optim.SGD / Adam / AdamW docs), in double */
struct RefOpt {
  std::string         type;
  double              lr = 0.1, m = 0.9, wd = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-6;
  bool                nesterov = false;
  std::vector<double> s0, s1;
  int                 t = 0;
  void                step(std::vector<double> &p, const std::vector<double> &g)
  {
    if (s0.empty()) s0.assign(p.size(), 0), s1.assign(p.size(), 0);
    t++;
    for (size_t i = 0; i < p.size(); i++) {
      if (type == "sgd") {
        double d = g[i] + wd * p[i];
        s0[i]    = t == 1 ? d : m * s0[i] + d;
        p[i] -= lr * (nesterov ? d + m * s0[i] : s0[i]);
      } else {
        double d = g[i];
        if (type == "adamw") p[i] = p[i] - lr * wd * p[i];
        else d += wd * p[i];
        s0[i]       = b1 * s0[i] + (1 - b1) * d;
        s1[i]       = b2 * s1[i] + (1 - b2) * d * d;
        double mhat = s0[i] / (1 - std::pow(b1, t)), vhat = s1[i] / (1 - std::pow(b2, t));
        p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
    }
  }
};

TEST(Registry, OptimizerTypesByNameFollowTheirRules)
{
  struct Case {
    const char *type;
    bool        nesterov, fromoptions;
  };
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    for (Case c : {Case{"sgd", false, false}, Case{"sgd", true, true}, Case{"adam", false, false}, Case{"adamw", false, true}, Case{"adam", false, true}}) {
      SCOPED_TRACE(std::string(c.type) + (c.nesterov ? " nesterov" : "") + (c.fromoptions ? " from options" : "") + (dt == DD_FLOAT32 ? " float32" : " float64"));
      RefOpt ref;
      ref.type     = c.type;
      ref.nesterov = c.nesterov;
      DDOptimizer opt;
      DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
      if (c.fromoptions) {
        DDT(DDOptimizerSetOptionsPrefix(opt, "t10o_"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_type", c.type));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_lr", "0.1"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_weight_decay", "0.01"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_momentum", "0.9"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_nesterov", c.nesterov ? "1" : "0"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_beta1", "0.8"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_beta2", "0.95"));
        DDT(PetscOptionsSetValue(NULL, "-t10o_optimizer_eps", "1e-6"));
        DDT(DDOptimizerSetFromOptions(opt));
        for (const char *o : {"type", "lr", "weight_decay", "momentum", "nesterov", "beta1", "beta2", "eps"}) DDT(PetscOptionsClearValue(NULL, (std::string("-t10o_optimizer_") + o).c_str()));
      } else {
        DDT(DDOptimizerSetType(opt, c.type));
        DDT(DDOptimizerSetLearningRate(opt, ref.lr));
        DDT(DDOptimizerSetWeightDecay(opt, ref.wd));
        DDT(DDOptimizerSetMomentum(opt, ref.m, c.nesterov ? PETSC_TRUE : PETSC_FALSE));
        DDT(DDOptimizerSetBetas(opt, ref.b1, ref.b2, ref.eps));
      }
      DDOptimizerType type;
      DDT(DDOptimizerGetType(opt, &type));
      EXPECT_STREQ(type, c.type);
      DDTensor ps[2] = {MakeInput(Vector(13), dt, 21), MakeInput(Vector(4), dt, 22)}, gs[2];
      for (int i = 0; i < 2; i++) DDT(DDTensorDuplicate(ps[i], &gs[i]));
      DDT(DDOptimizerSetUp(opt, 2, ps, gs));
      std::vector<double> p[2] = {GatherAll(ps[0]), GatherAll(ps[1])}, p0[2] = {p[0], p[1]};
      RefOpt              r[2] = {ref, ref};
      for (int s = 0; s < 4; s++) {
        for (int i = 0; i < 2; i++) {
          DDT(DDTensorSetRandomGlobal(gs[i], 100 + 10 * s + i, -1, 1));
          r[i].step(p[i], GatherAll(gs[i]));
        }
        DDT(DDOptimizerStep(opt));
      }
      const double tol = dt == DD_FLOAT64 ? 1e-13 : 2e-6;
      for (int i = 0; i < 2; i++) {
        std::vector<double> got = GatherAll(ps[i]);
        EXPECT_LT(RelDiff(got, p[i]), tol) << "parameter " << i;
        /* the rule moved the parameter: the test can fail */
        EXPECT_GT(RelDiff(got, p0[i]), 1e-3);
      }
      /* the state a checkpoint saves: names and values */
      PetscInt           ns;
      DDTensor          *st;
      const char *const *names;
      DDT(DDOptimizerGetState(opt, &ns, &st, &names));
      if (std::string(c.type) == "sgd") {
        ASSERT_EQ(ns, 2);
        EXPECT_STREQ(names[0], "momentum_buffer");
        EXPECT_LT(RelDiff(GatherAll(st[1]), r[1].s0), dt == DD_FLOAT64 ? 1e-13 : 2e-6);
      } else {
        ASSERT_EQ(ns, 4);
        EXPECT_STREQ(names[2], "exp_avg");
        EXPECT_STREQ(names[3], "exp_avg_sq");
        EXPECT_LT(RelDiff(GatherAll(st[3]), r[1].s1), dt == DD_FLOAT64 ? 1e-13 : 2e-6);
        /* a restored second moment must be usable */
        DDT(DDOptimizerCheckState(opt));
        DDT(DDTensorSet(st[3], -1.0));
        std::string msg;
        EXPECT_EQ((int)Catch([&]() { return DDOptimizerCheckState(opt); }, &msg), (int)PETSC_ERR_FP);
        EXPECT_NE(msg.find("exp_avg_sq of parameter 1"), std::string::npos) << msg;
      }
      /* the type cannot change under set-up state */
      DD_EXPECT_ERROR(DDOptimizerSetType(opt, std::string(c.type) == "sgd" ? "adam" : "sgd"), PETSC_ERR_ARG_WRONGSTATE, "before DDOptimizerSetUp");
      DDT(DDOptimizerDestroy(&opt));
      for (int i = 0; i < 2; i++) {
        DDT(DDTensorDestroy(&ps[i]));
        DDT(DDTensorDestroy(&gs[i]));
      }
    }
  }
}
