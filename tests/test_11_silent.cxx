/*
  Nothing silent (issue 13): messages that name the culprit, integer options that overflow, a
  learning rate of inf or nan, options or shapes that differ between ranks, an error raised on one
  rank alone, and lists without silent limits (network inputs, layers, layer names); an
  out-of-memory error says memory, how much and where, also for a C++ std::bad_alloc.
*/
#include "layertest.hpp"
#include <ddnn/private/ddlayerimpl.h>
#include <new>
#include <cmath>
#include <cstdarg>

using namespace ddtest;

static DDLayer TypedLayer(const char *type, const char *prefix = NULL)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  if (prefix) DDT(DDLayerSetOptionsPrefix(l, prefix));
  DDT(DDLayerSetType(l, type));
  return l;
}

TEST(Messages, InputCountSaysWhatItMeans)
{
  /* "A loss layer takes 20 input(s)" meant 2 */
  DDLayer  loss = TypedLayer(DDLAYERLOSS, "t11loss_");
  DDTensor x    = MakeInput({{2, 3}, {}, {}, {}}, DD_FLOAT64, 1), xs[3] = {x, x, x};
  std::string m;
  EXPECT_EQ((int)Catch([&]() { return DDLayerSetUpMulti(loss, 3, xs); }, &m), (int)PETSC_ERR_ARG_SIZ);
  EXPECT_NE(m.find("takes 2 input(s), not 3"), std::string::npos) << m;
  EXPECT_NE(m.find("t11loss_"), std::string::npos) << m;
  DDT(DDLayerDestroy(&loss));
  /* concat takes any number from 2 on */
  DDLayer cat = TypedLayer(DDLAYERCONCAT);
  DD_EXPECT_ERROR(DDLayerSetUpMulti(cat, 1, xs), PETSC_ERR_ARG_SIZ, "takes at least 2 input(s), not 1");
  DDT(DDLayerDestroy(&cat));
  DDT(DDTensorDestroy(&x));
}

TEST(Options, IntegerOverflowIsAnErrorNamingTheOption)
{
  /* PETSc parses 4294967299 with strtol and casts it to a 32-bit PetscInt: 3 */
  DDT(PetscOptionsSetValue(NULL, "-t11ov_layer_conv_kernel", "3,4294967299"));
  DDLayer l = TypedLayer(DDLAYERCONV, "t11ov_");
  if (sizeof(PetscInt) == 4) DD_EXPECT_ERROR(DDLayerSetFromOptions(l), PETSC_ERR_ARG_OUTOFRANGE, "-t11ov_layer_conv_kernel 4294967299");
  DDT(PetscOptionsSetValue(NULL, "-t11ov_layer_conv_kernel", "3,99999999999999999999999"));
  DD_EXPECT_ERROR(DDLayerSetFromOptions(l), PETSC_ERR_ARG_OUTOFRANGE, "-t11ov_layer_conv_kernel 99999999999999999999999");
  DDT(PetscOptionsSetValue(NULL, "-t11ov_layer_conv_kernel", "3,3"));
  DDT(DDLayerSetFromOptions(l));
  DDT(PetscOptionsClearValue(NULL, "-t11ov_layer_conv_kernel"));
  DDT(DDLayerDestroy(&l));
  /* a program's own options: DDOptionsCheckUnused() checks them too */
  DDT(PetscOptionsSetValue(NULL, "-t11ov_steps", "-4294967296"));
  DD_EXPECT_ERROR(DDOptionsCheckIntegers(PETSC_COMM_WORLD, "t11ov_"), PETSC_ERR_ARG_OUTOFRANGE, "-t11ov_steps -4294967296");
  DDT(PetscOptionsClearValue(NULL, "-t11ov_steps"));
  DDT(DDOptionsCheckIntegers(PETSC_COMM_WORLD, "t11ov_"));
}

