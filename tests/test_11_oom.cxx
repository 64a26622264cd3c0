/*
  Issue 13's leftovers: out of memory is an error that says so, whoever handles the errors.
  - A C++ allocation (std::bad_alloc) that fails under any C entry point (DD_CXX_TRY/DD_CXX_CATCH,
    src/sys/ddcxx.hpp: a network's set-up, forward and backward; the primitives, layers, optimizers
    and tensors called directly; the binding ABI) is PETSC_ERR_MEM naming the entry point that
    caught it and what the library was doing (the network, the layer), on every rank, not a
    std::terminate.
  - A PETSc allocation that fails while the caller's error handler is PetscReturnErrorHandler()
    (pushed by the program, or by ddnn's own trial set-ups) returns PETSC_ERR_MEM and a message
    with the size and the caller, not PETSc 3.18's raw errno code.
  The C++ failures are injected: this program replaces the global operator new (which the library's
  calls reach too) and can make the n-th allocation from now throw, the same on every rank.
  Run at 1, 2 and 3 ranks.
*/
#include "layertest.hpp"
#include <ddnn/private/ddlayerimpl.h>
#include "../c_api/ddnn_capi.h"
#include <set>
#include <cmath>
#include <atomic>
#include <cstdlib>
#include <new>
#include <sys/resource.h>

using namespace ddtest;

/* ---------------------------------------------------------------------- */
/* operator new with an injected failure: the failnext-th allocation from now throws */
static std::atomic<long> failnext{0};
static std::atomic<long> failed{0};

void *operator new(std::size_t n)
{
  if (failnext.load() > 0 && --failnext == 0) {
    failed++;
    throw std::bad_alloc();
  }
  void *p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void operator delete(void *p) noexcept
{
  std::free(p);
}
void operator delete(void *p, std::size_t) noexcept
{
  std::free(p);
}

/* runs f with the k-th C++ allocation from now failing; whether it fired */
template <class F>
static PetscErrorCode WithFailingAllocation(long k, F &&f, std::string *msg, bool *fired)
{
  long           before = failed.load();
  PetscErrorCode ierr   = Catch(
    [&] {
      failnext         = k;
      PetscErrorCode e = f();
      failnext         = 0; /* before Catch() allocates the message */
      return e;
    },
    msg);
  *fired = failed.load() > before;
  return ierr;
}

/* the error happened on every rank (no rank hangs in a collective the others left) */
static bool OnEveryRank(bool mine)
{
  int v = mine ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, PETSC_COMM_WORLD);
  return v == 1;
}

/*
  The sweep: for k = 1, 2, ... (DDNN_TEST11_START) runs `run` with the k-th C++ allocation from now
  failing, until none fails (run must then succeed) or the ranks stop failing alike (stopped before
  a rank waits for another). Each failure must be PETSC_ERR_MEM with a C++ allocation's message, on
  every rank. before() runs ahead of every try, outside the failing window (what the program made
  before the calls swept); after(k, failed, msg) after it (the test's own checks and clean-up).
  Returns the number of failures; DDNN_TEST11_VIEW prints it, DDNN_TEST11_TRACE every k.
*/
template <class Before, class Run, class After>
static long SweepAllocations(const char *what, Before &&before, Run &&run, After &&after)
{
  long errors = 0, k = getenv("DDNN_TEST11_START") ? atol(getenv("DDNN_TEST11_START")) : 1;
  for (; k < 100000; k++) {
    std::string msg;
    bool        fired;
    if (getenv("DDNN_TEST11_TRACE")) fprintf(stderr, "[%d] allocation %ld\n", Rank(), k);
    before();
    PetscErrorCode ierr = WithFailingAllocation(k, [&] { return run(k); }, &msg, &fired);
    if (!OnEveryRank(fired)) { /* the ranks allocate differently from here on */
      EXPECT_TRUE(OnEveryRank(!fired) || k > 1) << what << ", allocation " << k;
      after(k, true, msg);
      break;
    }
    if (!fired) {
      EXPECT_EQ(ierr, 0) << what << ": " << msg;
      after(k, false, msg);
      break;
    }
    errors++;
    EXPECT_EQ(ierr, PETSC_ERR_MEM) << what << ", allocation " << k << ": " << msg;
    EXPECT_NE(msg.find("Out of memory: a C++ allocation failed in "), std::string::npos) << what << ", allocation " << k << ": " << msg;
    EXPECT_TRUE(OnEveryRank(ierr == PETSC_ERR_MEM)) << what << ", allocation " << k;
    after(k, true, msg);
  }
  EXPECT_GT(errors, 20) << what << ": the C++ allocations were not reached";
  if (getenv("DDNN_TEST11_VIEW")) PetscPrintf(PETSC_COMM_WORLD, "%s: %ld C++ allocations failed in turn, each an error\n", what, errors);
  return errors;
}

