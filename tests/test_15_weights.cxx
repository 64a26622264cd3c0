/*
  Weights in and out as a PyTorch state_dict (issue 12, "Weights in and out"; src/net/weights.cxx):
   - DDNetSaveWeights() then DDNetLoadWeights() into another network (other initial parameters)
     restores every parameter, the batch-norm running statistics and num_batches_tracked, on
     any number of ranks, and the loaded network computes the same outputs;
   - the datasets are named by the layers' weights names (-<layer>_layer_weights_name, or
     DDNetSetLayerWeightsName() in code; default the layer's name), and -net_load_weights
     loads the file at the end of DDNetSetUp();
   - bad files, written here with DDTensorWriteHDF5() (no torch needed): a missing dataset, an
     extra dataset, a wrong shape, a counter of several entries are errors naming the dataset, on
     every rank; two layers with one weights name and an unknown layer are errors too.
   - the main job's U-Net (share/ddnn/main_job.opts) saved from one rank loads onto batch and
     spatial partitions of all ranks (and back) with the same outputs, in float64 and float32.
  The torch side (a LeNet-5 and the main job's U-Net trained in PyTorch, loaded here and back) is
  tests/torch/ (test_15_torch_weights, test_15_torch_unet).
*/
#include "layertest.hpp"
#include <unistd.h>

using namespace ddtest;

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test15_") + std::to_string(getppid()) + "_" + name;
}

/* conv -> batchnorm -> relu -> flatten -> affine, options under `prefix` */
static DDNet SmallNet(const std::string &prefix)
{
  std::string o = "-net_inputs x -net_layers c1,bn,act,flat,fc -c1_layer_type conv -c1_layer_conv_out_channels 3 -c1_layer_conv_kernel 3"
                  " -bn_layer_type batchnorm -act_layer_type activation -act_layer_activation_type relu -flat_layer_type flatten"
                  " -fc_layer_type affine -fc_layer_affine_out_features 4";
  std::string s;
  for (size_t i = 0; i < o.size(); i++) { /* every key under the prefix */
    s += o[i];
    if (o[i] == '-' && (i == 0 || o[i - 1] == ' ')) s += prefix;
  }
  DDT(PetscOptionsInsertString(NULL, s.c_str()));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, prefix.c_str()));
  DDT(DDNetSetFromOptions(net));
  return net;
}

/* input (6, 2, 6, 6) split along the batch over all ranks */
static DDTensor Input()
{
  InputSpec s;
  s.shape  = {6, 2, 6, 6};
  s.pshape = {(PetscInt)Size(), 1, 1, 1};
  return MakeInput(s, DD_FLOAT64, 5);
}

static DDLayer Layer(DDNet net, const char *name)
{
  DDLayer l;
  DDT(DDNetGetLayer(net, name, &l));
  return l;
}

/* every parameter and buffer tensor, gathered, and the batch-norm counter */
static std::vector<std::vector<double>> State(DDNet net, PetscInt64 *nbt)
{
  PetscInt                         n, nb;
  DDTensor                        *ps, *bt;
  PetscInt64                     **bc;
  const char *const               *bn;
  std::vector<std::vector<double>> r;
  DDT(DDNetGetParameters(net, &n, &ps, NULL));
  for (PetscInt i = 0; i < n; i++) r.push_back(GatherAll(ps[i]));
  DDT(DDLayerGetBuffers(Layer(net, "bn"), &nb, &bn, &bt, &bc));
  EXPECT_EQ(nb, 3);
  for (PetscInt b = 0; b < nb; b++)
    if (bt[b]) r.push_back(GatherAll(bt[b]));
    else *nbt = *bc[b];
  return r;
}

static PetscInt64 *Counter(DDNet net)
{
  PetscInt    nb;
  PetscInt64 **bc;
  DDT(DDLayerGetBuffers(Layer(net, "bn"), &nb, NULL, NULL, &bc));
  return bc[2];
}

/* a trained-looking network: parameters of seed 3, one training forward (running statistics), counter 7 */
static DDNet Trained(const std::string &prefix, DDTensor x)
{
  DDNet net = SmallNet(prefix);
  DDT(DDNetSetUp(net, 1, &x));
  DDT(DDNetInitializeParameters(net, 3));
  DDT(DDNetSetTraining(net, PETSC_TRUE));
  DDT(DDNetForward(net, 1, &x));
  *Counter(net) = 7;
  DDT(DDNetSetTraining(net, PETSC_FALSE));
  return net;
}

static std::vector<double> Output(DDNet net, DDTensor x)
{
  DDTensor y;
  DDT(DDNetForward(net, 1, &x));
  DDT(DDNetGetOutput(net, &y));
  return GatherAll(y);
}

