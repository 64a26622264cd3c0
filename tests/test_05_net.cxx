/*
  DDNet, DDOptimizer, parallel HDF5, DDDataset, checkpoints: a network from options equals one
  built in code; training on P ranks gives the parameters of training on 1 rank; HDF5 round
  trips across partitions; checkpoint restart on another rank count reproduces the run; bad input.
*/
#include "layertest.hpp"
#include <fstream>
#include <sstream>
#include <petsctime.h>
#include <unistd.h>
#include <hdf5.h>

using namespace ddtest;

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test05_") + std::to_string(getppid()) + "_" + name;
}

/* x (N,1,H,W) -> conv 1->4 k3 p1 -> conv 4->1 k3 p1 -> mse against target */
static DDNet BuildNet(bool fromOptions, const char *prefix = "")
{
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  if (fromOptions) {
    DDT(PetscOptionsInsertString(NULL, "-tn_net_inputs x,target -tn_net_layers c1,c2,loss "
                                       "-tn_c1_layer_type conv -tn_c1_layer_conv_out_channels 4 -tn_c1_layer_conv_kernel 3 -tn_c1_layer_conv_padding 1 "
                                       "-tn_c2_layer_type conv -tn_c2_layer_conv_out_channels 1 -tn_c2_layer_conv_kernel 3 -tn_c2_layer_conv_padding 1 "
                                       "-tn_loss_layer_type loss -tn_loss_layer_inputs c2,target"));
    DDT(DDNetSetOptionsPrefix(net, "tn_"));
    DDT(DDNetSetFromOptions(net));
    return net;
  }
  const char *in[] = {"x", "target"};
  DDT(DDNetSetInputNames(net, 2, in));
  PetscInt k = 3, p = 1;
  DDLayer  c1, c2, loss;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &c1));
  DDT(DDLayerSetType(c1, DDLAYERCONV));
  DDT(DDLayerConvSetOutputChannels(c1, 4));
  DDT(DDLayerConvSetKernel(c1, 1, &k));
  DDT(DDLayerConvSetPadding(c1, 1, &p));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &c2));
  DDT(DDLayerSetType(c2, DDLAYERCONV));
  DDT(DDLayerConvSetOutputChannels(c2, 1));
  DDT(DDLayerConvSetKernel(c2, 1, &k));
  DDT(DDLayerConvSetPadding(c2, 1, &p));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &loss));
  DDT(DDLayerSetType(loss, DDLAYERLOSS));
  const char *lin[] = {"c2", "target"};
  DDT(DDNetAddLayer(net, c1, "c1", 0, NULL));
  DDT(DDNetAddLayer(net, c2, "c2", 0, NULL));
  DDT(DDNetAddLayer(net, loss, "loss", 2, lin));
  DDT(DDLayerDestroy(&c1));
  DDT(DDLayerDestroy(&c2));
  DDT(DDLayerDestroy(&loss));
  (void)prefix;
  return net;
}

static std::vector<std::vector<double>> Params(DDNet net)
{
  PetscInt                         n;
  DDTensor                        *ps;
  std::vector<std::vector<double>> r;
  DDT(DDNetGetParameters(net, &n, &ps, NULL));
  for (PetscInt i = 0; i < n; i++) r.push_back(GatherAll(ps[i]));
  return r;
}

/* trains `steps` steps on fixed random batches; data on the given partition */
static std::vector<std::vector<double>> Train(const InputSpec &xs, const InputSpec &ts, const char *opttype, int steps, PetscReal *lastloss)
{
  DDTensor x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(ts, DD_FLOAT64, 6);
  DDNet    net = BuildNet(false);
  DDTensor in[2] = {x, t};
  DDT(DDNetSetUp(net, 2, in));
  DDOptimizer opt;
  PetscInt    n;
  DDTensor   *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, opttype));
  DDT(DDOptimizerSetLearningRate(opt, 0.05));
  if (std::string(opttype) == "sgd") DDT(DDOptimizerSetMomentum(opt, 0.9, PETSC_FALSE));
  DDT(DDOptimizerSetWeightDecay(opt, 1e-3));
  DDT(DDOptimizerSetClipNorm(opt, 5.0));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  for (int s = 0; s < steps; s++) {
    DDT(DDTensorSetRandomGlobal(x, 100 + s, -1, 1));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, lastloss));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
  }
  auto r = Params(net);
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  return r;
}

TEST(Net, FromOptionsEqualsInCode)
{
  DDTensor x = MakeInput({{2, 1, 6, 4 * Size()}, {1, 1, 1, Size()}, {}, {}}, DD_FLOAT64, 1), t = MakeInput({{2, 1, 6, 4 * Size()}, {1, 1, 1, Size()}, {}, {}}, DD_FLOAT64, 2);
  DDTensor in[2] = {x, t};
  DDNet    a = BuildNet(false), b = BuildNet(true);
  DDT(DDNetSetUp(a, 2, in));
  DDT(DDNetSetUp(b, 2, in));
  EXPECT_EQ(Params(a), Params(b));
  PetscReal la, lb;
  DDT(DDNetForward(a, 2, in));
  DDT(DDNetGetLoss(a, &la));
  DDT(DDNetForward(b, 2, in));
  DDT(DDNetGetLoss(b, &lb));
  EXPECT_EQ(la, lb);
  PetscInt64 np;
  DDT(DDNetGetNumParameters(b, &np));
  EXPECT_EQ(np, (1 * 4 * 9 + 4) + (4 * 1 * 9 + 1));
  PetscViewer v;
  DDT(PetscViewerASCIIOpen(PETSC_COMM_WORLD, "/dev/null", &v));
  DDT(DDNetView(b, v));
  DDT(PetscViewerDestroy(&v));
  DDT(DDNetDestroy(&a));
  DDT(DDNetDestroy(&b));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

TEST(Net, TrainingOnPRanksEqualsOneRank)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (const char *type : {"sgd", "adam", "adamw"})
    for (auto &ps : {f.front(), f.back()}) {
      InputSpec xs{{2 * ps[0], 1, 6 * ps[1] + 1, 7}, {ps[0], 1, ps[1], 1}, {}, {}};
      InputSpec ts = xs;
      PetscReal lp, ls;
      auto      par = Train(xs, ts, type, 4, &lp), ser = Train(Serial(xs), Serial(ts), type, 4, &ls);
      ASSERT_EQ(par.size(), ser.size());
      for (size_t i = 0; i < par.size(); i++) EXPECT_LT(RelDiff(par[i], ser[i]), 1e-11) << type << " parameter " << i;
      EXPECT_NEAR(lp, ls, 1e-11 * ls) << type;
    }
}