TEST(Options, LearningRateInfOrNanIsRejected)
{
  DDOptimizer opt;
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, "sgd"));
  DD_EXPECT_ERROR(DDOptimizerSetLearningRate(opt, (PetscReal)INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "must be positive and finite");
  DD_EXPECT_ERROR(DDOptimizerSetLearningRate(opt, (PetscReal)NAN), PETSC_ERR_ARG_OUTOFRANGE, "must be positive and finite");
  DD_EXPECT_ERROR(DDOptimizerSetWeightDecay(opt, (PetscReal)INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "must be non-negative and finite");
  DDT(DDOptimizerSetOptionsPrefix(opt, "t11lr_"));
  DDT(PetscOptionsSetValue(NULL, "-t11lr_optimizer_lr", "1e400"));
  DD_EXPECT_ERROR(DDOptimizerSetFromOptions(opt), PETSC_ERR_ARG_OUTOFRANGE, "learning rate inf (-t11lr_optimizer_lr)");
  DDT(PetscOptionsClearValue(NULL, "-t11lr_optimizer_lr"));
  DDT(DDOptimizerDestroy(&opt));
}

/* ---------------------------------------------------------------------- */
/* values that must agree between ranks */

TEST(RankConsistency, LayerOptionOnOneRankIsAnErrorOnEveryRank)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  DDT(PetscOptionsSetValue(NULL, "-t11rk_layer_conv_out_channels", Rank() == 1 ? "5" : "4"));
  DDLayer l = TypedLayer(DDLAYERCONV, "t11rk_");
  PetscInt k = 3;
  DDT(DDLayerConvSetKernel(l, 1, &k));
  DDT(DDLayerSetFromOptions(l));
  DDTensor x = MakeInput({{2, 3, 8, 8}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 1);
  std::string m;
  EXPECT_EQ((int)Catch([&]() { return DDLayerSetUp(l, x); }, &m), (int)PETSC_ERR_ARG_INCOMP);
  EXPECT_NE(m.find("differs between ranks (ranks 0 and 1 disagree"), std::string::npos) << m;
  EXPECT_NE(m.find("out channels 4"), std::string::npos) << m;
  EXPECT_NE(m.find("out channels 5"), std::string::npos) << m;
  EXPECT_NE(m.find("t11rk_"), std::string::npos) << m;
  DDT(PetscOptionsSetValue(NULL, "-t11rk_layer_conv_out_channels", "4"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(PetscOptionsClearValue(NULL, "-t11rk_layer_conv_out_channels"));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(RankConsistency, TensorShapeThatDiffersIsAnError)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  DDPartition p;
  PetscInt    ps[2] = {1, (PetscInt)Size()}, sh[2] = {4, Rank() == Size() - 1 ? (PetscInt)9 : (PetscInt)8};
  std::vector<PetscMPIInt> r;
  for (int i = 0; i < Size(); i++) r.push_back(i);
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, ps, Size(), r.data(), &p));
  DDTensor t;
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, sh));
  std::string m;
  EXPECT_EQ((int)Catch([&]() { return DDTensorSetUp(t); }, &m), (int)PETSC_ERR_ARG_INCOMP);
  EXPECT_NE(m.find("shape 4x8"), std::string::npos) << m;
  EXPECT_NE(m.find("shape 4x9"), std::string::npos) << m;
  EXPECT_NE(m.find("rank " + std::to_string(Size() - 1)), std::string::npos) << m;
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