TEST(Weights, SaveLoadRoundTrip)
{
  DDTensor    x    = Input();
  DDNet       a    = Trained("t15a_", x), b = SmallNet("t15b_");
  std::string file = Tmp("roundtrip.h5");
  DDT(DDNetSaveWeights(a, file.c_str()));
  DDT(DDNetSetUp(b, 1, &x));
  PetscInt64 ca = 0, cb = 0;
  auto       sa = State(a, &ca), sb0 = State(b, &cb);
  EXPECT_GT(RelDiff(sa[0], sb0[0]), 1e-3) << "the two networks must start different";
  DDT(DDNetLoadWeights(b, file.c_str()));
  auto sb = State(b, &cb);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); i++) EXPECT_EQ(sa[i], sb[i]) << "tensor " << i;
  EXPECT_EQ(ca, 7);
  EXPECT_EQ(cb, 7);
  DDT(DDNetSetTraining(b, PETSC_FALSE));
  EXPECT_EQ(Output(a, x), Output(b, x));
  DDT(DDNetDestroy(&a));
  DDT(DDNetDestroy(&b));
  DDT(DDTensorDestroy(&x));
  RemoveTestFile(file);
}

TEST(Weights, NamesAndOption)
{
  DDTensor    x    = Input();
  DDNet       a    = SmallNet("t15n_");
  std::string file = Tmp("names.h5");
  DDT(PetscOptionsSetValue(NULL, "-t15n_c1_layer_weights_name", "features.0"));
  DDT(DDNetSetLayerWeightsName(a, "fc", "head")); /* in code */
  DDT(DDNetSetLayerWeightsName(a, "c1", "ignored")); /* the option overrides it */
  DDT(DDNetSetUp(a, 1, &x));
  DDT(DDNetInitializeParameters(a, 9));
  DDT(DDNetSaveWeights(a, file.c_str()));
  PetscInt  n;
  DDTensor *ps;
  DDT(DDNetGetParameters(a, &n, &ps, NULL));
  ASSERT_EQ(n, 6); /* c1 weight, bias; bn weight, bias; fc weight, bias */
  std::vector<double> w0 = GatherAll(ps[0]), f1 = GatherAll(ps[5]);
  DDT(DDTensorReadHDF5(ps[0], file.c_str(), "features.0.weight"));
  DDT(DDTensorReadHDF5(ps[5], file.c_str(), "head.bias"));
  DDT(DDTensorReadHDF5(ps[2], file.c_str(), "bn.weight")); /* default: the layer's name */
  EXPECT_EQ(GatherAll(ps[0]), w0);
  EXPECT_EQ(GatherAll(ps[5]), f1);
  DD_EXPECT_ERROR(DDTensorReadHDF5(ps[0], file.c_str(), "c1.weight"), PETSC_ERR_FILE_UNEXPECTED, "c1.weight");
  DD_EXPECT_ERROR(DDTensorReadHDF5(ps[0], file.c_str(), "ignored.weight"), PETSC_ERR_FILE_UNEXPECTED, "ignored.weight");
  /* -net_load_weights: read at the end of DDNetSetUp(), over the initial parameters */
  DDNet b = SmallNet("t15n_");
  DDT(DDNetSetLayerWeightsName(b, "fc", "head"));
  DDT(PetscOptionsSetValue(NULL, "-t15n_net_load_weights", file.c_str()));
  DDT(DDNetSetUp(b, 1, &x));
  DDT(PetscOptionsClearValue(NULL, "-t15n_net_load_weights"));
  PetscInt  nb;
  DDTensor *pb;
  DDT(DDNetGetParameters(b, &nb, &pb, NULL));
  ASSERT_EQ(nb, n);
  for (PetscInt i = 0; i < n; i++) EXPECT_EQ(GatherAll(pb[i]), GatherAll(ps[i])) << "parameter " << i;
  /* without the in-code name, b's fc reads "fc.weight", which the file does not have */
  DDNet c = SmallNet("t15n_");
  DDT(DDNetSetUp(c, 1, &x));
  DD_EXPECT_ERROR(DDNetLoadWeights(c, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "no dataset \"fc.weight\"");
  DDT(PetscOptionsClearValue(NULL, "-t15n_c1_layer_weights_name"));
  DDT(DDNetDestroy(&a));
  DDT(DDNetDestroy(&b));
  DDT(DDNetDestroy(&c));
  DDT(DDTensorDestroy(&x));
  RemoveTestFile(file);
}

/* the network's state_dict written tensor by tensor with DDTensorWriteHDF5(), less `skip`, plus `extra`,
   `reshape` written with a wrong shape, the counter as a one-entry float dataset (or `counterentries`) */
static void WriteState(DDNet net, const std::string &file, const std::string &skip, const std::string &extra, const std::string &reshape, PetscInt counterentries = 1)
{
  PetscInt           n, nb;
  DDTensor          *ps, *bt;
  const char *const *bn;
  PetscBool          first = PETSC_TRUE;
  auto               put   = [&](DDTensor t, const std::string &name) {
    if (name == skip) return;
    DDTensor w = t;
    if (name == reshape) {
      InputSpec s;
      PetscInt        order;
      const PetscInt *shape;
      DDT(DDTensorGetOrder(t, &order));
      DDT(DDTensorGetShape(t, &shape));
      std::vector<PetscInt> sh(shape, shape + order);
      sh[0] += 1;
      s.shape = sh;
      w       = MakeInput(s, DD_FLOAT64, 1);
    }
    DDT(DDTensorWriteHDF5(w, file.c_str(), name.c_str(), first ? PETSC_FALSE : PETSC_TRUE));
    first = PETSC_FALSE;
    if (w != t) DDT(DDTensorDestroy(&w));
  };
  DDT(DDNetGetParameters(net, &n, &ps, NULL));
  for (PetscInt i = 0; i < n; i++) {
    const char *name;
    DDT(DDNetGetParameterName(net, i, &name));
    put(ps[i], name);
  }
  DDT(DDLayerGetBuffers(Layer(net, "bn"), &nb, &bn, &bt, NULL));
  for (PetscInt b = 0; b < nb; b++)
    if (bt[b]) put(bt[b], std::string("bn.") + bn[b]);
  InputSpec s;
  s.shape     = {counterentries};
  DDTensor c  = MakeInput(s, DD_FLOAT64, 1);
  DDT(DDTensorSetValuesGlobal(c, std::vector<double>((size_t)counterentries, 4.0).data()));
  put(c, "bn.num_batches_tracked");
  if (!extra.empty()) put(c, extra);
  DDT(DDTensorDestroy(&c));
}

TEST(Weights, BadFiles)
{
  DDTensor    x    = Input();
  DDNet       net  = SmallNet("t15e_");
  std::string file = Tmp("bad.h5");
  DDT(DDNetSetUp(net, 1, &x));
  /* the file written tensor by tensor loads (a float one-entry counter included) */
  WriteState(net, file, "", "", "");
  *Counter(net) = 0;
  DDT(DDNetLoadWeights(net, file.c_str()));
  EXPECT_EQ(*Counter(net), 4);
  WriteState(net, file, "bn.running_var", "", "");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "no dataset \"bn.running_var\" (buffer \"running_var\" of layer \"bn\")");
  WriteState(net, file, "bn.num_batches_tracked", "", "");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "no dataset \"bn.num_batches_tracked\"");
  WriteState(net, file, "c1.bias", "", "");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "no dataset \"c1.bias\" (parameter \"bias\" of layer \"c1\")");
  WriteState(net, file, "", "decoder.extra", "");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "Dataset \"decoder.extra\" of weights file");
  WriteState(net, file, "", "", "fc.weight");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "Dataset \"fc.weight\" in weights file \"" + file + "\" (parameter \"weight\" of layer \"fc\") has shape 5x48, the network's tensor 4x48");
  WriteState(net, file, "", "", "bn.running_mean");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "Dataset \"bn.running_mean\" in weights file \"" + file + "\" (buffer \"running_mean\" of layer \"bn\") has shape 4, the network's tensor 3");
  WriteState(net, file, "", "", "", 2);
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "\"bn.num_batches_tracked\"");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, Tmp("missing.h5").c_str()), PETSC_ERR_FILE_OPEN, "missing.h5");
  /* names */
  DD_EXPECT_ERROR(DDNetSetLayerWeightsName(net, "nosuchlayer", "x"), PETSC_ERR_ARG_WRONG, "nosuchlayer");
  DDT(DDNetSetLayerWeightsName(net, "c1", "fc"));
  DD_EXPECT_ERROR(DDNetSaveWeights(net, file.c_str()), PETSC_ERR_ARG_WRONG, "weights name \"fc.weight\"");
  DD_EXPECT_ERROR(DDNetLoadWeights(net, file.c_str()), PETSC_ERR_ARG_WRONG, "weights name \"fc.weight\"");
  DDNet fresh;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &fresh));
  DD_EXPECT_ERROR(DDNetLoadWeights(fresh, file.c_str()), PETSC_ERR_ARG_WRONGSTATE, "DDNetSetUp");
  DDT(DDNetDestroy(&fresh));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  if (Rank() == 0) unlink(file.c_str());
}

