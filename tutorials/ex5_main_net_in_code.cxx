static const char help[] = "Tutorial 5: the main job's U-Net built in code with the C API, checked equal to the one built from options.\n"
                           "Run with -options_file share/ddnn/main_job.opts. Options: -grid <n> (grid points per side, a multiple of 4),\n"
                           "-batch <n>, -float64 (float64 instead of float32)\n";
/*
  share/ddnn/main_job.opts describes the main job's surrogate, a 2-level U-Net, with options
  (-net_layers c1,a1,... -c1_layer_type conv -c1_layer_conv_out_channels 16 ...). This program
  builds the same network in code, layer by layer, with DDLayerCreate(), the type-specific
  setters and DDNetAddLayer(), and checks that it is the same network: the same number of
  parameters, the same parameter values (both initialized from the default seed, layer by
  layer in the same order), the same loss and the same gradients on the same batch.

  The C API is used from C++ here the way a C++ code would: the network is a table.

    mpiexec -n 2 ./ex5_main_net_in_code -options_file share/ddnn/main_job.opts
*/
#include <ddnn.h>
#include <functional>
#include <string>
#include <vector>

/* one layer of the table: its name, its inputs (none: the previous layer), how to make it */
struct LayerSpec {
  std::string                                 name;
  std::vector<std::string>                    inputs;
  std::function<PetscErrorCode(DDLayer layer)> configure;
};