/* the options of the swept networks (inputs x, t): conv 3x3 (its halo exchange overlapped with the
   interior when asked), relu, conv 1x1, a channel concatenation and a loss */
static void InsertSweptNetOptions(const std::string &p, bool overlap)
{
  const std::string o = "-" + p + "net_inputs x,t -" + p + "net_layers c1,a1,c2,k,loss -" + p + "c1_layer_type conv -" + p + "c1_layer_conv_out_channels 2 -" + p + "c1_layer_conv_kernel 3 -" + p + "c1_layer_conv_padding 1" + (overlap ? " -" + p + "c1_layer_conv_overlap" : std::string()) + " -" + p + "a1_layer_type activation -" + p + "c2_layer_type conv -" + p + "c2_layer_conv_out_channels 2 -" + p + "c2_layer_conv_kernel 1 -" + p + "k_layer_type concat -" + p + "k_layer_inputs c2,a1 -" + p + "loss_layer_type loss -" + p + "loss_layer_inputs k,t";
  DDT(PetscOptionsInsertString(NULL, o.c_str()));
}

/* ---------------------------------------------------------------------- */
/* a pointwise test layer (y = x) whose forward or backward throws std::bad_alloc when asked, as a
   std::vector sized by a huge shape would */
static int throwin = 0; /* 1: forward, 2: backward */