TEST(Net, LossDecreases)
{
  InputSpec xs{{4, 1, 8, 8}, {1, 1, 1, Size() > 1 ? 2 : 1}, {}, {}};
  DDTensor  x = MakeInput(xs, DD_FLOAT64, 3), t;
  DDT(DDTensorDuplicate(x, &t));
  DDT(DDTensorCopy(x, t));
  DDT(DDTensorScale(t, -0.5)); /* learn y = -x/2 */
  DDTensor in[2] = {x, t};
  DDNet    net = BuildNet(false);
  DDT(DDNetSetUp(net, 2, in));
  DDOptimizer opt;
  PetscInt    n;
  DDTensor   *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, DDOPTIMIZERADAM));
  DDT(DDOptimizerSetLearningRate(opt, 0.01));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  PetscReal first = 0, last = 0;
  for (int s = 0; s < 60; s++) {
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, &last));
    if (!s) first = last;
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
  }
  EXPECT_LT(last, 0.1 * first);
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/*
  DDNetBackward zeroes only the gradients summed over several consumers; every other one must be
  overwritten by its consumer's backward. A net of every hot-path layer type (conv with 6 < 16
  output channels, ReLU, pooling, upsampling, a skip concatenation, a tensor with two consumers):
  the gradients of a step on input B after a step on input A (stale gradients everywhere) equal,
  bit for bit, those of a fresh net's step on B, in both precisions.
*/
static void StepGradients(DDNet net, DDTensor x, DDTensor t, DDTensor dx, std::vector<std::vector<double>> &g)
{
  DDTensor in[2] = {x, t};
  PetscInt n;
  DDTensor *ps, *gs;
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetZeroGradients(net));
  DDT(DDNetBackward(net, NULL));
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  g.clear();
  for (PetscInt i = 0; i < n; i++) g.push_back(GatherAll(gs[i]));
  g.push_back(GatherAll(dx));
}

/* A step taken after a step on other data gives the same gradients, bit for bit, as a fresh network's step
   (the network of options prefix `prefix`; inputs x of spec xs and target of spec ts), float32 and float64 */
static void ExpectStaleStepEqualsFresh(const char *prefix, const InputSpec &xs, const InputSpec &ts, int seed)
{
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    DDTensor xa = MakeInput(xs, dt, seed), xb = MakeInput(xs, dt, seed + 1), t = MakeInput(ts, dt, seed + 2);
    std::vector<std::vector<double>> stale, fresh;
    for (int run = 0; run < 2; run++) {
      DDNet    net;
      DDTensor in[2] = {xa, t}, dx;
      DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
      DDT(DDNetSetOptionsPrefix(net, prefix));
      DDT(DDNetSetFromOptions(net));
      DDT(DDNetSetUp(net, 2, in));
      DDT(DDNetGetInputGradient(net, 0, &dx));
      if (run == 0) StepGradients(net, xa, t, dx, stale); /* leaves every gradient non-zero */
      StepGradients(net, xb, t, dx, run == 0 ? stale : fresh);
      DDT(DDNetDestroy(&net));
    }
    ASSERT_EQ(stale.size(), fresh.size());
    for (size_t i = 0; i < stale.size(); i++) {
      EXPECT_EQ(stale[i], fresh[i]) << DDDataTypes[dt] << " gradient " << i;
      double nrm = 0;
      for (double v : fresh[i]) nrm += v * v;
      EXPECT_GT(nrm, 0) << DDDataTypes[dt] << " gradient " << i;
    }
    DDT(DDTensorDestroy(&xa));
    DDT(DDTensorDestroy(&xb));
    DDT(DDTensorDestroy(&t));
  }
}

TEST(Net, BackwardWithStaleGradientsEqualsFreshNet)
{
  DDT(PetscOptionsInsertString(NULL, "-sg_net_inputs x,target -sg_net_layers c1,a1,p1,c2,a2,u1,k1,c3,loss "
                                     "-sg_c1_layer_type conv -sg_c1_layer_conv_out_channels 6 -sg_c1_layer_conv_kernel 3 -sg_c1_layer_conv_padding 1 "
                                     "-sg_a1_layer_type activation -sg_p1_layer_type pool -sg_p1_layer_pool_type max -sg_p1_layer_pool_kernel 2 "
                                     "-sg_c2_layer_type conv -sg_c2_layer_conv_out_channels 16 -sg_c2_layer_conv_kernel 3 -sg_c2_layer_conv_padding 1 "
                                     "-sg_a2_layer_type activation -sg_u1_layer_type upsample -sg_u1_layer_upsample_scale 2 -sg_u1_layer_upsample_mode linear "
                                     "-sg_k1_layer_type concat -sg_k1_layer_inputs u1,a1 "
                                     "-sg_c3_layer_type conv -sg_c3_layer_conv_out_channels 1 -sg_c3_layer_conv_kernel 3 -sg_c3_layer_conv_padding 1 "
                                     "-sg_loss_layer_type loss -sg_loss_layer_inputs c3,target"));
  InputSpec xs{{2, 1, 8, 8 * Size()}, {1, 1, 1, Size()}, {}, {}};
  ExpectStaleStepEqualsFresh("sg_", xs, xs, 11);
}

/* The same for the other layer kinds: each backward must overwrite (not add to) its input gradient, which
   DDNetBackward relies on for gradients with one consumer (it zeroes only those summed over several) */