TEST(RankConsistency, NetworkLayerListThatDiffersIsAnError)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  DDT(PetscOptionsInsertString(NULL, "-t11nl_net_inputs x -t11nl_a_layer_type activation -t11nl_b_layer_type activation"));
  DDT(PetscOptionsSetValue(NULL, "-t11nl_net_layers", Rank() == 1 ? "a" : "a,b"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11nl_"));
  DD_EXPECT_ERROR(DDNetSetFromOptions(net), PETSC_ERR_ARG_INCOMP, "-net_layers differs between ranks");
  DDT(DDNetDestroy(&net));
  DDT(PetscOptionsClearValue(NULL, "-t11nl_net_layers"));
}

TEST(RankConsistency, OptimizerSettingsThatDifferAreAnError)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  /* in the data-parallel weight mode every rank updates its own copies: a momentum, beta or eps that differed would silently train other weights on each rank */
  DDTensor x = MakeInput({{2, 3, 8, 8}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 1), g;
  DDT(DDTensorDuplicate(x, &g));
  for (int which = 0; which < 3; which++) {
    DDOptimizer opt;
    DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
    DDT(DDOptimizerSetType(opt, which == 0 ? DDOPTIMIZERSGD : DDOPTIMIZERADAM));
    const PetscReal r = Rank() == 1 ? 2 : 1;
    if (which == 0) DDT(DDOptimizerSetMomentum(opt, 0.45 * r, PETSC_FALSE));
    else if (which == 1) DDT(DDOptimizerSetBetas(opt, 0.9, 0.999, 1e-8 * r));
    else {
      DDT(PetscOptionsSetValue(NULL, "-t11op_optimizer_beta1", Rank() == 1 ? "0.8" : "0.9"));
      DDT(DDOptimizerSetOptionsPrefix(opt, "t11op_"));
      DD_EXPECT_ERROR(DDOptimizerSetFromOptions(opt), PETSC_ERR_ARG_INCOMP, "The optimizer's settings differs between ranks");
      DDT(PetscOptionsClearValue(NULL, "-t11op_optimizer_beta1"));
    }
    std::string m;
    EXPECT_EQ((int)Catch([&]() { return DDOptimizerSetUp(opt, 1, &x, &g); }, &m), (int)PETSC_ERR_ARG_INCOMP) << which;
    EXPECT_NE(m.find("differs between ranks"), std::string::npos) << m;
    EXPECT_NE(m.find(which == 0 ? "momentum" : which == 1 ? "eps" : "betas"), std::string::npos) << m;
    DDT(DDOptimizerDestroy(&opt));
  }
  DDT(DDTensorDestroy(&g));
  DDT(DDTensorDestroy(&x));
}

TEST(RankConsistency, CheckFiniteOnSomeRanksIsAnError)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  /* its checks are collective: given to some ranks only, the forward used to hang */
  DDT(PetscOptionsInsertString(NULL, "-t11cf_net_inputs x -t11cf_net_layers a -t11cf_a_layer_type activation"));
  if (Rank() == 1) DDT(PetscOptionsSetValue(NULL, "-t11cf_dd_check_finite", "1"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11cf_"));
  DDT(DDNetSetFromOptions(net));
  DDTensor x = MakeInput({{2, 3, 8, 8}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 1);
  DD_EXPECT_ERROR(DDNetSetUp(net, 1, &x), PETSC_ERR_ARG_INCOMP, "-dd_check_finite differs between ranks");
  if (Rank() == 1) DDT(PetscOptionsClearValue(NULL, "-t11cf_dd_check_finite"));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
}

/* what decides every rank's piece must agree: given differently, ranks used to own overlapping or missing entries silently, or to wait in a collective the others had left */
TEST(RankConsistency, OwnershipReplicationAndRanksThatDifferAreAnError)
{
  if (Size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  DDPartition p;
  PetscInt    ps[1] = {2}, sh[1] = {5};
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, ps, PETSC_DECIDE, NULL, &p));
  auto make = [&](const std::function<void(DDTensor)> &f) {
    DDTensor t;
    DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
    DDT(DDTensorSetPartition(t, p));
    DDT(DDTensorSetShape(t, 1, sh));
    f(t);
    return t;
  };
  std::string m;
  /* sizes that each sum to 5 but differ: entry 2 owned by nobody */
  DDTensor t = make([&](DDTensor u) {
    PetscInt lx[2] = {Rank() == 0 ? (PetscInt)2 : (PetscInt)3, Rank() == 0 ? (PetscInt)3 : (PetscInt)2};
    DDT(DDTensorSetOwnershipRanges(u, 0, lx));
  });
  EXPECT_EQ((int)Catch([&]() { return DDTensorSetUp(t); }, &m), (int)PETSC_ERR_ARG_INCOMP);
  EXPECT_NE(m.find("sizes along 0: 2 3"), std::string::npos) << m;
  EXPECT_NE(m.find("sizes along 0: 3 2"), std::string::npos) << m;
  DDT(DDTensorDestroy(&t));
  /* a bad sum on rank 1 only: an error on both (rank 0 used to wait) */
  t = make([&](DDTensor u) {
    PetscInt lx[2] = {2, Rank() == 1 ? (PetscInt)4 : (PetscInt)3};
    DDT(DDTensorSetOwnershipRanges(u, 0, lx));
  });
  EXPECT_NE(Catch([&]() { return DDTensorSetUp(t); }, &m), 0);
  DDT(DDTensorDestroy(&t));
  /* replicated on one rank only */
  t = make([&](DDTensor u) {
    if (Rank() == 0) DDT(DDTensorSetReplicated(u, 0, PETSC_TRUE));
  });
  EXPECT_EQ((int)Catch([&]() { return DDTensorSetUp(t); }, &m), (int)PETSC_ERR_ARG_INCOMP);
  EXPECT_NE(m.find("replicated along 0"), std::string::npos) << m;
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
  /* a partition whose ranks are given in another order on each rank (both would be worker 0), or another count */
  PetscMPIInt r[2] = {Rank() == 0 ? 0 : 1, Rank() == 0 ? 1 : 0};
  EXPECT_EQ((int)Catch([&]() { return DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, ps, 2, r, &p); }, &m), (int)PETSC_ERR_ARG_INCOMP);
  EXPECT_NE(m.find("The ranks of a partition"), std::string::npos) << m;
  PetscInt one[1] = {1};
  EXPECT_NE(Catch([&]() { return DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, Rank() == 1 ? ps : one, Rank() == 1 ? 2 : 1, r, &p); }, &m), 0);
}