/* the main job's U-Net (share/ddnn/main_job.opts) under an options prefix, set up on (x, target) */
static DDNet MainJobUNet(const char *prefix, DDTensor x, DDTensor t)
{
  DDNet    net;
  DDTensor in[2] = {x, t};
  DDT(PetscOptionsPrefixPush(NULL, prefix));
  DDT(PetscOptionsInsertFile(PETSC_COMM_WORLD, NULL, DDNN_SHARE_DIR "/main_job.opts", PETSC_TRUE));
  DDT(PetscOptionsPrefixPop(NULL));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, prefix));
  DDT(DDNetSetFromOptions(net));
  DDT(DDNetSetUp(net, 2, in));
  return net;
}

static std::vector<double> UNetOutput(DDNet net, DDTensor x, DDTensor t)
{
  DDTensor in[2] = {x, t}, y;
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetGetLayerOutput(net, "out", &y));
  return GatherAll(y);
}

/*
  The U-Net's weights, written by a network on one rank, read by networks on batch and spatial
  partitions of all ranks (unbalanced: 16 rows over 3 ranks), float64 and float32: the same
  outputs; and written by a partitioned network, read back on one rank (the torch side of the
  same round trip is tests/torch/test_torch_unet.py)
*/
TEST(Weights, MainJobUNetAcrossPartitions)
{
  const PetscInt W    = Size();
  std::string    file = Tmp("unet.h5"), back = Tmp("unet_back.h5");
  InputSpec      s;
  s.shape          = {2, 1, 16, 16};
  DDTensor x1      = MakeInput(Serial(s), DD_FLOAT64, 7), t1 = MakeInput(Serial(s), DD_FLOAT64, 8);
  DDNet    a       = MainJobUNet("t15ua_", x1, t1);
  DDT(DDNetInitializeParameters(a, 5));
  DDT(DDNetSaveWeights(a, file.c_str()));
  const std::vector<double> ya = UNetOutput(a, x1, t1);
  for (auto ps : std::vector<std::vector<PetscInt>>{{W, 1, 1, 1}, {1, 1, W, 1}, {1, 1, 1, W}}) {
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
      InputSpec sp = s;
      sp.pshape    = ps;
      DDTensor x   = MakeInput(sp, dt, 7), t = MakeInput(sp, dt, 8);
      DDNet    b   = MainJobUNet("t15ub_", x, t);
      const std::string what = std::string(dt == DD_FLOAT64 ? "float64" : "float32") + ", x partition " + std::to_string(ps[0]) + "x1x" + std::to_string(ps[2]) + "x" + std::to_string(ps[3]);
      EXPECT_GT(RelDiff(UNetOutput(b, x, t), ya), 1e-3) << what << ": the networks must start different";
      DDT(DDNetLoadWeights(b, file.c_str()));
      EXPECT_LT(RelDiff(UNetOutput(b, x, t), ya), dt == DD_FLOAT64 ? 1e-13 : 1e-5) << what;
      if (dt == DD_FLOAT64 && ps[2] == W) { /* and back: saved from the partition, read on one rank */
        DDT(DDNetInitializeParameters(b, 6));
        DDT(DDNetSaveWeights(b, back.c_str()));
        const std::vector<double> yb = UNetOutput(b, x, t);
        DDNet c = MainJobUNet("t15uc_", x1, t1);
        DDT(DDNetLoadWeights(c, back.c_str()));
        EXPECT_LT(RelDiff(UNetOutput(c, x1, t1), yb), 1e-13) << what << ", back on one rank";
        EXPECT_GT(RelDiff(yb, ya), 1e-3) << what << ": reinitialized";
        DDT(DDNetDestroy(&c));
      }
      DDT(DDNetDestroy(&b));
      DDT(DDTensorDestroy(&x));
      DDT(DDTensorDestroy(&t));
    }
  }
  /* a float64 value beyond float32's range (its own dataset, checksum valid) cannot go into a float32 network: an error naming it */
  {
    PetscInt  np;
    DDTensor *ps, big;
    DDT(DDNetGetParameters(a, &np, &ps, NULL));
    DDT(DDTensorDuplicate(ps[0], &big));
    DDT(DDTensorSet(big, 1e300));
    DDT(DDTensorWriteHDF5(big, file.c_str(), "c1.weight", PETSC_TRUE));
    DDT(DDTensorDestroy(&big));
    InputSpec sp = s;
    sp.pshape    = {1, 1, W, 1};
    DDTensor x = MakeInput(sp, DD_FLOAT32, 7), t = MakeInput(sp, DD_FLOAT32, 8);
    DDNet    b = MainJobUNet("t15ub_", x, t);
    DD_EXPECT_ERROR(DDNetLoadWeights(b, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "Dataset \"c1.weight\" of \"" + file + "\" holds a float64 value beyond float32's range");
    DDT(DDNetLoadWeights(a, file.c_str())); /* a float64 network holds it */
    DDT(DDNetDestroy(&b));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&t));
  }
  DDT(DDNetDestroy(&a));
  DDT(DDTensorDestroy(&x1));
  DDT(DDTensorDestroy(&t1));
  if (Rank() == 0) {
    unlink(file.c_str());
    unlink(back.c_str());
  }
}