TEST(Net, BackwardWithStaleGradientsEqualsFreshNetOtherLayers)
{
  std::string o = "-sh_net_inputs x,target -sh_net_layers c1,bn,a1,s1,ad,gn,ct,pa,ln,af,a2,c2,loss "
                  "-sh_c1_layer_type conv -sh_c1_layer_conv_out_channels 4 -sh_c1_layer_conv_kernel 3 -sh_c1_layer_conv_padding 1 "
                  "-sh_bn_layer_type batchnorm -sh_a1_layer_type activation -sh_a1_layer_activation_type gelu "
                  "-sh_s1_layer_type spectral -sh_s1_layer_spectral_modes 2,2 "
                  "-sh_ad_layer_type add -sh_ad_layer_inputs s1,a1 -sh_gn_layer_type groupnorm -sh_gn_layer_groupnorm_groups 2 "
                  "-sh_ct_layer_type convtranspose -sh_ct_layer_convtranspose_out_channels 3 -sh_ct_layer_convtranspose_kernel 2 -sh_ct_layer_convtranspose_stride 2 "
                  "-sh_pa_layer_type pool -sh_pa_layer_pool_type avg -sh_pa_layer_pool_kernel 2 "
                  "-sh_ln_layer_type layernorm -sh_ln_layer_layernorm_dims 1 "
                  "-sh_af_layer_type affine -sh_af_layer_affine_out_features 8 " /* over W, with H split */
                  "-sh_a2_layer_type activation -sh_a2_layer_activation_type tanh "
                  "-sh_c2_layer_type conv -sh_c2_layer_conv_out_channels 1 -sh_c2_layer_conv_kernel 3 -sh_c2_layer_conv_padding 1 "
                  "-sh_loss_layer_type loss -sh_loss_layer_inputs c2,target";
  DDT(PetscOptionsInsertString(NULL, o.c_str()));
  ExpectStaleStepEqualsFresh("sh_", {{2, 2, 8 * Size(), 8}, {1, 1, Size(), 1}, {}, {}}, {{2, 1, 8 * Size(), 8}, {1, 1, Size(), 1}, {}, {}}, 21);
}

TEST(HDF5, WriteOnOnePartitionReadOnAnother)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  std::string file = Tmp("io.h5");
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    InputSpec a{{3, 5, 7}, f.front(), {}, {}}, b{{3, 5, 7}, f.back(), {}, {}};
    a.fmt       = DD_FORMAT_CHANNELS_LAST;
    DDTensor x  = MakeInput(a, dt, 9), y = MakeInput(b, dt, 1);
    DDT(DDTensorWriteHDF5(x, file.c_str(), "group/x", PETSC_FALSE));
    DDT(DDTensorReadHDF5(y, file.c_str(), "group/x"));
    EXPECT_EQ(GatherAll(x), GatherAll(y));
    /* on a 1-rank partition too */
    DDTensor z = MakeInput(Serial(b), dt, 2);
    DDT(DDTensorReadHDF5(z, file.c_str(), "group/x"));
    EXPECT_EQ(GatherAll(x), GatherAll(z));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
    DDT(DDTensorDestroy(&z));
  }
  if (Rank() == 0) unlink(file.c_str());
}

TEST(HDF5, DatasetBatchesArePartitionIndependent)
{
  int         W    = Size();
  std::string file = Tmp("ds.h5");
  const PetscInt S = 10;
  /* samples of shape (2, 4, 3W) written one by one */
  DDTensor s = MakeInput({{2, 4, 3 * W}, {1, 1, W}, {}, {}}, DD_FLOAT64, 1);
  for (PetscInt i = 0; i < S; i++) {
    DDT(DDTensorSetRandomGlobal(s, 50 + i, -1, 1));
    DDT(DDTensorWriteHDF5Slice(s, file.c_str(), "input", i, S));
  }
  std::vector<std::vector<double>> batches[2];
  for (int variant = 0; variant < 2; variant++) {
    DDDataset ds;
    DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
    DDT(DDDatasetSetFile(ds, file.c_str()));
    const char *fields[] = {"input"};
    DDT(DDDatasetSetFields(ds, 1, fields));
    DDT(DDDatasetSetUp(ds));
    DDT(DDDatasetShuffle(ds, 77));
    InputSpec bs{{3, 2, 4, 3 * W}, variant ? std::vector<PetscInt>{W > 2 ? 3 : W, 1, 1, 1} : std::vector<PetscInt>{1, 1, 1, W}, {}, {}};
    if (variant && W > 2) bs.ranks = {0, 1, 2};
    DDTensor b = MakeInput(bs, DD_FLOAT64, 0);
    for (PetscInt k = 0; k + 3 <= S; k += 3) {
      DDT(DDDatasetReadBatch(ds, 0, k, 3, b));
      batches[variant].push_back(GatherAll(b));
    }
    /* each batch row is the sample the order names */
    const PetscInt *order;
    DDT(DDDatasetGetOrder(ds, &order));
    DDT(DDTensorSetRandomGlobal(s, 50 + order[1], -1, 1));
    auto row = GatherAll(s);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), batches[variant][0].begin() + row.size()));
    DDT(DDTensorDestroy(&b));
    DDT(DDDatasetDestroy(&ds));
  }
  EXPECT_EQ(batches[0], batches[1]);
  DDT(DDTensorDestroy(&s));
  if (Rank() == 0) unlink(file.c_str());
}

TEST(Checkpoint, RestartOnAnotherRankCountReproducesTheRun)
{
  int W = Size();
  std::string file = Tmp("ckpt.h5");
  for (const char *type : {"sgd", "adam"}) {
    /* uninterrupted: 6 steps on all ranks */
    InputSpec xs{{2, 1, 7, 4 * W}, {1, 1, 1, W}, {}, {}};
    PetscReal l;
    auto      full = Train(xs, xs, type, 6, &l);
    /* 3 steps on all ranks, save; load on fewer ranks (a subset), 3 more steps */
    DDTensor x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6);
    DDTensor in[2] = {x, t};
    DDNet    net = BuildNet(false);
    DDT(DDNetSetUp(net, 2, in));
    DDOptimizer opt;
    PetscInt    n;
    DDTensor   *ps, *gs;
    auto makeopt = [&](DDNet nt, DDOptimizer *o) {
      DDT(DDNetGetParameters(nt, &n, &ps, &gs));
      DDT(DDOptimizerCreate(PETSC_COMM_WORLD, o));
      DDT(DDOptimizerSetType(*o, type));
      DDT(DDOptimizerSetLearningRate(*o, 0.05));
      if (std::string(type) == "sgd") DDT(DDOptimizerSetMomentum(*o, 0.9, PETSC_FALSE));
      DDT(DDOptimizerSetWeightDecay(*o, 1e-3));
      DDT(DDOptimizerSetClipNorm(*o, 5.0));
      DDT(DDOptimizerSetUp(*o, n, ps, gs));
    };
    makeopt(net, &opt);
    auto step = [&](DDNet nt, DDOptimizer o, DDTensor *inp, int s) {
      DDT(DDTensorSetRandomGlobal(inp[0], 100 + s, -1, 1));
      DDT(DDNetForward(nt, 2, inp));
      DDT(DDNetZeroGradients(nt));
      DDT(DDNetBackward(nt, NULL));
      DDT(DDOptimizerStep(o));
    };
    for (int s = 0; s < 3; s++) step(net, opt, in, s);
    DDT(DDCheckpointSave(net, opt, file.c_str()));
    DDT(DDOptimizerDestroy(&opt));
    DDT(DDNetDestroy(&net));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&t));
    int       Q = W > 1 ? W - 1 : 1;
    InputSpec q{{2, 1, 7, 4 * W}, {1, 1, 1, Q}, {}, {}};
    for (int r = 0; r < Q; r++) q.ranks.push_back(W - 1 - r); /* other ranks, other order */
    DDTensor x2 = MakeInput(q, DD_FLOAT64, 5), t2 = MakeInput(q, DD_FLOAT64, 6);
    DDTensor in2[2] = {x2, t2};
    DDNet    net2   = BuildNet(false);
    DDT(DDNetSetUp(net2, 2, in2));
    DDOptimizer opt2;
    makeopt(net2, &opt2);
    DDT(DDCheckpointLoad(net2, opt2, file.c_str()));
    PetscInt st, ep;
    DDT(DDOptimizerGetStepCount(opt2, &st, &ep));
    EXPECT_EQ(st, 3);
    for (int s = 3; s < 6; s++) step(net2, opt2, in2, s);
    auto resumed = Params(net2);
    ASSERT_EQ(full.size(), resumed.size());
    for (size_t i = 0; i < full.size(); i++) EXPECT_LT(RelDiff(resumed[i], full[i]), 1e-11) << type << " parameter " << i;
    DDT(DDOptimizerDestroy(&opt2));
    DDT(DDNetDestroy(&net2));
    DDT(DDTensorDestroy(&x2));
    DDT(DDTensorDestroy(&t2));
  }
  if (Rank() == 0) unlink(file.c_str());
}