/* a format set after set-up while the ranks' formats differ: every rank takes part in the collective re-layout (the ranks whose format did not change used to return at once, the others to wait) */
TEST(RankConsistency, FormatSetAfterSetUpWithPerRankFormats)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  DDTensor x = MakeInput({{2, 3, 4, 4}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 1), y;
  DDT(DDTensorDuplicate(x, &y));
  DDT(DDTensorSetFormat(y, Rank() == 1 ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN));
  DDT(DDTensorCopy(x, y));
  DDT(DDTensorSetFormat(y, DD_FORMAT_CHANNELS_LAST));
  DDT(DDTensorSetBlockSize(y, 8));
  EXPECT_EQ(GatherAll(x), GatherAll(y));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
}

TEST(RankConsistency, SameStringPassesAndNamesTheFirstDifference)
{
  DDT(DDCheckSameString(PETSC_COMM_WORLD, "a file name", "/tmp/same.h5"));
  if (Size() < 2) return;
  std::string v = Rank() == Size() - 1 ? "/tmp/other.h5" : "/tmp/same.h5";
  DD_EXPECT_ERROR(DDCheckSameString(PETSC_COMM_WORLD, "The data file name", v.c_str()), PETSC_ERR_ARG_INCOMP, "\"/tmp/other.h5\"");
}

TEST(RankConsistency, RanksAtDifferentChecksAreToldTheyTookDifferentPaths)
{
  /* -restart on one rank only: rank 0 checks a tensor's shape while the last rank checks a file
     name, at the same collective call; the values alone would be compared as if they were one */
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  bool        last = Rank() == Size() - 1;
  std::string m;
  PetscErrorCode e = Catch([&]() { return DDCheckSameString(PETSC_COMM_WORLD, last ? "the checkpoint file name" : "the shape of a tensor", last ? "ck.h5" : "4x1x8x8"); }, &m);
  EXPECT_EQ((int)e, (int)PETSC_ERR_ARG_INCOMP) << m;
  EXPECT_NE(m.find("took different paths"), std::string::npos) << m;
  EXPECT_NE(m.find("checks the shape of a tensor (\"4x1x8x8\")"), std::string::npos) << m;
  EXPECT_NE(m.find("checks the checkpoint file name (\"ck.h5\")"), std::string::npos) << m;
}