static PetscErrorCode Conv(DDLayer l, PetscInt co, PetscInt k)
{
  PetscInt p = k / 2;

  PetscFunctionBeginUser;
  PetscCall(DDLayerSetType(l, DDLAYERCONV));
  PetscCall(DDLayerConvSetOutputChannels(l, co));
  PetscCall(DDLayerConvSetKernel(l, 1, &k));
  PetscCall(DDLayerConvSetPadding(l, 1, &p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Relu(DDLayer l)
{
  PetscFunctionBeginUser;
  PetscCall(DDLayerSetType(l, DDLAYERACTIVATION));
  PetscCall(DDLayerActivationSetType(l, DD_ACT_RELU));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode MaxPool2(DDLayer l)
{
  PetscInt k = 2;

  PetscFunctionBeginUser;
  PetscCall(DDLayerSetType(l, DDLAYERPOOL));
  PetscCall(DDLayerPoolSetType(l, DD_POOL_MAX));
  PetscCall(DDLayerPoolSetKernel(l, 1, &k));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Upsample2(DDLayer l)
{
  PetscInt s = 2;

  PetscFunctionBeginUser;
  PetscCall(DDLayerSetType(l, DDLAYERUPSAMPLE));
  PetscCall(DDLayerUpsampleSetScale(l, 1, &s));
  PetscCall(DDLayerUpsampleSetMode(l, DD_UPSAMPLE_LINEAR));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the main job's U-Net (share/ddnn/main_job.opts), in code */
static PetscErrorCode BuildUNet(MPI_Comm comm, DDNet *net)
{
  const char *inputs[] = {"x", "target"};
  auto        conv     = [](PetscInt co, PetscInt k) { return [=](DDLayer l) { return Conv(l, co, k); }; };
  auto        concat   = [](DDLayer l) { return DDLayerSetType(l, DDLAYERCONCAT); };
  auto        mse      = [](DDLayer l) -> PetscErrorCode {
    PetscFunctionBeginUser;
    PetscCall(DDLayerSetType(l, DDLAYERLOSS));
    PetscCall(DDLayerLossSetType(l, DD_LOSS_MSE));
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  const std::vector<LayerSpec> table = {
    {"c1", {}, conv(16, 3)}, {"a1", {}, Relu},          {"c2", {}, conv(16, 3)},            {"a2", {}, Relu},        {"p1", {}, MaxPool2},    /* 32 x 32 */
    {"c3", {}, conv(32, 3)}, {"a3", {}, Relu},          {"c4", {}, conv(32, 3)},            {"a4", {}, Relu},        {"p2", {}, MaxPool2},    /* 16 x 16 */
    {"c5", {}, conv(64, 3)}, {"a5", {}, Relu},          {"c6", {}, conv(64, 3)},            {"a6", {}, Relu},                                 /* 8 x 8 */
    {"u2", {}, Upsample2},   {"k2", {"u2", "a4"}, concat}, {"c7", {}, conv(32, 3)},         {"a7", {}, Relu},                                 /* 16 x 16 */
    {"u1", {}, Upsample2},   {"k1", {"u1", "a2"}, concat}, {"c8", {}, conv(16, 3)},         {"a8", {}, Relu},                                 /* 32 x 32 */
    {"out", {}, conv(1, 1)}, {"loss", {"out", "target"}, mse},
  };

  PetscFunctionBeginUser;
  PetscCall(DDNetCreate(comm, net));
  PetscCall(DDNetSetInputNames(*net, 2, inputs));
  for (const LayerSpec &s : table) {
    DDLayer                   l;
    std::vector<const char *> in;
    for (const std::string &i : s.inputs) in.push_back(i.c_str());
    PetscCall(DDLayerCreate(comm, &l));
    PetscCall(s.configure(l));
    PetscCall(DDNetAddLayer(*net, l, s.name.c_str(), (PetscInt)in.size(), in.empty() ? NULL : in.data()));
    PetscCall(DDLayerDestroy(&l)); /* the network holds a reference */
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a batch tensor (B, 1, n, n) split like the DMDA, as the main job's */
static PetscErrorCode BatchTensor(DM da, PetscInt B, PetscInt n, DDDataType dt, DDTensor *t)
{
  DDPartition     p;
  const PetscInt *lx, *ly;
  PetscInt        shape[4] = {B, 1, n, n};

  PetscFunctionBeginUser;
  PetscCall(DMDAGetOwnershipRanges(da, &lx, &ly, NULL));
  PetscCall(DDPartitionCreateFromDMDA(da, 2, &p));
  PetscCall(DDTensorCreate(PETSC_COMM_WORLD, t));
  PetscCall(DDTensorSetPartition(*t, p));
  PetscCall(DDTensorSetShape(*t, 4, shape));
  PetscCall(DDTensorSetDataType(*t, dt));
  PetscCall(DDTensorSetOwnershipRanges(*t, 2, ly));
  PetscCall(DDTensorSetOwnershipRanges(*t, 3, lx));
  PetscCall(DDTensorSetUp(*t));
  PetscCall(DDPartitionDestroy(&p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  DM         da;
  DDNet      fromopts, incode;
  DDTensor   xs[2];
  PetscInt   n = 32, B = 4, np[2];
  PetscInt64 count[2];
  PetscReal  loss[2], pdiff = 0, gdiff = 0;
  PetscBool  f64 = PETSC_FALSE;
  DDTensor  *ps[2], *gs[2];

  PetscCall(DDInitialize(&argc, &argv, NULL, help));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-grid", &n, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-batch", &B, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-float64", &f64, NULL));
  PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, n, n, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &da));
  PetscCall(DMSetUp(da));
  PetscCall(BatchTensor(da, B, n, f64 ? DD_FLOAT64 : DD_FLOAT32, &xs[0]));
  PetscCall(BatchTensor(da, B, n, f64 ? DD_FLOAT64 : DD_FLOAT32, &xs[1]));
  PetscCall(DDTensorSetRandomGlobal(xs[0], 11, -1, 1));
  PetscCall(DDTensorSetRandomGlobal(xs[1], 12, 0, 1));

  /* the network of the options database (-options_file share/ddnn/main_job.opts) */
  PetscCall(DDNetCreate(PETSC_COMM_WORLD, &fromopts));
  PetscCall(DDNetSetFromOptions(fromopts));
  PetscCall(DDNetSetUp(fromopts, 2, xs));
  /* the same network in code */
  PetscCall(BuildUNet(PETSC_COMM_WORLD, &incode));
  PetscCall(DDNetSetUp(incode, 2, xs));
  PetscCall(DDNetView(incode, PETSC_VIEWER_STDOUT_WORLD));

  DDNet nets[2] = {fromopts, incode};
  for (int i = 0; i < 2; i++) {
    PetscCall(DDNetGetNumParameters(nets[i], &count[i]));
    PetscCall(DDNetForward(nets[i], 2, xs));
    PetscCall(DDNetGetLoss(nets[i], &loss[i]));
    PetscCall(DDNetZeroGradients(nets[i]));
    PetscCall(DDNetBackward(nets[i], NULL));
    PetscCall(DDNetGetParameters(nets[i], &np[i], &ps[i], &gs[i]));
  }
  PetscCheck(np[0] == np[1] && count[0] == count[1], PETSC_COMM_WORLD, PETSC_ERR_PLIB, "The networks differ: %" PetscInt_FMT " and %" PetscInt_FMT " parameter tensors, %" PetscInt64_FMT " and %" PetscInt64_FMT " parameters", np[0], np[1], count[0], count[1]);
  for (PetscInt i = 0; i < np[0]; i++) {
    PetscReal d;
    PetscCall(DDTensorMaxAbsDiff(ps[0][i], ps[1][i], &d));
    pdiff = PetscMax(pdiff, d);
    PetscCall(DDTensorMaxAbsDiff(gs[0][i], gs[1][i], &d));
    gdiff = PetscMax(gdiff, d);
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "from options: %" PetscInt64_FMT " parameters, loss %.10e\nin code:      %" PetscInt64_FMT " parameters, loss %.10e\n", count[0], (double)loss[0], count[1], (double)loss[1]));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "max |difference| of the %" PetscInt_FMT " parameter tensors %g, of their gradients %g\n", np[0], (double)pdiff, (double)gdiff));
  PetscCheck(loss[0] == loss[1] && pdiff == 0 && gdiff == 0, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "The network built in code differs from the one of the options");
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "the network built in code is the main job's network\n"));

  PetscCall(DDNetDestroy(&fromopts));
  PetscCall(DDNetDestroy(&incode));
  PetscCall(DDTensorDestroy(&xs[0]));
  PetscCall(DDTensorDestroy(&xs[1]));
  PetscCall(DMDestroy(&da));
  PetscCall(DDFinalize());
  return 0;
}