/* ---------------------------------------------------------------------- */

TEST(IOBadInput, MissingFileDatasetShapeTypeTruncation)
{
  std::string file = Tmp("bad.h5"), trunc = Tmp("trunc.h5");
  DDTensor    x    = MakeInput({{4, 6}, {1, Size()}, {}, {}}, DD_FLOAT64, 1), y = MakeInput({{4, 7}, {1, Size()}, {}, {}}, DD_FLOAT64, 1);
  DD_EXPECT_ERROR(DDTensorReadHDF5(x, "/nonexistent/dir/file.h5", "x"), PETSC_ERR_FILE_OPEN, "/nonexistent/dir/file.h5");
  DDT(DDTensorWriteHDF5(x, file.c_str(), "x", PETSC_FALSE));
  DD_EXPECT_ERROR(DDTensorReadHDF5(x, file.c_str(), "nothere"), PETSC_ERR_FILE_UNEXPECTED, "has no dataset \"nothere\"");
  DD_EXPECT_ERROR(DDTensorReadHDF5(y, file.c_str(), "x"), PETSC_ERR_FILE_UNEXPECTED, "has shape 4x6, the tensor 4x7");
  /* an integer dataset (written with h5py's help-free C API on rank 0) */
  if (Rank() == 0) {
    hid_t   f    = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t d[2] = {4, 6};
    hid_t   sp   = H5Screate_simple(2, d, NULL);
    hid_t   ds   = H5Dcreate2(f, "ints", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int> v(24, 1);
    H5Dwrite(ds, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  DD_EXPECT_ERROR(DDTensorReadHDF5(x, file.c_str(), "ints"), PETSC_ERR_FILE_UNEXPECTED, "not floating point");
  /* a truncated file */
  if (Rank() == 0) {
    std::ifstream in(file, std::ios::binary);
    std::string   bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(trunc, std::ios::binary);
    out.write(bytes.data(), (std::streamsize)(bytes.size() / 3));
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  std::string m;
  PetscErrorCode e = Catch([&]() { return DDTensorReadHDF5(x, trunc.c_str(), "x"); }, &m);
  EXPECT_NE(e, 0) << "reading a truncated file must fail";
  EXPECT_NE(m.find("trunc.h5"), std::string::npos) << m;
  /* datasets */
  DDDataset ds;
  DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
  DDT(DDDatasetSetFile(ds, file.c_str()));
  const char *fields[] = {"x", "missing"};
  DDT(DDDatasetSetFields(ds, 2, fields));
  DD_EXPECT_ERROR(DDDatasetSetUp(ds), PETSC_ERR_FILE_UNEXPECTED, "has no dataset \"missing\"");
  DDT(DDDatasetDestroy(&ds));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
  if (Rank() == 0) {
    unlink(file.c_str());
    unlink(trunc.c_str());
  }
}

TEST(NetBadInput, UnknownLayerTypeAndMissingInput)
{
  DDNet net;
  DDT(PetscOptionsInsertString(NULL, "-b1_net_inputs x -b1_net_layers a -b1_a_layer_type convolution"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "b1_"));
  DD_EXPECT_ERROR(DDNetSetFromOptions(net), PETSC_ERR_ARG_UNKNOWN_TYPE, "convolution");
  DDT(DDNetDestroy(&net));
  DDT(PetscOptionsInsertString(NULL, "-b2_net_inputs x -b2_net_layers a -b2_a_layer_type conv -b2_a_layer_inputs y"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "b2_"));
  DD_EXPECT_ERROR(DDNetSetFromOptions(net), PETSC_ERR_ARG_WRONG, "takes input \"y\", which is neither");
  DDT(DDNetDestroy(&net));
  for (auto o : {"-b1_net_inputs", "-b1_net_layers", "-b1_a_layer_type", "-b2_net_inputs", "-b2_net_layers", "-b2_a_layer_type", "-b2_a_layer_inputs"}) DDT(PetscOptionsClearValue(NULL, o));
  /* DDNetBackward(net, NULL) on a network whose output is not a loss: an error naming the output
     layer, on every rank (it had crashed in the convolution's backward) */
  DDT(PetscOptionsInsertString(NULL, "-b3_net_inputs x -b3_net_layers c -b3_c_layer_type conv -b3_c_layer_conv_out_channels 2 -b3_c_layer_conv_kernel 3 -b3_c_layer_conv_padding 1"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "b3_"));
  DDT(DDNetSetFromOptions(net));
  DDTensor x = MakeInput({{1, 1, 4 * Size(), 5}, {1, 1, Size(), 1}, {}, {}}, DD_FLOAT64, 4), y, dy;
  DDT(DDNetSetUp(net, 1, &x));
  DDT(DDNetForward(net, 1, &x));
  DD_EXPECT_ERROR(DDNetBackward(net, NULL), PETSC_ERR_ARG_NULL, "dy is NULL, and the network's output layer \"c\" is a conv, not a loss");
  DDT(DDNetGetOutput(net, &y));
  DDT(DDTensorDuplicate(y, &dy));
  DDT(DDTensorSet(dy, 1.0));
  DDT(DDNetBackward(net, dy)); /* and with one, it runs */
  DDT(DDTensorDestroy(&dy));
  DDT(DDTensorDestroy(&x));
  DDT(DDNetDestroy(&net));
  for (auto o : {"-b3_net_inputs", "-b3_net_layers", "-b3_c_layer_type", "-b3_c_layer_conv_out_channels", "-b3_c_layer_conv_kernel", "-b3_c_layer_conv_padding"}) DDT(PetscOptionsClearValue(NULL, o));
}

TEST(CheckpointBadInput, OtherNetworkAndPreviousCheckpointIntact)
{
  std::string file = Tmp("ck2.h5");
  InputSpec   xs{{2, 1, 6, 4 * Size()}, {1, 1, 1, Size()}, {}, {}};
  DDTensor    x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6);
  DDTensor    in[2] = {x, t};
  DDNet       net   = BuildNet(false);
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDCheckpointSave(net, NULL, file.c_str()));
  auto saved = Params(net);
  /* another network: one conv with 3 channels */
  DDNet       other;
  const char *ins[] = {"x", "target"};
  DDT(DDNetCreate(PETSC_COMM_WORLD, &other));
  DDT(DDNetSetInputNames(other, 2, ins));
  DDLayer  c, loss;
  PetscInt k = 3, p = 1;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &c));
  DDT(DDLayerSetType(c, DDLAYERCONV));
  DDT(DDLayerConvSetOutputChannels(c, 1));
  DDT(DDLayerConvSetKernel(c, 1, &k));
  DDT(DDLayerConvSetPadding(c, 1, &p));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &loss));
  DDT(DDLayerSetType(loss, DDLAYERLOSS));
  const char *lin[] = {"c1", "target"};
  DDT(DDNetAddLayer(other, c, "c1", 0, NULL));
  DDT(DDNetAddLayer(other, loss, "loss", 2, lin));
  DDT(DDNetSetUp(other, 2, in));
  DD_EXPECT_ERROR(DDCheckpointLoad(other, NULL, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "is from another network");
  /* a failed save (no such directory) leaves the previous checkpoint loadable */
  DD_EXPECT_ERROR(DDCheckpointSave(net, NULL, "/nonexistent/dir/ck.h5"), PETSC_ERR_FILE_OPEN, "/nonexistent/dir/ck.h5.tmp");
  DDT(DDNetInitializeParameters(net, 99));
  DDT(DDCheckpointLoad(net, NULL, file.c_str()));
  EXPECT_EQ(Params(net), saved);
  DDT(DDLayerDestroy(&c));
  DDT(DDLayerDestroy(&loss));
  DDT(DDNetDestroy(&other));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  if (Rank() == 0) unlink(file.c_str());
}