/* the message an error handler prints, captured */
static std::string Printed;
static PetscErrorCode CapturePrintf(const char fmt[], ...)
{
  char    buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  Printed += buf;
  return PETSC_SUCCESS;
}

static PetscErrorCode RaiseOnRank1Only(void)
{
  PetscFunctionBegin;
  PetscCheck(Rank() != 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "bad option t11 given to rank 1 alone");
  PetscFunctionReturn(PETSC_SUCCESS);
}

TEST(RankConsistency, ErrorRaisedOnOneRankPrintsItsMessageThere)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  /* DDInitialize() installed the handler; PETSc's own prints from rank 0 of the communicator only */
  PetscErrorCode (*saved)(const char[], ...) = PetscErrorPrintf;
  Printed.clear();
  PetscErrorPrintf   = CapturePrintf;
  PetscErrorCode err = RaiseOnRank1Only();
  PetscErrorPrintf   = saved;
  if (Rank() == 1) {
    EXPECT_EQ((int)err, (int)PETSC_ERR_ARG_WRONG);
    EXPECT_NE(Printed.find("bad option t11 given to rank 1 alone"), std::string::npos) << "printed: " << Printed;
    EXPECT_NE(Printed.find("on rank 1"), std::string::npos) << Printed;
  } else EXPECT_EQ((int)err, 0);
}

/* ---------------------------------------------------------------------- */
/* no silent truncation */