static PetscErrorCode T_SetUp(DDLayer l, PetscInt, DDTensor xs[])
{
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(DDTensorDuplicateLayout(xs[0], xs[0]->dtype, &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode T_Forward(DDLayer, PetscInt, DDTensor xs[], DDTensor y)
{
  PetscFunctionBegin;
  if (throwin == 1) throw std::bad_alloc();
  PetscCall(DDTensorCopy(xs[0], y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode T_Backward(DDLayer, DDTensor dy, PetscInt, DDTensor dxs[])
{
  PetscFunctionBegin;
  if (throwin == 2) throw std::bad_alloc();
  if (dy && dxs && dxs[0]) PetscCall(DDTensorCopy(dy, dxs[0]));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode DDLayerCreate_T11Pass(DDLayer l)
{
  PetscFunctionBegin;
  l->ops->setup    = T_SetUp;
  l->ops->forward  = T_Forward;
  l->ops->backward = T_Backward;
  l->nulldy        = PETSC_TRUE; /* its backward takes dy = NULL (DDNetBackward(net, NULL) below) */
  PetscFunctionReturn(PETSC_SUCCESS);
}

TEST(OutOfMemory, BadAllocInForwardAndBackwardIsAnErrorNamingTheCall)
{
  DDT(DDLayerRegister("t11_pass", DDLayerCreate_T11Pass));
  DDT(PetscOptionsInsertString(NULL, "-t11fb_net_inputs x -t11fb_net_layers c,p -t11fb_c_layer_type conv -t11fb_c_layer_conv_out_channels 2 -t11fb_c_layer_conv_kernel 1 -t11fb_p_layer_type t11_pass"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11fb_"));
  DDT(DDNetSetFromOptions(net));
  DDTensor x = MakeInput({{2, 3, 4 * Size(), 4}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 1);
  DDT(DDNetSetUp(net, 1, &x));
  std::string msg;
  throwin = 1;
  EXPECT_EQ(Catch([&] { return DDNetForward(net, 1, &x); }, &msg), PETSC_ERR_MEM) << msg;
  EXPECT_NE(msg.find("Out of memory: a C++ allocation failed in DDLayerForwardMulti() (std::bad_alloc) while running the forward of layer \"p\" (t11_pass) in DDNetForward()"), std::string::npos) << msg;
  throwin = 0;
  DDT(DDNetForward(net, 1, &x)); /* usable again */
  throwin = 2;
  EXPECT_EQ(Catch([&] { return DDNetBackward(net, NULL); }, &msg), PETSC_ERR_MEM) << msg;
  EXPECT_NE(msg.find("Out of memory: a C++ allocation failed in DDLayerBackwardMulti() (std::bad_alloc) while running the backward of layer \"p\" (t11_pass) in DDNetBackward()"), std::string::npos) << msg;
  throwin = 0;
  DDT(DDNetForward(net, 1, &x));
  DDT(DDNetBackward(net, NULL));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
}

/* every C++ allocation of a network's set-up and of its first forward and backward (where the
   exchanges make their messages) in turn fails (on every rank the same one): each time an
   out-of-memory error naming the set-up (or the layer being set up), on every rank, never a crash
   or hang; a network whose set-up succeeded runs a step after the error; then all succeeds when
   none fails */
TEST(OutOfMemory, EveryCxxAllocationOfNetSetUpCanFail)
{
  /* at 3 ranks the middle rank has two neighbours and allocates more: the k-th allocation fails on
     some ranks only, which then leave the set-up while the others wait in its next collective (an
     error raised on one rank alone is not collective in PETSc): the sweep needs ranks that allocate
     alike (1 and 2 ranks split in H) */
  if (Size() > 2) GTEST_SKIP() << "ranks that allocate differently";
  InsertSweptNetOptions("t11su_", false);
  DDTensor x = MakeInput({{2, 2, 4 * Size(), 4}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 1);
  DDTensor t = MakeInput({{2, 4, 4 * Size(), 4}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 2);
  DDTensor in[2] = {x, t};
  DDNet    net    = NULL;
  long     inlayer = 0, infirst = 0;
  bool     setupdone = false;
  SweepAllocations(
    "net set-up and first step",
    [&] {
      DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
      DDT(DDNetSetOptionsPrefix(net, "t11su_"));
      DDT(DDNetSetFromOptions(net));
    },
    [&](long) -> PetscErrorCode {
      PetscFunctionBegin;
      setupdone = false;
      PetscCall(DDNetSetUp(net, 2, in));
      setupdone = true;
      PetscCall(DDNetForward(net, 2, in)); /* the first calls: the exchanges make their messages */
      PetscCall(DDNetBackward(net, NULL));
      PetscFunctionReturn(PETSC_SUCCESS);
    },
    [&](long k, bool failed, const std::string &msg) {
      std::string m;
      if (failed && !setupdone) {
        /* the entry point that caught it, and what the library was doing: the network's set-up (the
           catcher, or beneath it, with the layer being set up when there was one) */
        EXPECT_TRUE(msg.find("failed in DDNetSetUp() (") != std::string::npos || msg.find(" in DDNetSetUp() of the network \"t11su_\"") != std::string::npos) << "allocation " << k << ": " << msg;
        if (msg.find("while setting up layer") != std::string::npos) inlayer++;
      } else { /* set up: usable, also after an error in its first forward or backward */
        if (failed) infirst++;
        EXPECT_EQ(Catch([&]() -> PetscErrorCode {
                    PetscFunctionBegin;
                    PetscCall(DDNetForward(net, 2, in));
                    PetscCall(DDNetBackward(net, NULL));
                    PetscFunctionReturn(PETSC_SUCCESS);
                  },
                          &m),
                  0)
          << "a step after allocation " << k << " failed: " << m;
      }
      DDT(DDNetDestroy(&net));
    });
  EXPECT_GT(infirst, 5) << "no failure in the first forward or backward";
  EXPECT_GT(inlayer, 10) << "no failure named the layer being set up";
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/* the objects of a program that calls ddnn directly, without a DDNet: destroyed after each try */
struct DirectObjects {
  DDPrimitive H = NULL;
  DDLayer     l = NULL;
  DDOptimizer o = NULL;
  DDTensor    y = NULL, dy = NULL, dx = NULL, z = NULL;
  DDLayer     cat = NULL;                                     /* a concatenation along H (1 rank) */
  DDTensor    ca[2] = {NULL, NULL}, cy = NULL, cdx[2] = {NULL, NULL}; /* set up before each try: must run again after an error */
  ddnn_handle part = 0;
  void        Destroy()
  {
    DDT(DDPrimitiveDestroy(&H));
    DDT(DDLayerDestroy(&l));
    DDT(DDOptimizerDestroy(&o));
    DDT(DDLayerDestroy(&cat));
    for (DDTensor *t : {&y, &dy, &dx, &z, &ca[0], &ca[1], &cy, &cdx[0], &cdx[1]}) DDT(DDTensorDestroy(t));
    if (part) EXPECT_EQ(ddnn_partition_destroy(&part), 0);
  }
};

/* the concatenation's forward and backward (its scatters begun, then ended) */
static PetscErrorCode ConcatStep(DirectObjects &d)
{
  PetscFunctionBegin;
  if (!d.cy) PetscCall(DDLayerCreateOutput(d.cat, &d.cy));
  PetscCall(DDLayerForwardMulti(d.cat, 2, d.ca, d.cy));
  for (int i = 0; i < 2; i++)
    if (!d.cdx[i]) PetscCall(DDTensorDuplicate(d.ca[i], &d.cdx[i]));
  PetscCall(DDLayerBackwardMulti(d.cat, d.cy, 2, d.cdx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a halo exchange and its adjoint, a convolution layer's set-up, forward and backward, Adam, tensor
   operations, an entry point of the binding ABI (which converts its arrays into std::vectors) and
   (on 1 rank) a concatenation, all called directly: every C entry point is a function-try-block
   (DD_CXX_TRY) */
static PetscErrorCode DirectCalls(DDTensor x, DirectObjects &d)
{
  const PetscInt k[2] = {3, 3}, pad[2] = {1, 1};
  PetscInt       n;
  DDTensor      *ps, *gs;
  PetscReal      nrm;
  const ddnn_int pshape[2] = {1, 1};

  PetscFunctionBegin;
  PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &d.H));
  PetscCall(DDPrimitiveSetType(d.H, DDPRIMITIVEHALO));
  PetscCall(DDPrimitiveHaloSetKernel(d.H, 2, 3, 1, 1, 1, PETSC_DECIDE));
  PetscCall(DDTensorDuplicate(x, &d.z));
  PetscCall(DDPrimitiveSetUp(d.H, d.z, NULL));
  PetscCall(DDPrimitiveApply(d.H, d.z, NULL));
  PetscCall(DDPrimitiveApplyAdjoint(d.H, d.z, NULL));
  PetscCall(DDLayerCreate(PETSC_COMM_WORLD, &d.l));
  PetscCall(DDLayerSetType(d.l, DDLAYERCONV));
  PetscCall(DDLayerConvSetOutputChannels(d.l, 2));
  PetscCall(DDLayerConvSetKernel(d.l, 2, k));
  PetscCall(DDLayerConvSetPadding(d.l, 2, pad));
  PetscCall(DDLayerSetUp(d.l, x));
  PetscCall(DDLayerCreateOutput(d.l, &d.y));
  PetscCall(DDLayerForward(d.l, x, d.y));
  PetscCall(DDTensorDuplicate(d.y, &d.dy));
  PetscCall(DDTensorSet(d.dy, 1.0));
  PetscCall(DDTensorDuplicate(x, &d.dx));
  PetscCall(DDLayerBackward(d.l, d.dy, d.dx));
  PetscCall(DDTensorNorm(d.dx, NORM_2, &nrm));
  PetscCall(DDLayerGetParameters(d.l, &n, &ps));
  PetscCall(DDLayerGetGradients(d.l, NULL, &gs));
  PetscCall(DDOptimizerCreate(PETSC_COMM_WORLD, &d.o));
  PetscCall(DDOptimizerSetType(d.o, DDOPTIMIZERADAM));
  PetscCall(DDOptimizerSetUp(d.o, n, ps, gs));
  PetscCall(DDOptimizerStep(d.o));
  PetscCall(ddnn_partition_create_cartesian(MPI_Comm_c2f(PETSC_COMM_SELF), 2, pshape, -1, NULL, &d.part));
  if (d.cat) PetscCall(ConcatStep(d));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* every C++ allocation of those direct calls in turn fails (the same one on every rank): each time
   PETSC_ERR_MEM naming the entry point that was running (or the layer being set up), on every rank,
   never a std::terminate; the objects left half set up are destroyed cleanly; then the calls
   succeed when none fails */
TEST(OutOfMemory, EveryCxxAllocationOfDirectCallsCanFail)
{
  if (Size() > 2) GTEST_SKIP() << "ranks that allocate differently";
  DDTensor x = MakeInput({{2, 2, 4 * Size(), 5}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 3);
  DirectObjects         d;
  std::set<std::string> where;
  SweepAllocations(
    "direct calls",
    [&] {
      /* a concatenation along H, set up outside the failing window, on 1 rank: on 2 ranks (the output's
         rows of rank 0 taken from the first input, those of rank 1 from the second) the ranks' scatters
         allocate differently, so that an allocation fails on one rank alone, between two of its
         messages, and the sweep would wait in a communication the other rank has finished */
      if (Size() > 1) return;
      d.ca[0] = MakeInput({{2, 2, 4, 3}, {}, {}, {}}, DD_FLOAT64, 8);
      d.ca[1] = MakeInput({{2, 2, 4, 3}, {}, {}, {}}, DD_FLOAT64, 9);
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &d.cat));
      DDT(DDLayerSetType(d.cat, DDLAYERCONCAT));
      DDT(DDLayerConcatSetDimension(d.cat, 2));
      DDT(DDLayerSetUpMulti(d.cat, 2, d.ca));
      /* the second input's gradient with a halo (another layout than the set-up input's): the backward
         makes its conforming copy after the first scatter's adjoint has begun, so that a failure there
         leaves that scatter begun unless the layer's guard ends it */
      const PetscInt lo[4] = {0, 0, 1, 0}, hi[4] = {0, 0, 1, 0};
      DDT(DDTensorDuplicate(d.ca[1], &d.cdx[1]));
      DDT(DDTensorSetHalo(d.cdx[1], lo, hi));
    },
    [&](long) { return DirectCalls(x, d); },
    [&](long k, bool failed, const std::string &msg) {
      std::string m;
      const std::string in = "Out of memory: a C++ allocation failed in ";
      size_t            at = msg.find(in);
      if (failed && at != std::string::npos) where.insert(msg.substr(at + in.size(), msg.find("()", at) - at - in.size()));
      if (failed && d.cat) EXPECT_EQ(Catch([&] { return ConcatStep(d); }, &m), 0) << "the concatenation after allocation " << k << " failed: " << m;
      d.Destroy();
      d = DirectObjects();
    });
  /* the failures were met in the primitives, the layer, the optimizer and the binding ABI */
  for (const char *fn : {"DDPrimitiveSetUp", "DDLayerSetUpMulti", "DDLayerForwardMulti", "DDLayerBackwardMulti", "DDOptimizerSetUp", "DDOptimizerStep", "ddnn_partition_create_cartesian"}) EXPECT_TRUE(where.count(fn)) << fn << " never failed; failed in: " << ::testing::PrintToString(where);
  if (getenv("DDNN_TEST11_VIEW")) PetscPrintf(PETSC_COMM_WORLD, "direct calls failed in %s\n", ::testing::PrintToString(where).c_str());
  DDT(DDTensorDestroy(&x));
}

/* every C++ allocation of a training step, a checkpoint's save and load, an epoch of training on a
   data set and an evaluation in turn fails (the same one on every rank), on a network set up once:
   each time PETSC_ERR_MEM on every rank; after each failure the network and the optimizer are still
   usable (a clean step and a clean epoch run, their losses finite), and the checkpoint file is never
   left half-written: it loads, the complete one written before */
TEST(OutOfMemory, EveryCxxAllocationOfAStepACheckpointAndAnEpochCanFail)
{
  if (Size() > 2) GTEST_SKIP() << "ranks that allocate differently";
  InsertSweptNetOptions("t11st_", true);
  DDTensor    x = MakeInput({{2, 2, 4 * Size(), 4}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 4);
  DDTensor    t = MakeInput({{2, 4, 4 * Size(), 4}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 5);
  DDTensor    in[2] = {x, t};
  DDNet       net;
  DDOptimizer opt;
  PetscInt    n;
  DDTensor   *ps, *gs;
  PetscReal   loss;
  const char *file = "t11_oom_checkpoint.h5";
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t11st_"));
  DDT(DDNetSetFromOptions(net));
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, DDOPTIMIZERADAM));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  auto step = [&]() -> PetscErrorCode {
    PetscFunctionBegin;
    PetscCall(DDNetZeroGradients(net));
    PetscCall(DDNetForward(net, 2, in));
    PetscCall(DDNetBackward(net, NULL));
    PetscCall(DDOptimizerStep(opt));
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  DDT(step());
  DDT(DDCheckpointSave(net, opt, file)); /* the complete checkpoint a failed save must not spoil */
  /* rank 0 allocates more than the others in a checkpoint's save (the metadata it alone writes): the
     k-th allocation there fails on rank 0 only, which leaves while the others wait in the save's next
     collective (an error raised on one rank alone is not collective in PETSc), so the checkpoint is
     swept on 1 rank and the step on every rank count */
  const bool withckpt = Size() == 1;
  /* on 1 rank also a data set of 6 samples, an epoch of training on it and an evaluation */
  const char  *data = "t11_oom_data.h5", *fields[2] = {"x", "t"};
  DDDataset    ds   = NULL;
  DDTrainStats stats;
  DDTensor     batch[3] = {x, t, NULL};
  if (withckpt) {
    DDTensor xd = MakeInput({{6, 2, 4, 4}, {1, 1, 1, 1}, {}, {}}, DD_FLOAT64, 6), td = MakeInput({{6, 4, 4, 4}, {1, 1, 1, 1}, {}, {}}, DD_FLOAT64, 7);
    DDT(DDTensorWriteHDF5(xd, data, "x", PETSC_FALSE));
    DDT(DDTensorWriteHDF5(td, data, "t", PETSC_TRUE));
    DDT(DDTensorDestroy(&xd));
    DDT(DDTensorDestroy(&td));
    DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
    DDT(DDDatasetSetFile(ds, data));
    DDT(DDDatasetSetFields(ds, 2, fields));
    DDT(DDDatasetSetUp(ds));
  }
  long errors = SweepAllocations(
    "step, checkpoint, epoch", [] {},
    [&](long k) -> PetscErrorCode {
      PetscFunctionBegin;
      PetscCall(step());
      if (withckpt) {
        PetscReal l;
        PetscCall(DDCheckpointSave(net, opt, file));
        PetscCall(DDCheckpointLoad(net, opt, file));
        PetscCall(DDNetTrainEpoch(net, opt, ds, 2, k, batch, &stats));
        PetscCall(DDNetEvaluate(net, ds, 2, batch, &l));
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    },
    [&](long k, bool failed, const std::string &) {
      std::string msg;
      if (!failed) return;
      /* still usable, and the file still a complete checkpoint */
      EXPECT_EQ(Catch([&] { return step(); }, &msg), 0) << "a step after allocation " << k << " failed: " << msg;
      DDT(DDNetGetLoss(net, &loss));
      EXPECT_TRUE(std::isfinite((double)loss)) << "allocation " << k;
      if (!withckpt) return;
      EXPECT_EQ(Catch([&] { return DDCheckpointLoad(net, opt, file); }, &msg), 0) << "the checkpoint after allocation " << k << " does not load: " << msg;
      EXPECT_EQ(Catch([&] { return DDNetTrainEpoch(net, opt, ds, 2, 1, batch, &stats); }, &msg), 0) << "an epoch after allocation " << k << " failed: " << msg;
      EXPECT_TRUE(std::isfinite((double)stats.loss)) << "allocation " << k;
    });
  if (withckpt) EXPECT_GT(errors, 100) << "the C++ allocations of the checkpoint and the epoch were not reached";
  DDT(DDDatasetDestroy(&ds));
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) remove(file);
  if (Rank() == 0 && withckpt) remove(data);
}

/* ---------------------------------------------------------------------- */
/* PETSc allocations under PetscReturnErrorHandler() (which Catch() pushes) */

TEST(OutOfMemory, ReturnErrorHandlerGetsOutOfMemoryWithSizeAndCaller)
{
  double        *a = NULL;
  const size_t   n = (size_t)1 << 42; /* 32 TiB of doubles */
  std::string    msg;
  PetscErrorCode ierr = Catch([&] { return PetscMalloc1(n, &a); }, &msg);
  EXPECT_EQ((int)ierr, (int)PETSC_ERR_MEM) << msg;
  EXPECT_EQ(a, (double *)NULL);
  EXPECT_NE(msg.find("Out of memory: an allocation of " + std::to_string(n * sizeof(double)) + " bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_11_oom.cxx"), std::string::npos) << msg;
}

/* limits this process's address space (RLIMIT_AS) to what it maps now and headroom bytes; old: the
   limit to restore with setrlimit(RLIMIT_AS, old); whether every step succeeded */
static bool LimitAddressSpace(rlim_t headroom, struct rlimit *old)
{
  struct rlimit lim;
  long          pages = 0, rss;
  FILE         *f     = fopen("/proc/self/statm", "r");
  if (!f) return false;
  const bool read = fscanf(f, "%ld %ld", &pages, &rss) == 2;
  fclose(f);
  if (!read || getrlimit(RLIMIT_AS, old)) return false;
  lim          = *old;
  lim.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + headroom;
  if (old->rlim_cur != RLIM_INFINITY && lim.rlim_cur > old->rlim_cur) lim.rlim_cur = old->rlim_cur;
  return setrlimit(RLIMIT_AS, &lim) == 0;
}

/* a tensor too large for the address space this test allows (RLIMIT_AS): DDTensorSetUp()'s
   allocation fails on every rank, an out-of-memory error with its size, no hang */
TEST(OutOfMemory, TensorTooLargeUnderReturnErrorHandler)
{
  struct rlimit  old;
  const PetscInt per = (PetscInt)1 << 27; /* 1 GiB of doubles per rank */
  DDPartition    part;
  DDTensor       x;
  PetscInt       shape[1] = {per * Size()}, ps[1] = {Size()};
  std::vector<PetscMPIInt> ranks(Size());
  for (PetscMPIInt r = 0; r < Size(); r++) ranks[r] = r;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, ps, Size(), ranks.data(), &part));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &x));
  DDT(DDTensorSetPartition(x, part));
  DDT(DDTensorSetShape(x, 1, shape));
  ASSERT_TRUE(LimitAddressSpace((rlim_t)256 << 20, &old)); /* what the process maps now, and 256 MiB */
  std::string    msg;
  PetscErrorCode ierr = Catch([&] { return DDTensorSetUp(x); }, &msg);
  setrlimit(RLIMIT_AS, &old);
  EXPECT_EQ((int)ierr, (int)PETSC_ERR_MEM) << msg;
  EXPECT_NE(msg.find("Out of memory: an allocation of " + std::to_string((long long)per * 8 / 1000)), std::string::npos) << msg; /* 1 GiB and the alignment */
  EXPECT_NE(msg.find("(1 GiB) failed in"), std::string::npos) << msg;
  EXPECT_TRUE(OnEveryRank(ierr == PETSC_ERR_MEM));
  DDT(DDTensorDestroy(&x));
  DDT(DDPartitionDestroy(&part));
}

/* runs f with the address space of the last rank limited to what it maps now and 64 MiB (the
   others unlimited): an allocation of 128 MiB fails on that rank alone */
template <class F>
static PetscErrorCode OnTheLastRankLimited(F &&f, std::string *msg)
{
  struct rlimit old;
  const bool    last = Rank() == Size() - 1;
  if (last) EXPECT_TRUE(LimitAddressSpace((rlim_t)64 << 20, &old)); /* not ASSERT: the other ranks go on into collectives */
  PetscErrorCode ierr = Catch(f, msg);
  if (last) setrlimit(RLIMIT_AS, &old);
  return ierr;
}

/* a tensor's storage that one rank cannot get (the last one's address space is limited): DDTensorSetUp()
   and a later re-layout (DDTensorSetHalo()) fail on every rank with the message naming that rank and
   its request, instead of the failing rank leaving while the others wait in the layout hash's all-reduce
   (they hung before); the ranks that did allocate free it, and a failed re-layout keeps the tensor as it
   was */
TEST(OutOfMemory, TensorStorageOneRankCannotGetFailsOnEveryRank)
{
  const PetscInt           per = (PetscInt)1 << 24; /* 128 MiB of doubles per rank */
  DDPartition              part;
  DDTensor                 x, y;
  PetscInt                 shape[1] = {per * Size()}, ps[1] = {Size()}, small[1] = {8 * Size()}, lo[1] = {0}, hi[1] = {0}, wide[1] = {per / 2};
  std::vector<PetscMPIInt> ranks(Size());
  std::string              msg, who = "rank " + std::to_string(Size() - 1) + " could not allocate its ";
  for (PetscMPIInt r = 0; r < Size(); r++) ranks[r] = r;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, ps, Size(), ranks.data(), &part));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &x));
  DDT(DDTensorSetPartition(x, part));
  DDT(DDTensorSetShape(x, 1, shape));
  PetscErrorCode ierr = OnTheLastRankLimited([&] { return DDTensorSetUp(x); }, &msg);
  EXPECT_EQ((int)ierr, (int)PETSC_ERR_MEM) << msg;
  EXPECT_TRUE(OnEveryRank(ierr == PETSC_ERR_MEM));
  EXPECT_NE(msg.find("cannot be allocated: " + who + std::to_string((long long)per * 8) + " bytes (0.125 GiB) of host memory: Out of memory"), std::string::npos) << msg;
  DDT(DDTensorDestroy(&x));

  /* a small tensor set up, then a halo of 128 MiB asked: the re-layout fails everywhere, the tensor stays */
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &y));
  DDT(DDTensorSetPartition(y, part));
  DDT(DDTensorSetShape(y, 1, small));
  DDT(DDTensorSetUp(y));
  DDT(DDTensorSet(y, 3.0));
  ierr = OnTheLastRankLimited([&] { return DDTensorSetHalo(y, wide, wide); }, &msg);
  EXPECT_EQ((int)ierr, (int)PETSC_ERR_MEM) << msg;
  EXPECT_TRUE(OnEveryRank(ierr == PETSC_ERR_MEM));
  EXPECT_NE(msg.find("cannot be allocated: " + who), std::string::npos) << msg;
  DDT(DDTensorGetHalo(y, lo, hi));
  EXPECT_EQ(lo[0], 0);
  EXPECT_EQ(hi[0], 0);
  PetscReal nrm;
  DDT(DDTensorNorm(y, NORM_1, &nrm));
  EXPECT_EQ(nrm, 3.0 * 8 * Size());
  wide[0] = 2;
  DDT(DDTensorSetHalo(y, wide, wide)); /* and grows when it can */
  DDT(DDTensorNorm(y, NORM_1, &nrm));
  EXPECT_EQ(nrm, 3.0 * 8 * Size());
  DDT(DDTensorDestroy(&y));
  DDT(DDPartitionDestroy(&part));

  /* formats that differ between ranks: only the last rank re-lays its piece out (to channels-last), and
     cannot; the others keep theirs and still take part in the check (no mismatched collectives) */
  PetscInt   s4[4] = {1, 4, 1024 * Size(), 4096}, p4[4] = {1, 1, Size(), 1}; /* 128 MiB of doubles per rank */
  DDTensor   z;
  const bool last = Rank() == Size() - 1;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, p4, Size(), ranks.data(), &part));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &z));
  DDT(DDTensorSetPartition(z, part));
  DDT(DDTensorSetShape(z, 4, s4));
  DDT(DDTensorSetUp(z));
  ierr = OnTheLastRankLimited([&] { return DDTensorSetFormat(z, last ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN); }, &msg);
  EXPECT_EQ((int)ierr, (int)PETSC_ERR_MEM) << msg;
  EXPECT_TRUE(OnEveryRank(ierr == PETSC_ERR_MEM));
  EXPECT_NE(msg.find("cannot be allocated: " + who + std::to_string((long long)4 * 1024 * 4096 * 8) + " bytes"), std::string::npos) << msg;
  DDTensorFormat fmt;
  DDT(DDTensorGetFormat(z, &fmt));
  EXPECT_EQ(fmt, DD_FORMAT_PLAIN);
  DDT(DDTensorSetFormat(z, last ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN)); /* without the limit it does */
  DDT(DDTensorGetFormat(z, &fmt));
  EXPECT_EQ(fmt, last ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN);
  DDT(DDTensorDestroy(&z));
  DDT(DDPartitionDestroy(&part));
}