TEST(NetNonFinite, CheckFiniteNamesStepLayerAndTensor)
{
  int       W = Size();
  InputSpec xs{{2, 1, 6, 4 * W}, {1, 1, 1, W}, {}, {}};
  DDTensor  x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6), in[2] = {x, t};
  DDNet     net = BuildNet(false);
  DDT(DDNetSetCheckFinite(net, PETSC_TRUE));
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetForward(net, 2, in)); /* finite: no error */
  DDT(DDTensorAXPY(x, (PetscReal)NAN, x));
  DD_EXPECT_ERROR(DDNetForward(net, 2, in), PETSC_ERR_FP, "Non-finite value (nan) in the output of layer \"c1\" (conv) at step 2");
  DDT(DDNetDestroy(&net));
  /* backward: an inf output gradient gives a non-finite input gradient of c2 (the output here) */
  DDT(DDTensorSetRandomGlobal(x, 3, -1, 1));
  net = BuildNet(false);
  DDT(DDNetSetOutput(net, "c2"));
  DDT(DDNetSetCheckFinite(net, PETSC_TRUE));
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetForward(net, 2, in));
  DDTensor y, dy;
  DDT(DDNetGetOutput(net, &y));
  DDT(DDTensorDuplicate(y, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 4, -1, 1));
  DDT(DDTensorAXPY(dy, (PetscReal)INFINITY, dy));
  DD_EXPECT_ERROR(DDNetBackward(net, dy), PETSC_ERR_FP, "in the gradient of input 0 (\"c1\") of layer \"c2\"");
  DDT(DDTensorDestroy(&dy));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}


/* an input changed after DDNetForward() read it, on one rank only (through the tensor, or through a PETSc Vec on
   its storage): DDNetBackward() fails on every rank, naming the input and the layer, before any layer's backward
   (none left waiting in an exchange); a forward again makes the backward run */