TEST(Truncation, ManyNetworkInputsAndLayers)
{
  /* 70 inputs concatenated (more than the 64 and the 8 of the old fixed arrays), then 300 layers */
  const int   NI = 70, NL = 300;
  std::string ins, layers = "cat", catin;
  for (int i = 0; i < NI; i++) ins += (i ? "," : "") + std::string("x") + std::to_string(i);
  for (int i = 0; i < NL - 1; i++) layers += ",a" + std::to_string(i);
  DDT(PetscOptionsSetValue(NULL, "-t11tr_net_inputs", ins.c_str()));
  DDT(PetscOptionsSetValue(NULL, "-t11tr_net_layers", layers.c_str()));
  DDT(PetscOptionsSetValue(NULL, "-t11tr_cat_layer_type", "concat"));
  DDT(PetscOptionsSetValue(NULL, "-t11tr_cat_layer_inputs", ins.c_str()));
  for (int i = 0; i < NL - 1; i++) DDT(PetscOptionsSetValue(NULL, ("-t11tr_a" + std::to_string(i) + "_layer_type").c_str(), "activation"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11tr_"));
  DDT(DDNetSetFromOptions(net));
  PetscInt nl;
  DDT(DDNetGetNumLayers(net, &nl));
  EXPECT_EQ(nl, NL);
  std::vector<DDTensor> xs;
  for (int i = 0; i < NI; i++) xs.push_back(MakeInput({{1, 1, 2, 2}, {}, {}, {}}, DD_FLOAT64, 1 + i));
  DDT(DDNetSetUp(net, NI, xs.data()));
  DDLayer cat;
  PetscInt nin;
  DDT(DDNetGetLayer(net, "cat", &cat));
  DDT(DDLayerGetNumInputs(cat, &nin));
  EXPECT_EQ(nin, NI);
  DDTensor y;
  const PetscInt *shape;
  DDT(DDNetGetOutput(net, &y));
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[1], NI);
  DDT(DDNetForward(net, NI, xs.data()));
  auto out = GatherAll(y);
  auto x69 = GatherAll(xs[NI - 1]);
  for (int k = 0; k < 4; k++) EXPECT_EQ(out[4 * (NI - 1) + k], std::max(0.0, x69[k])) << "the 70th input reaches the output";
  DDT(DDNetDestroy(&net));
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
  DDT(PetscOptionsClearValue(NULL, "-t11tr_net_inputs"));
  DDT(PetscOptionsClearValue(NULL, "-t11tr_net_layers"));
}

TEST(Truncation, LongLayerNamesKeepTheirPrefixOrNameTheLimit)
{
  std::string name(300, 'n');
  DDT(PetscOptionsSetValue(NULL, "-t11ln_net_inputs", "x"));
  DDT(PetscOptionsSetValue(NULL, "-t11ln_net_layers", name.c_str()));
  DDT(PetscOptionsSetValue(NULL, ("-t11ln_" + name + "_layer_type").c_str(), "activation"));
  DDT(PetscOptionsSetValue(NULL, ("-t11ln_" + name + "_layer_activation_type").c_str(), "tanh"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11ln_"));
  DDT(DDNetSetFromOptions(net));
  DDLayer     l;
  const char *prefix;
  DDT(DDNetGetLayer(net, name.c_str(), &l));
  DDT(DDLayerGetOptionsPrefix(l, &prefix));
  EXPECT_EQ(std::string(prefix), "t11ln_" + name + "_");
  DDT(DDNetDestroy(&net));
  /* a name beyond PETSc's option names is an error naming the limit */
  std::string huge(600, 'h');
  DDT(PetscOptionsSetValue(NULL, "-t11ln_net_layers", huge.c_str()));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11ln_"));
  DD_EXPECT_ERROR(DDNetSetFromOptions(net), PETSC_ERR_ARG_OUTOFRANGE, "PETSC_MAX_OPTION_NAME");
  DDT(DDNetDestroy(&net));
  DDT(PetscOptionsClearValue(NULL, "-t11ln_net_inputs"));
  DDT(PetscOptionsClearValue(NULL, "-t11ln_net_layers"));
}

/* ---------------------------------------------------------------------- */
/* out of memory */

TEST(Messages, OutOfMemorySaysMemoryHowMuchAndWhere)
{
  /* PETSc 3.18 reports a failed PetscMalloc() with errno as its code and the caller's name as the
     message, ending as "out-of-range error code <line>"; with DDInitialize()'s handler it is
     PETSC_ERR_MEM with the size and the caller */
  PetscErrorCode (*saved)(const char[], ...) = PetscErrorPrintf;
  double        *a                            = NULL;
  const size_t   n                            = (size_t)1 << 42; /* 32 TiB of doubles */
  Printed.clear();
  PetscErrorPrintf   = CapturePrintf;
  PetscErrorCode err = PetscMalloc1(n, &a);
  PetscErrorPrintf   = saved;
  EXPECT_EQ((int)err, (int)PETSC_ERR_MEM) << Printed;
  EXPECT_EQ(a, (double *)NULL);
  EXPECT_NE(Printed.find("Out of memory: an allocation of " + std::to_string(n * sizeof(double)) + " bytes"), std::string::npos) << Printed;
  EXPECT_NE(Printed.find("test_11_silent.cxx"), std::string::npos) << Printed;
}

/* a layer type whose set-up throws std::bad_alloc, as a std::vector sized by a huge shape does */
static PetscErrorCode Throws_SetUp(DDLayer, PetscInt, DDTensor[])
{
  throw std::bad_alloc();
}
static PetscErrorCode DDLayerCreate_TestThrows(DDLayer l)
{
  PetscFunctionBegin;
  l->ops->setup = Throws_SetUp;
  PetscFunctionReturn(PETSC_SUCCESS);
}

TEST(Messages, BadAllocInLayerSetUpIsAnOutOfMemoryErrorNamingTheLayer)
{
  /* a C++ exception through the C interface would abort the program */
  DDT(DDLayerRegister("t11_throws", DDLayerCreate_TestThrows));
  DDT(PetscOptionsInsertString(NULL, "-t11ba_net_inputs x -t11ba_net_layers big -t11ba_big_layer_type t11_throws"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11ba_"));
  DDT(DDNetSetFromOptions(net));
  DDTensor x = MakeInput({{2, 3}, {}, {}, {}}, DD_FLOAT64, 1);
  DD_EXPECT_ERROR(DDNetSetUp(net, 1, &x), PETSC_ERR_MEM, "Out of memory: a C++ allocation failed in DDLayerSetUpMulti() (std::bad_alloc) while setting up layer \"t11ba_big\" (t11_throws) on an input of global shape 2x3");
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
}
