/*
  weights_driver: the ddnn side of tests/torch/test_torch_weights.py. Builds the network of the
  options (share/ddnn/lenet5.opts), reads its inputs x (N, C, H, W) and label (N) from -data,
  partitioned over the ranks as -xpart gives (the label along the batch), or with -tshape
  N,C,H,W a dense target (dataset "target", split as x: the main job's U-Net), and
   -mode eval:  loads the weights (-net_load_weights, read at the end of DDNetSetUp()), evaluates
                and writes the output of layer -output_layer to -out as dataset "y";
   -mode train: trains -steps steps (the optimizer of the options), saves the weights to -save
                (DDNetSaveWeights()), then evaluates as above.
  -dtype float32|float64 is the network's type (the file's datasets convert).
*/
#include <ddnn.h>
#include <string.h>

int main(int argc, char **argv)
{
  DDNet       net;
  DDTensor    x, label, in[2], y;
  DDPartition px, pl;
  PetscInt    xpart[4] = {1, 1, 1, 1}, n = 4, shape[4] = {0, 0, 0, 0}, ns = 4, tshape[4] = {0, 0, 0, 0}, nt = 4, steps = 0, P, lshape[1];
  PetscMPIInt size, lranks[4], xranks[64];
  char        data[PETSC_MAX_PATH_LEN], out[PETSC_MAX_PATH_LEN], save[PETSC_MAX_PATH_LEN] = "", mode[16] = "eval", dt[16] = "float32", olayer[64] = "out";
  PetscBool   flg, dense;
  DDDataType  dtype;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-mode", mode, sizeof(mode), NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-dtype", dt, sizeof(dt), NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-data", data, sizeof(data), &flg));
  PetscCheck(flg, PETSC_COMM_WORLD, PETSC_ERR_USER, "Give -data file.h5 (datasets x, label)");
  PetscCall(PetscOptionsGetString(NULL, NULL, "-out", out, sizeof(out), &flg));
  PetscCheck(flg, PETSC_COMM_WORLD, PETSC_ERR_USER, "Give -out file.h5");
  PetscCall(PetscOptionsGetString(NULL, NULL, "-save", save, sizeof(save), NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-output_layer", olayer, sizeof(olayer), NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-steps", &steps, NULL));
  PetscCall(PetscOptionsGetIntArray(NULL, NULL, "-xpart", xpart, &n, NULL));
  PetscCall(PetscOptionsGetIntArray(NULL, NULL, "-xshape", shape, &ns, &flg));
  PetscCheck(flg && ns == 4 && n == 4, PETSC_COMM_WORLD, PETSC_ERR_USER, "Give -xshape N,C,H,W and -xpart a,b,c,d");
  PetscCall(PetscOptionsGetIntArray(NULL, NULL, "-tshape", tshape, &nt, &dense));
  PetscCheck(!dense || nt == 4, PETSC_COMM_WORLD, PETSC_ERR_USER, "Give -tshape N,C,H,W (4 entries, %" PetscInt_FMT " given)", nt);
  dtype = dt[5] == '6' ? DD_FLOAT64 : DD_FLOAT32;
  P     = xpart[0] * xpart[1] * xpart[2] * xpart[3];
  PetscCheck(P == size, PETSC_COMM_WORLD, PETSC_ERR_USER, "-xpart has %" PetscInt_FMT " pieces for %d ranks", P, size);
  PetscCheck(P <= 64, PETSC_COMM_WORLD, PETSC_ERR_USER, "At most 64 ranks");
  for (PetscInt i = 0; i < P; i++) xranks[i] = (PetscMPIInt)i;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, xpart, P, xranks, &px));
  for (PetscInt i = 0; i < xpart[0]; i++) lranks[i] = (PetscMPIInt)(i * (P / xpart[0]));
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, xpart, xpart[0], lranks, &pl));
  lshape[0] = shape[0];
  PetscCall(DDTensorCreateFromPartition(px, dtype, 4, shape, &x));
  PetscCall(DDTensorReadHDF5(x, data, "x"));
  if (dense) {
    PetscCall(DDTensorCreateFromPartition(px, dtype, 4, tshape, &label));
    PetscCall(DDTensorReadHDF5(label, data, "target"));
  } else {
    PetscCall(DDTensorCreateFromPartition(pl, dtype, 1, lshape, &label));
    PetscCall(DDTensorReadHDF5(label, data, "label"));
  }
  in[0] = x;
  in[1] = label;
  PetscCall(DDNetCreate(PETSC_COMM_WORLD, &net));
  PetscCall(DDNetSetFromOptions(net));
  PetscCall(DDNetSetUp(net, 2, in));
  if (!strcmp(mode, "train")) {
    DDOptimizer opt;
    PetscInt    np;
    DDTensor   *ps, *gs;
    PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
    PetscCall(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
    PetscCall(DDOptimizerSetFromOptions(opt));
    PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
    PetscCall(DDNetSetTraining(net, PETSC_TRUE));
    for (PetscInt s = 0; s < steps; s++) {
      PetscCall(DDNetForward(net, 2, in));
      PetscCall(DDNetZeroGradients(net));
      PetscCall(DDNetBackward(net, NULL));
      PetscCall(DDOptimizerStep(opt));
    }
    PetscCall(DDOptimizerDestroy(&opt));
    PetscCheck(save[0], PETSC_COMM_WORLD, PETSC_ERR_USER, "Give -save weights.h5 with -mode train");
    PetscCall(DDNetSaveWeights(net, save));
  }
  PetscCall(DDNetSetTraining(net, PETSC_FALSE));
  PetscCall(DDNetForward(net, 2, in));
  PetscCall(DDNetGetLayerOutput(net, olayer, &y));
  PetscCall(DDTensorWriteHDF5(y, out, "y", PETSC_FALSE));
  PetscCall(DDNetDestroy(&net));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&label));
  PetscCall(DDPartitionDestroy(&px));
  PetscCall(DDPartitionDestroy(&pl));
  PetscCall(DDFinalize());
  return 0;
}