TEST(NetBadInput, InputChangedOnOneRankAfterForward)
{
  int       W = Size();
  InputSpec xs{{2, 1, 6, 4 * W}, {1, 1, 1, W}, {}, {}};
  DDTensor  x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6), in[2] = {x, t};
  DDNet     net = BuildNet(false);
  DDT(DDNetSetUp(net, 2, in));
  for (int how = 0; how < 3; how++) {
    DDT(DDNetForward(net, 2, in));
    if (Rank() == Size() - 1) {
      if (how == 0) { /* through the tensor's array */
        void *a;
        DDT(DDTensorGetArray(x, &a));
        ((double *)a)[0] += 1;
        DDT(DDTensorRestoreArray(x, &a));
      } else if (how == 1) DDT(DDTensorScale(t, 2.0)); /* the loss's second input */
    }
    if (how == 2) { /* through a Vec sharing the target's storage (x has the convolution's halo: no Vec can share it), on every rank */
      Vec v;
      DDT(DDTensorCreateVec(t, &v));
      DDT(VecScale(v, 0.5));
      DDT(VecDestroy(&v));
    }
    DD_EXPECT_ERROR(DDNetBackward(net, NULL), PETSC_ERR_ARG_WRONGSTATE, how ? "input 1 (the network's input \"target\") of layer \"loss\" was modified after DDNetForward()" : "input 0 (the network's input \"x\") of layer \"c1\" was modified after DDNetForward()");
  }
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetBackward(net, NULL));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/* -net_layer_timing: each layer's forward and backward timed inside the network's sweeps (issue 16 item 4's measured side) */
TEST(Net, LayerTimingInTheSweeps)
{
  int       W = Size();
  InputSpec xs{{2, 1, 6, 4 * W}, {1, 1, 1, W}, {}, {}};
  DDTensor  x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6), in[2] = {x, t};
  DDNet     net = BuildNet(false);
  PetscReal f, b;
  DDT(DDNetSetUp(net, 2, in));
  DD_EXPECT_ERROR(DDNetGetLayerTimes(net, 0, &f, &b), PETSC_ERR_ARG_WRONGSTATE, "layer timing is off");
  DDT(DDNetSetLayerTiming(net, PETSC_TRUE));
  DD_EXPECT_ERROR(DDNetGetLayerTimes(net, 3, &f, &b), PETSC_ERR_ARG_OUTOFRANGE, "layer 3 does not exist (the network has 3)");
  DD_EXPECT_ERROR(DDNetGetLayerTimes(net, -1, &f, &b), PETSC_ERR_ARG_OUTOFRANGE, "layer -1 does not exist");
  for (PetscInt i = 0; i < 3; i++) { /* nothing run since timing began */
    DDT(DDNetGetLayerTimes(net, i, &f, &b));
    EXPECT_EQ(f, -1);
    EXPECT_EQ(b, -1);
  }
  for (int s = 0; s < 2; s++) {
    PetscLogDouble t0, t1, t2;
    DDT(PetscTime(&t0));
    DDT(DDNetForward(net, 2, in));
    DDT(PetscTime(&t1));
    double sum = 0;
    for (PetscInt i = 0; i < 3; i++) {
      DDT(DDNetGetLayerTimes(net, i, &f, NULL));
      EXPECT_GT(f, 0) << "layer " << i;
      sum += f;
      DDT(DDNetGetLayerTimes(net, i, NULL, &b));
      if (s == 0) EXPECT_EQ(b, -1) << "layer " << i << ": no backward yet";
    }
    EXPECT_LE(sum, t1 - t0); /* the layers' times are parts of the sweep's */
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(PetscTime(&t2));
    sum = 0;
    for (PetscInt i = 0; i < 3; i++) {
      DDT(DDNetGetLayerTimes(net, i, NULL, &b));
      EXPECT_GT(b, 0) << "layer " << i;
      sum += b;
    }
    EXPECT_LE(sum, t2 - t1);
  }
  { /* DDNetView: the measured columns beside the model's */
    std::string file = Tmp("view.txt");
    PetscViewer v;
    DDT(PetscViewerASCIIOpen(PETSC_COMM_WORLD, file.c_str(), &v));
    DDT(DDNetView(net, v));
    DDT(PetscViewerDestroy(&v));
    std::ifstream     is(file);
    std::stringstream ss;
    ss << is.rdbuf();
    EXPECT_NE(ss.str().find("meas fwd  meas bwd"), std::string::npos) << ss.str();
    DDT(MPI_Barrier(PETSC_COMM_WORLD));
    if (Rank() == 0) unlink(file.c_str());
  }
  if (Size() > 1) { /* on for some ranks only: the view's per-layer all-reduces would not match; an error names it */
    std::string file = Tmp("view2.txt");
    PetscViewer v;
    DDT(DDNetSetLayerTiming(net, Rank() == 0 ? PETSC_TRUE : PETSC_FALSE));
    DDT(PetscViewerASCIIOpen(PETSC_COMM_WORLD, file.c_str(), &v));
    DD_EXPECT_ERROR(DDNetView(net, v), PETSC_ERR_ARG_INCOMP, "the layer timing (-net_layer_timing");
    DDT(PetscViewerDestroy(&v));
    DDT(MPI_Barrier(PETSC_COMM_WORLD));
    if (Rank() == 0) unlink(file.c_str());
    DDT(DDNetSetLayerTiming(net, PETSC_TRUE));
  }
  /* off and on again: the times taken so far are forgotten */
  DDT(DDNetSetLayerTiming(net, PETSC_FALSE));
  DDT(DDNetSetLayerTiming(net, PETSC_TRUE));
  DDT(DDNetGetLayerTimes(net, 1, &f, &b));
  EXPECT_EQ(f, -1);
  EXPECT_EQ(b, -1);
  DDT(DDNetDestroy(&net));
  /* the option, with the network's prefix */
  DDT(PetscOptionsSetValue(NULL, "-tn_net_layer_timing", "1"));
  net = BuildNet(true);
  DDT(PetscOptionsClearValue(NULL, "-tn_net_layer_timing"));
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetGetLayerTimes(net, 0, &f, &b));
  EXPECT_GT(f, 0);
  EXPECT_EQ(b, -1);
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/*
  concat(c1, c1) -> 1x1 conv with weights [W1 W2] is c1 -> 1x1 conv with W1 + W2: the same output,
  and the same gradients of c1's parameters and of the input (the backward used to give both
  occurrences one buffer, so the second gradient overwrote the first and was added twice)
*/
TEST(Net, OneLayerTakingATensorTwice)
{
  DDT(PetscOptionsInsertString(NULL, "-ca_net_inputs x -ca_net_layers c1,cat,c2 -ca_c1_layer_type conv -ca_c1_layer_conv_out_channels 3 -ca_c1_layer_conv_kernel 3 -ca_c1_layer_conv_padding 1 "
                                     "-ca_cat_layer_type concat -ca_cat_layer_inputs c1,c1 -ca_c2_layer_type conv -ca_c2_layer_conv_out_channels 2 -ca_c2_layer_conv_kernel 1 "
                                     "-cb_net_inputs x -cb_net_layers c1,c2 -cb_c1_layer_type conv -cb_c1_layer_conv_out_channels 3 -cb_c1_layer_conv_kernel 3 -cb_c1_layer_conv_padding 1 "
                                     "-cb_c2_layer_type conv -cb_c2_layer_conv_out_channels 2 -cb_c2_layer_conv_kernel 1"));
  const PetscInt P = Size() <= 6 ? Size() : 1;
  for (bool split : {false, true}) {
    DDTensor x = MakeInput({{2, 2, 6, 5}, {1, 1, split ? P : 1, 1}, {}, {}}, DD_FLOAT64, 7);
    DDNet    a, b;
    for (auto [net, pfx] : {std::pair<DDNet *, const char *>{&a, "ca_"}, {&b, "cb_"}}) {
      DDT(DDNetCreate(PETSC_COMM_WORLD, net));
      DDT(DDNetSetOptionsPrefix(*net, pfx));
      DDT(DDNetSetFromOptions(*net));
      DDT(DDNetSetUp(*net, 1, &x));
    }
    PetscInt  na, nb;
    DDTensor *pa, *ga, *pb, *gb;
    DDT(DDNetGetParameters(a, &na, &pa, &ga));
    DDT(DDNetGetParameters(b, &nb, &pb, &gb));
    ASSERT_EQ(na, 4);
    ASSERT_EQ(nb, 4);
    for (int i = 0; i < 2; i++) DDT(DDTensorCopy(pa[i], pb[i])); /* c1 alike */
    std::vector<double> w = GatherAll(pa[2]), wb(6); /* (2, 6, 1, 1) -> (2, 3, 1, 1): W1 + W2 */
    for (int o = 0; o < 2; o++)
      for (int c = 0; c < 3; c++) wb[o * 3 + c] = w[o * 6 + c] + w[o * 6 + 3 + c];
    DDT(DDTensorSetValuesGlobal(pb[2], wb.data()));
    DDT(DDTensorCopy(pa[3], pb[3]));
    DDTensor dxa, dxb, ya, yb, dy;
    DDT(DDNetGetInputGradient(a, 0, &dxa));
    DDT(DDNetGetInputGradient(b, 0, &dxb));
    DDT(DDNetForward(a, 1, &x));
    DDT(DDNetForward(b, 1, &x));
    DDT(DDNetGetOutput(a, &ya));
    DDT(DDNetGetOutput(b, &yb));
    EXPECT_LT(RelDiff(GatherAll(ya), GatherAll(yb)), 1e-13);
    DDT(DDTensorDuplicate(ya, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 11, -1, 1));
    for (int rep = 0; rep < 2; rep++) { /* twice: the buffers are reused */
      DDT(DDNetZeroGradients(a));
      DDT(DDNetZeroGradients(b));
      DDT(DDNetBackward(a, dy));
      DDT(DDNetBackward(b, dy));
      for (int i = 0; i < 2; i++) EXPECT_LT(RelDiff(GatherAll(ga[i]), GatherAll(gb[i])), 1e-12) << "c1 parameter " << i << (split ? ", split" : "");
      EXPECT_LT(RelDiff(GatherAll(dxa), GatherAll(dxb)), 1e-12) << "the input gradient" << (split ? ", split" : "");
    }
    DDT(DDTensorDestroy(&dy));
    DDT(DDNetDestroy(&a));
    DDT(DDNetDestroy(&b));
    DDT(DDTensorDestroy(&x));
  }
}

/* misuse of the graph API: a layer object twice, input names that repeat, another output or layer after set-up */
TEST(NetBadInput, LayerTwiceRepeatedInputsAndChangesAfterSetUp)
{
  DDNet       net;
  DDLayer     c;
  const char *dup[] = {"x", "x"}, *one[] = {"x"};
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DD_EXPECT_ERROR(DDNetSetInputNames(net, 2, dup), PETSC_ERR_ARG_WRONG, "Inputs 0 and 1 are both named \"x\"");
  DDT(DDNetSetInputNames(net, 1, one));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &c));
  DDT(DDLayerSetType(c, DDLAYERACTIVATION));
  DDT(DDNetAddLayer(net, c, "a1", 0, NULL));
  DD_EXPECT_ERROR(DDNetAddLayer(net, c, "a2", 0, NULL), PETSC_ERR_ARG_WRONG, "this layer object is already the network's layer \"a1\"");
  DDT(DDLayerDestroy(&c));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &c));
  DDT(DDLayerSetType(c, DDLAYERACTIVATION));
  DDT(DDNetAddLayer(net, c, "a2", 0, NULL));
  DDT(DDLayerDestroy(&c));
  DDTensor x = MakeInput({{2, 2, 4, 4}, {1, 1, Size() <= 4 ? Size() : 1, 1}, {}, {}}, DD_FLOAT64, 3), y, dy;
  DDT(DDNetSetUp(net, 1, &x));
  DDT(DDNetForward(net, 1, &x));
  DDT(DDNetGetOutput(net, &y));
  DDT(DDTensorDuplicate(y, &dy));
  /* another output after set-up: not silently the old one */
  DDT(DDNetSetOutput(net, "a1"));
  DD_EXPECT_ERROR(DDNetBackward(net, dy), PETSC_ERR_ARG_WRONGSTATE, "the network changed since it was set up");
  DDT(DDNetSetUp(net, 1, &x));
  DDT(DDNetForward(net, 1, &x));
  DDTensor y1, a1;
  DDT(DDNetGetOutput(net, &y1));
  DDT(DDNetGetLayerOutput(net, "a1", &a1));
  EXPECT_EQ(y1, a1);
  /* NULL: the last layer again */
  DDT(DDNetSetOutput(net, NULL));
  DDT(DDNetSetUp(net, 1, &x));
  DDT(DDNetForward(net, 1, &x));
  DDT(DDNetGetOutput(net, &y1));
  DDT(DDNetGetLayerOutput(net, "a2", &a1));
  EXPECT_EQ(y1, a1);
  DDT(DDTensorDestroy(&dy));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
}

/* two dropout layers draw independent masks (PyTorch's draw from one generator), set by -net_seed, the same on any partition; a seed given to a layer is kept */
TEST(Net, DropoutLayersDrawIndependentMasks)
{
  DDT(PetscOptionsInsertString(NULL, "-dr_net_inputs x -dr_net_layers d1,d2 -dr_d1_layer_type dropout -dr_d2_layer_type dropout"));
  auto run = [](bool split, const char *seed, bool userseeds) {
    if (userseeds) DDT(PetscOptionsInsertString(NULL, "-dr_d1_layer_dropout_seed 9 -dr_d2_layer_dropout_seed 9"));
    DDT(PetscOptionsSetValue(NULL, "-dr_net_seed", seed));
    DDTensor x = MakeInput({{4, 1, 50, 50}, {1, 1, split && Size() <= 50 ? Size() : 1, 1}, {}, {}}, DD_FLOAT64, 1);
    DDT(DDTensorSet(x, 1.0));
    DDNet net;
    DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
    DDT(DDNetSetOptionsPrefix(net, "dr_"));
    DDT(DDNetSetFromOptions(net));
    DDT(DDNetSetUp(net, 1, &x));
    DDT(DDNetForward(net, 1, &x));
    DDTensor y;
    DDT(DDNetGetOutput(net, &y));
    std::vector<double> v = GatherAll(y);
    DDT(DDNetDestroy(&net));
    DDT(DDTensorDestroy(&x));
    DDT(PetscOptionsClearValue(NULL, "-dr_net_seed"));
    if (userseeds) {
      DDT(PetscOptionsClearValue(NULL, "-dr_d1_layer_dropout_seed"));
      DDT(PetscOptionsClearValue(NULL, "-dr_d2_layer_dropout_seed"));
    }
    return v;
  };
  auto kept = [](const std::vector<double> &v) {
    double k = 0;
    for (double e : v) {
      EXPECT_TRUE(e == 0 || e == 4) << e;
      k += e != 0;
    }
    return k / (double)v.size();
  };
  const std::vector<double> s0 = run(false, "0", false), p0 = run(true, "0", false), s3 = run(false, "3", false), u = run(true, "0", true);
  EXPECT_NEAR(kept(s0), 0.25, 0.02) << "the two layers' masks are not independent";
  EXPECT_EQ(s0, p0) << "the masks depend on the partition";
  EXPECT_NE(s0, s3) << "-net_seed does not change the masks";
  EXPECT_NEAR(kept(s3), 0.25, 0.02);
  EXPECT_NEAR(kept(u), 0.5, 0.02) << "a seed given to both layers (the same) gives them the same mask";
}

/* settings that must agree across ranks, changed on one rank after set-up: an error on every rank, not a hang
   (the input gradients wanted, the training mode, the finite checks) */
TEST(NetBadInput, SettingsThatDifferAcrossRanksAfterSetUp)
{
  int       W = Size();
  InputSpec xs{{2, 1, 6, 4 * W}, {1, 1, 1, W}, {}, {}};
  DDTensor  x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6), in[2] = {x, t}, dx;
  DDNet     net = BuildNet(false);
  DDT(DDNetSetUp(net, 2, in));
  /* DDNetGetInputGradient() on the last rank only: DDNetBackward() names it, on every rank */
  DDT(DDNetForward(net, 2, in));
  if (Rank() == W - 1) DDT(DDNetGetInputGradient(net, 0, &dx));
  if (W > 1) DD_EXPECT_ERROR(DDNetBackward(net, NULL), PETSC_ERR_ARG_WRONG, "DDNetGetInputGradient() was called on some ranks only");
  else DDT(DDNetBackward(net, NULL));
  if (Rank() != W - 1) DDT(DDNetGetInputGradient(net, 0, &dx)); /* now on every rank: the backward runs */
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetBackward(net, NULL));
  /* a flag that differs: the setter fails on every rank */
  const PetscBool mine = Rank() == W - 1 ? PETSC_FALSE : PETSC_TRUE;
  if (W > 1) {
    DD_EXPECT_ERROR(DDNetSetTraining(net, mine), PETSC_ERR_ARG_WRONG, "DDNetSetTraining() was given PETSC_TRUE on some ranks and PETSC_FALSE on others");
    DD_EXPECT_ERROR(DDNetSetCheckFinite(net, mine), PETSC_ERR_ARG_WRONG, "DDNetSetCheckFinite() was given PETSC_TRUE on some ranks and PETSC_FALSE on others");
    DDLayer     l;
    const char *lname;
    DDT(DDNetGetLayerByIndex(net, 0, &l, &lname));
    DD_EXPECT_ERROR(DDLayerSetTraining(l, mine), PETSC_ERR_ARG_WRONG, "DDLayerSetTraining() was given PETSC_TRUE on some ranks and PETSC_FALSE on others");
  }
  DDT(DDNetSetTraining(net, PETSC_FALSE));
  DDT(DDNetSetCheckFinite(net, PETSC_TRUE));
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

TEST(NetBadInput, LossFedOnlyByInputsIsNothingToDifferentiate)
{
  /* a loss of the network's inputs alone (a mistyped -<layer>_layer_inputs): the convolution's parameters
     get no gradient and training would change nothing; DDNetBackward() says so on every rank, as PyTorch's
     backward() of a loss that requires no gradient does. Wanting an input's gradient makes it differentiable. */
  int       W = Size();
  InputSpec xs{{2, 1, 6, 4 * W}, {1, 1, 1, W}, {}, {}};
  DDTensor  x = MakeInput(xs, DD_FLOAT64, 5), t = MakeInput(xs, DD_FLOAT64, 6), in[2] = {x, t}, dx;
  DDNet     net;
  DDT(PetscOptionsInsertString(NULL, "-nd_net_inputs x,target -nd_net_layers c1,loss "
                                     "-nd_c1_layer_type conv -nd_c1_layer_conv_out_channels 1 -nd_c1_layer_conv_kernel 3 -nd_c1_layer_conv_padding 1 "
                                     "-nd_loss_layer_type loss -nd_loss_layer_inputs x,target"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "nd_"));
  DDT(DDNetSetFromOptions(net));
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetForward(net, 2, in));
  DD_EXPECT_ERROR(DDNetBackward(net, NULL), PETSC_ERR_ARG_WRONGSTATE, "nothing to differentiate: the network's output (layer \"loss\") depends on no parameter (the first layer with parameters, \"c1\", does not feed it)");
  DDT(DDNetGetInputGradient(net, 0, &dx));
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetBackward(net, NULL));
  PetscReal nrm;
  DDT(DDTensorNorm(dx, NORM_2, &nrm));
  EXPECT_GT(nrm, 0);
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  for (auto o : {"-nd_net_inputs", "-nd_net_layers", "-nd_c1_layer_type", "-nd_c1_layer_conv_out_channels", "-nd_c1_layer_conv_kernel", "-nd_c1_layer_conv_padding", "-nd_loss_layer_type", "-nd_loss_layer_inputs"}) DDT(PetscOptionsClearValue(NULL, o));
}

TEST(NetBadInput, LayerTypeThatDiffersAcrossRanks)
{
  /* DDLayerSetType() with another type, or an unknown one, on the last rank: an error on every rank naming both
     (the unknown type errored on its rank alone, leaving the others in their next collective) */
  DDLayer l;
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const bool last = Rank() == Size() - 1;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DD_EXPECT_ERROR(DDLayerSetType(l, last ? DDLAYERPOOL : DDLAYERCONV), PETSC_ERR_ARG_INCOMP, "DDLayerSetType() differs between ranks");
  DD_EXPECT_ERROR(DDLayerSetType(l, last ? "convolution" : DDLAYERCONV), PETSC_ERR_ARG_INCOMP, "\"convolution\"");
  DDT(DDLayerSetType(l, DDLAYERCONV)); /* the same everywhere: fine, and again (a no-op, still collective) */
  DDT(DDLayerSetType(l, DDLAYERCONV));
  DD_EXPECT_ERROR(DDLayerSetType(l, "convolution"), PETSC_ERR_ARG_UNKNOWN_TYPE, "Unknown layer type \"convolution\"");
  DDT(DDLayerDestroy(&l));
}
