/*
  Files that are never silently wrong (issue 13, items 2, 3, 4, 7):
   - a data file whose generation was interrupted is refused as incomplete, naming the file;
   - a flipped byte in the data of a dataset, a checkpoint tensor, or in the HDF5 metadata is an
     error naming the file (and dataset), on any partition (checksums are partition independent);
   - paths that exist and are not regular files (a FIFO, a directory, a symbolic link) are never
     written over or replaced, and the checkpoint path is checked before any work;
   - a stale "<checkpoint>.tmp" from a killed run does not confuse the next save;
   - checkpoints hold every layer buffer (batch-norm running statistics and num_batches_tracked,
     the dropout counter): a restarted net continues exactly, in training and in evaluation.
*/
#include "layertest.hpp"
#include <fstream>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <csignal>
#include <hdf5.h>

using namespace ddtest;

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test12_") + std::to_string(getppid()) + "_" + name;
}

static std::string ReadBytes(const std::string &file)
{
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

static void WriteBytes(const std::string &file, const std::string &bytes)
{
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), (std::streamsize)bytes.size());
}

/* the file offset of a (contiguous) dataset's raw data, on rank 0 */
static haddr_t DataOffset(const std::string &file, const char *path)
{
  hid_t   f   = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t   d   = H5Dopen2(f, path, H5P_DEFAULT);
  haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return off;
}

/* flips one byte of `file` at `offset` (rank 0), everyone waits */
static void FlipByte(const std::string &file, size_t offset)
{
  if (Rank() == 0) {
    std::string b = ReadBytes(file);
    ASSERT_LT(offset, b.size());
    b[offset] ^= 0x10;
    WriteBytes(file, b);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
}

/* a data file of S samples (4, 6) written slice by slice (slices 0..upto-1), split over the ranks along the last dimension */
static void WriteSlices(const std::string &file, PetscInt S, PetscInt upto)
{
  DDTensor s = MakeInput({{1, 4, 6}, {1, 1, Size() <= 6 ? Size() : 1}, {}, {}}, DD_FLOAT64, 3);
  for (PetscInt i = 0; i < upto; i++) {
    DDT(DDTensorScale(s, 1.5));
    DDT(DDTensorWriteHDF5Slice(s, file.c_str(), "input", i, S));
  }
  DDT(DDTensorDestroy(&s));
}

static PetscErrorCode OpenDataset(const std::string &file, DDDataset *ds)
{
  const char *fields[] = {"input"};

  PetscFunctionBegin;
  PetscCall(DDDatasetCreate(PETSC_COMM_WORLD, ds));
  PetscCall(DDDatasetSetFile(*ds, file.c_str()));
  PetscCall(DDDatasetSetFields(*ds, 1, fields));
  PetscCall(DDDatasetSetUp(*ds));
  PetscFunctionReturn(PETSC_SUCCESS);
}

TEST(DataFiles, InterruptedGenerationIsRefusedAsIncomplete)
{
  std::string file = Tmp("partial.h5");
  DDDataset   ds   = NULL;
  RemoveTestFile(file);
  WriteSlices(file, 10, 6); /* a generator killed after 6 of 10 samples */
  std::string m;
  PetscErrorCode e = Catch([&]() { return OpenDataset(file, &ds); }, &m);
  EXPECT_EQ(e, PETSC_ERR_FILE_UNEXPECTED) << m;
  EXPECT_NE(m.find("incomplete"), std::string::npos) << m;
  EXPECT_NE(m.find(file), std::string::npos) << m;
  EXPECT_NE(m.find("6 of its 10"), std::string::npos) << m;
  DDT(DDDatasetDestroy(&ds));
  /* the remaining slices complete it: then it is read, and its checksum verified */
  RemoveTestFile(file);
  WriteSlices(file, 10, 10);
  DDT(OpenDataset(file, &ds));
  PetscInt n;
  DDT(DDDatasetGetNumSamples(ds, &n));
  EXPECT_EQ(n, 10);
  DDT(DDDatasetDestroy(&ds));
  RemoveTestFile(file);
}

TEST(DataFiles, SliceCountThatDiffersBetweenRanksIsAnError)
{
  /* -nsamples given differently on one rank: each rank would write other slices and hang */
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::string file = Tmp("slices.h5");
  RemoveTestFile(file);
  DDTensor s = MakeInput({{1, 4, 6}, {1, 1, Size() <= 6 ? Size() : 1}, {}, {}}, DD_FLOAT64, 3);
  DD_EXPECT_ERROR(DDTensorWriteHDF5Slice(s, file.c_str(), "input", 0, Rank() == 1 ? 32 : 24), PETSC_ERR_ARG_INCOMP, "slice count differs between ranks");
  DDT(DDTensorDestroy(&s));
  RemoveTestFile(file);
}

TEST(DataFiles, FlippedDataByteIsAnErrorNamingFileAndDataset)
{
  std::string file = Tmp("flip.h5");
  DDDataset   ds   = NULL;
  RemoveTestFile(file);
  WriteSlices(file, 8, 8);
  if (Rank() == 0) FlipByte(file, (size_t)DataOffset(file, "input") + 8 * 4 * 6 * 3 + 13);
  else FlipByte(file, 0); /* only rank 0 flips; the others wait in the barrier */
  std::string    m;
  PetscErrorCode e = Catch([&]() { return OpenDataset(file, &ds); }, &m);
  EXPECT_EQ(e, PETSC_ERR_FILE_UNEXPECTED) << m;
  EXPECT_NE(m.find("corrupted"), std::string::npos) << m;
  EXPECT_NE(m.find(file), std::string::npos) << m;
  EXPECT_NE(m.find("\"input\""), std::string::npos) << m;
  DDT(DDDatasetDestroy(&ds));
  RemoveTestFile(file);
}

TEST(TensorFiles, ChecksumIsPartitionIndependentAndCatchesFlippedBytes)
{
  std::string file = Tmp("tensor.h5");
  const int   P    = Size();
  /* written on a split of dimension 1, read on a split of dimension 0 and on one rank, in float32 too */
  DDTensor x = MakeInput({{6, 5 * P}, {1, P}, {}, {}}, DD_FLOAT64, 7), y = MakeInput({{6, 5 * P}, {P <= 6 ? P : 1, 1}, {}, {}}, DD_FLOAT64, 8);
  DDTensor z = MakeInput(Serial({{6, 5 * P}, {}, {}, {}}), DD_FLOAT32, 9);
  DDT(DDTensorWriteHDF5(x, file.c_str(), "g/x", PETSC_FALSE));
  DDT(DDTensorReadHDF5(y, file.c_str(), "g/x"));
  EXPECT_EQ(GatherAll(x), GatherAll(y));
  DDT(DDTensorReadHDF5(z, file.c_str(), "g/x"));
  /* one flipped bit of the data */
  if (Rank() == 0) FlipByte(file, (size_t)DataOffset(file, "g/x") + 8 * 7 + 2);
  else FlipByte(file, 0);
  DD_EXPECT_ERROR(DDTensorReadHDF5(y, file.c_str(), "g/x"), PETSC_ERR_FILE_UNEXPECTED, "is corrupted");
  std::string m;
  EXPECT_NE(Catch([&]() { return DDTensorReadHDF5(z, file.c_str(), "g/x"); }, &m), 0);
  EXPECT_NE(m.find(file), std::string::npos) << m;
  EXPECT_NE(m.find("\"g/x\""), std::string::npos) << m;
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
  DDT(DDTensorDestroy(&z));
  RemoveTestFile(file);
}

/*
  A write that the file system refuses part way (a full disk; here the file size limit, RLIMIT_FSIZE with
  SIGXFSZ ignored, so that writes past it fail with EFBIG): a new file leaves the old one as it was and no
  temporary; an appended dataset is removed, not left half-written to be read back without complaint
*/
TEST(TensorFiles, AWriteRefusedPartWayLeavesNothingHalfWritten)
{
  /* on 3 ranks and more each rank's piece fits under the limit and the refusal comes at the file's close, whose
     failed flush HDF5 keeps pending (its handle stays open until the library shuts down): not this test's case */
  if (Size() > 2) GTEST_SKIP() << "the data write itself is refused only on 1 and 2 ranks";
  const int   P    = Size();
  std::string file = Tmp("fsize.h5");
  DDTensor    small = MakeInput({{4, 3 * P}, {1, P}, {}, {}}, DD_FLOAT64, 7), big = MakeInput({{256, 256 * P}, {1, P}, {}, {}}, DD_FLOAT64, 8), back;
  DDT(DDTensorWriteHDF5(small, file.c_str(), "small", PETSC_FALSE));
  DDT(DDTensorDuplicate(small, &back));
  const std::string good = Rank() == 0 ? ReadBytes(file) : "";
  struct rlimit     old, lim;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  lim              = old;
  unsigned long long gsize = good.size();
  MPI_Bcast(&gsize, 1, MPI_UNSIGNED_LONG_LONG, 0, PETSC_COMM_WORLD);
  lim.rlim_cur = (rlim_t)(gsize + 65536); /* room for the metadata, not for the data */
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  std::string    m1, m2;
  PetscErrorCode e1 = Catch([&]() { return DDTensorWriteHDF5(big, file.c_str(), "big", PETSC_FALSE); }, &m1);
  PetscErrorCode e2 = Catch([&]() { return DDTensorWriteHDF5(big, file.c_str(), "big", PETSC_TRUE); }, &m2);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, was);
  EXPECT_EQ(e1, PETSC_ERR_FILE_WRITE) << m1;
  EXPECT_NE(m1.find(file), std::string::npos) << m1; /* the dataset's write, or the file's close, refused */
  EXPECT_NE(e2, 0) << "the appending write must fail";
  EXPECT_NE(m2.find(file), std::string::npos) << m2;
  if (Rank() == 0) {
    struct stat sb;
    EXPECT_NE(stat((file + ".tmp").c_str(), &sb), 0) << "a temporary was left";
  }
  /* appended: where HDF5 could still update the file, the old dataset reads and the new one is absent (a
     refused metadata write can leave the file unreadable: HDF5 does not roll back, which the man page says) */
  if (e2 == PETSC_ERR_FILE_WRITE && m2.find("the partial dataset was removed") != std::string::npos && !Catch([&]() { return DDTensorReadHDF5(back, file.c_str(), "small"); })) {
    EXPECT_EQ(GatherAll(back), GatherAll(small));
    DD_EXPECT_ERROR(DDTensorReadHDF5(big, file.c_str(), "big"), PETSC_ERR_FILE_UNEXPECTED, "has no dataset \"big\"");
  }
  /* a new file: the old one is as it was */
  if (Rank() == 0) WriteBytes(file, good);
  MPI_Barrier(PETSC_COMM_WORLD);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  signal(SIGXFSZ, SIG_IGN);
  e1 = Catch([&]() { return DDTensorWriteHDF5(big, file.c_str(), "big", PETSC_FALSE); }, &m1);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, was);
  EXPECT_EQ(e1, PETSC_ERR_FILE_WRITE) << m1;
  if (Rank() == 0) EXPECT_EQ(ReadBytes(file), good) << "a failed write of a new file changed the old one";
  DDT(DDTensorReadHDF5(back, file.c_str(), "small"));
  EXPECT_EQ(GatherAll(back), GatherAll(small));
  DDT(DDTensorDestroy(&small));
  DDT(DDTensorDestroy(&big));
  DDT(DDTensorDestroy(&back));
  RemoveTestFile(file);
}

/* a file or dataset name that differs between ranks (per-rank environments, MPMD launches) is an error, not a hang */
TEST(TensorFiles, NamesThatDifferBetweenRanksAreAnError)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int   P    = Size();
  std::string file = Tmp("names.h5"), mine = Rank() == 1 ? Tmp("names_rank1.h5") : file;
  DDTensor    x    = MakeInput({{6, 5 * P}, {1, P}, {}, {}}, DD_FLOAT64, 7);
  DD_EXPECT_ERROR(DDTensorWriteHDF5(x, mine.c_str(), "x", PETSC_FALSE), PETSC_ERR_ARG_INCOMP, "HDF5 file name");
  DD_EXPECT_ERROR(DDTensorWriteHDF5(x, file.c_str(), Rank() == 1 ? "y" : "x", PETSC_FALSE), PETSC_ERR_ARG_INCOMP, "HDF5 dataset name");
  DD_EXPECT_ERROR(DDFileCheckWritable(PETSC_COMM_WORLD, mine.c_str()), PETSC_ERR_ARG_INCOMP, "file name");
  DDT(DDTensorDestroy(&x));
  RemoveTestFile(file);
  RemoveTestFile(mine);
}

TEST(TensorFiles, MetadataIsChecksummed)
{
  std::string file = Tmp("meta.h5");
  DDTensor    x    = MakeInput({{4, 3 * Size()}, {1, Size()}, {}, {}}, DD_FLOAT64, 1);
  DDT(DDTensorWriteHDF5(x, file.c_str(), "x", PETSC_FALSE));
  std::string bytes = ReadBytes(file);
  /* the 1.8+ format: superblock version >= 2 (byte 8) and object headers "OHDR" (with checksums); decided collectively, so no rank leaves the test alone */
  size_t oh = bytes.find("OHDR");
  bool   ok = bytes.size() > 8 && (int)bytes[8] >= 2 && oh != std::string::npos;
  if (!ok) fprintf(stderr, "[%d] %s: %zu bytes, superblock version %d, OHDR at %zd\n", Rank(), file.c_str(), bytes.size(), bytes.size() > 8 ? (int)bytes[8] : -1, oh == std::string::npos ? (ssize_t)-1 : (ssize_t)oh);
  ASSERT_TRUE(AllTrue(ok)) << "superblock version < 2 or no version-2 object header on some rank";
  /* a flipped byte in the superblock's body, then in the last object header's body */
  std::string good = bytes;
  if (Rank() == 0) {
    bytes[12] ^= 0x01; /* base address field */
    WriteBytes(file, bytes);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  std::string m;
  EXPECT_NE(Catch([&]() { return DDTensorReadHDF5(x, file.c_str(), "x"); }, &m), 0) << "a corrupted superblock was read";
  EXPECT_NE(m.find(file), std::string::npos) << m;
  size_t last = good.rfind("OHDR");
  if (Rank() == 0) {
    bytes = good;
    bytes[last + 7] ^= 0x04;
    WriteBytes(file, bytes);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  EXPECT_NE(Catch([&]() { return DDTensorReadHDF5(x, file.c_str(), "x"); }, &m), 0) << "a corrupted object header was read";
  EXPECT_NE(m.find(file), std::string::npos) << m;
  DDT(DDTensorDestroy(&x));
  RemoveTestFile(file);
}

/* x (N,2,H,W) -> conv -> batchnorm -> dropout -> conv -> mse */
static DDNet BufferNet()
{
  static bool done = false;
  if (!done) {
    DDT(PetscOptionsInsertString(NULL, "-f12_net_inputs x,target -f12_net_layers c1,bn,dr,c2,loss "
                                       "-f12_c1_layer_type conv -f12_c1_layer_conv_out_channels 3 -f12_c1_layer_conv_kernel 3 -f12_c1_layer_conv_padding 1 "
                                       "-f12_bn_layer_type batchnorm -f12_bn_layer_batchnorm_momentum 0.3 "
                                       "-f12_dr_layer_type dropout -f12_dr_layer_dropout_p 0.4 -f12_dr_layer_dropout_seed 5 "
                                       "-f12_c2_layer_type conv -f12_c2_layer_conv_out_channels 1 -f12_c2_layer_conv_kernel 3 -f12_c2_layer_conv_padding 1 "
                                       "-f12_loss_layer_type loss -f12_loss_layer_inputs c2,target"));
    done = true;
  }
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "f12_"));
  DDT(DDNetSetFromOptions(net));
  return net;
}

struct Steps {
  std::vector<double> train, eval;
};

/* `steps` training steps, each followed by an evaluation Forward */
static Steps RunSteps(DDNet net, DDOptimizer opt, DDTensor in[], int first, int steps)
{
  Steps r;
  for (int s = first; s < first + steps; s++) {
    PetscReal l;
    DDT(DDTensorSetRandomGlobal(in[0], 100 + s, -1, 1));
    DDT(DDNetSetTraining(net, PETSC_TRUE));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, &l));
    r.train.push_back(l);
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
    DDT(DDNetSetTraining(net, PETSC_FALSE));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, &l));
    r.eval.push_back(l);
  }
  DDT(DDNetSetTraining(net, PETSC_TRUE));
  return r;
}

static DDOptimizer Optimizer(DDNet net)
{
  DDOptimizer opt;
  PetscInt    n;
  DDTensor   *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, DDOPTIMIZERADAM));
  DDT(DDOptimizerSetLearningRate(opt, 0.01));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  return opt;
}

TEST(Checkpoints, BuffersAndCountersMakeTheRestartExact)
{
  std::string file = Tmp("ckbuf.h5");
  const int   P    = Size();
  InputSpec   xs{{4, 2, 6, 4 * P}, {1, 1, 1, P}, {}, {}}, ts{{4, 1, 6, 4 * P}, {1, 1, 1, P}, {}, {}};
  DDTensor    x = MakeInput(xs, DD_FLOAT64, 1), t = MakeInput(ts, DD_FLOAT64, 2);
  DDTensor    in[2] = {x, t};
  DDNet       net   = BufferNet();
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetInitializeParameters(net, 3));
  /* the buffers of the layers */
  DDLayer            bn, dr;
  PetscInt           nb;
  const char *const *names;
  DDTensor          *bt;
  PetscInt64       **bc;
  DDT(DDNetGetLayer(net, "bn", &bn));
  DDT(DDNetGetLayer(net, "dr", &dr));
  DDT(DDLayerGetBuffers(bn, &nb, &names, &bt, &bc));
  ASSERT_EQ(nb, 3);
  EXPECT_STREQ(names[0], "running_mean");
  EXPECT_STREQ(names[1], "running_var");
  EXPECT_STREQ(names[2], "num_batches_tracked");
  EXPECT_TRUE(bt[0] && bt[1] && !bt[2] && bc[2] && !bc[0]);
  DDOptimizer opt = Optimizer(net);
  RunSteps(net, opt, in, 0, 3);
  EXPECT_EQ(*bc[2], 3);
  DDT(DDLayerGetBuffers(dr, &nb, &names, &bt, &bc));
  ASSERT_EQ(nb, 1);
  EXPECT_STREQ(names[0], "calls");
  EXPECT_EQ(*bc[0], 3);
  DDT(DDCheckpointSave(net, opt, file.c_str()));
  Steps full = RunSteps(net, opt, in, 3, 3);
  /* a fresh network on a serial partition restarted from the checkpoint (agreement to rounding: other sums) */
  DDTensor x1 = MakeInput(Serial(xs), DD_FLOAT64, 1), t1 = MakeInput(Serial(ts), DD_FLOAT64, 2);
  DDTensor    in1[2] = {x1, t1};
  DDNet       net1   = BufferNet();
  DDT(DDNetSetUp(net1, 2, in1));
  DDOptimizer opt1 = Optimizer(net1);
  DDT(DDCheckpointLoad(net1, opt1, file.c_str()));
  DDLayer dr1;
  DDT(DDNetGetLayer(net1, "dr", &dr1));
  DDT(DDLayerGetBuffers(dr1, &nb, &names, &bt, &bc));
  EXPECT_EQ(*bc[0], 3) << "the dropout counter was not restored";
  Steps again = RunSteps(net1, opt1, in1, 3, 3);
  for (int s = 0; s < 3; s++) {
    EXPECT_NEAR(again.train[s], full.train[s], 1e-9 * std::fabs(full.train[s])) << "train step " << s;
    EXPECT_NEAR(again.eval[s], full.eval[s], 1e-9 * std::fabs(full.eval[s])) << "eval after step " << s;
  }
  DDT(DDOptimizerDestroy(&opt1));
  DDT(DDNetDestroy(&net1));
  DDT(DDTensorDestroy(&x1));
  DDT(DDTensorDestroy(&t1));
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  RemoveTestFile(file);
}

TEST(Checkpoints, CorruptedStaleAndForeignPaths)
{
  std::string file = Tmp("ck.h5"), tmp = file + ".tmp", fifo = Tmp("fifo"), dir = Tmp("dir"), link = Tmp("link.h5");
  const int   P    = Size();
  InputSpec   xs{{2, 2, 6, 4 * P}, {1, 1, 1, P}, {}, {}}, ts{{2, 1, 6, 4 * P}, {1, 1, 1, P}, {}, {}};
  DDTensor    x = MakeInput(xs, DD_FLOAT64, 1), t = MakeInput(ts, DD_FLOAT64, 2);
  DDTensor    in[2] = {x, t};
  DDNet       net   = BufferNet();
  DDT(DDNetSetUp(net, 2, in));
  /* a stale temporary file of a killed run (garbage) does not confuse the save */
  if (Rank() == 0) WriteBytes(tmp, "garbage from a killed run");
  MPI_Barrier(PETSC_COMM_WORLD);
  DDT(DDFileCheckWritable(PETSC_COMM_WORLD, file.c_str()));
  DDT(DDCheckpointSave(net, NULL, file.c_str()));
  EXPECT_NE(access(tmp.c_str(), F_OK), 0) << "the temporary file was left behind";
  DDT(DDCheckpointLoad(net, NULL, file.c_str()));
  /* a flipped byte in a parameter's data */
  if (Rank() == 0) FlipByte(file, (size_t)DataOffset(file, "params/c1.weight") + 5);
  else FlipByte(file, 0);
  DD_EXPECT_ERROR(DDCheckpointLoad(net, NULL, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "\"params/c1.weight\" of HDF5 file");
  /* and in a buffer's */
  DDT(DDCheckpointSave(net, NULL, file.c_str()));
  if (Rank() == 0) FlipByte(file, (size_t)DataOffset(file, "buffers/bn.running_var") + 7);
  else FlipByte(file, 0);
  DD_EXPECT_ERROR(DDCheckpointLoad(net, NULL, file.c_str()), PETSC_ERR_FILE_UNEXPECTED, "\"buffers/bn.running_var\" of HDF5 file");
  /* paths that are not regular files: a FIFO, a directory, a symbolic link, also as "<file>.tmp" */
  if (Rank() == 0) {
    unlink(fifo.c_str());
    rmdir(dir.c_str());
    unlink(link.c_str());
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  for (const std::string &p : {fifo, dir}) {
    DD_EXPECT_ERROR(DDFileCheckWritable(PETSC_COMM_WORLD, p.c_str()), PETSC_ERR_FILE_WRITE, "\"" + p + "\" exists and is not a regular file");
    DD_EXPECT_ERROR(DDCheckpointSave(net, NULL, p.c_str()), PETSC_ERR_FILE_WRITE, "\"" + p + "\" exists and is not a regular file");
    DD_EXPECT_ERROR(DDTensorWriteHDF5(x, p.c_str(), "x", PETSC_FALSE), PETSC_ERR_FILE_WRITE, "\"" + p + "\" exists and is not a regular file");
  }
  DD_EXPECT_ERROR(DDCheckpointSave(net, NULL, link.c_str()), PETSC_ERR_FILE_WRITE, "is a symbolic link");
  struct stat sb;
  EXPECT_EQ(stat(fifo.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISFIFO(sb.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(stat(dir.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISDIR(sb.st_mode));
  EXPECT_EQ(lstat(link.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISLNK(sb.st_mode)) << "the symbolic link was replaced";
  /* "<file>.tmp" a directory: refused before training, and by the save */
  std::string ck2 = Tmp("ck2.h5");
  if (Rank() == 0) mkdir((ck2 + ".tmp").c_str(), 0700);
  MPI_Barrier(PETSC_COMM_WORLD);
  DD_EXPECT_ERROR(DDFileCheckWritable(PETSC_COMM_WORLD, ck2.c_str()), PETSC_ERR_FILE_WRITE, ck2 + ".tmp");
  DD_EXPECT_ERROR(DDCheckpointSave(net, NULL, ck2.c_str()), PETSC_ERR_FILE_WRITE, ck2 + ".tmp");
  /* a directory that does not exist: found before any work */
  DD_EXPECT_ERROR(DDFileCheckWritable(PETSC_COMM_WORLD, "/nonexistent/dir/ck.h5"), PETSC_ERR_FILE_OPEN, "/nonexistent/dir/ck.h5");
  if (Rank() == 0) {
    rmdir((ck2 + ".tmp").c_str());
    unlink(fifo.c_str());
    rmdir(dir.c_str());
    unlink(link.c_str());
  }
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  RemoveTestFile(file);
}

/* six convolutions with 40-character names, the last one's width chosen: a signature of ~400 characters */
static DDNet LongNamedNet(const char *prefix, int lastchannels)
{
  std::string p = std::string("-") + prefix, layers;
  for (int i = 0; i < 6; i++) {
    std::string name = "a_rather_long_layer_name_for_signature_" + std::to_string(i);
    layers += (i ? "," : "") + name;
    DDT(PetscOptionsSetValue(NULL, (p + name + "_layer_type").c_str(), "conv"));
    DDT(PetscOptionsSetValue(NULL, (p + name + "_layer_conv_out_channels").c_str(), i == 5 ? std::to_string(lastchannels).c_str() : "2"));
    DDT(PetscOptionsSetValue(NULL, (p + name + "_layer_conv_kernel").c_str(), "1"));
  }
  DDT(PetscOptionsSetValue(NULL, (p + "net_inputs").c_str(), "x"));
  DDT(PetscOptionsSetValue(NULL, (p + "net_layers").c_str(), layers.c_str()));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, prefix));
  DDT(DDNetSetFromOptions(net));
  return net;
}

TEST(Checkpoints, AnotherNetworkNamesTheFirstParameterThatDiffers)
{
  /* the signatures agree for their first ~330 characters: a message cut at 200 characters never
     reached the layer that differs */
  std::string file = Tmp("sig.h5");
  const int   P    = Size();
  DDTensor    x    = MakeInput({{2, 1, 3, 2 * P}, {1, 1, 1, P}, {}, {}}, DD_FLOAT64, 1);
  DDNet       a = LongNamedNet("f12sa_", 3), b = LongNamedNet("f12sb_", 4);
  DDT(DDNetSetUp(a, 1, &x));
  DDT(DDNetSetUp(b, 1, &x));
  DDT(DDCheckpointSave(a, NULL, file.c_str()));
  std::string    m;
  PetscErrorCode e = Catch([&]() { return DDCheckpointLoad(b, NULL, file.c_str()); }, &m);
  EXPECT_EQ(e, PETSC_ERR_FILE_UNEXPECTED) << m;
  EXPECT_NE(m.find("the first that differs is parameter 10, a_rather_long_layer_name_for_signature_5.weight:3x2x1x1 in the file but a_rather_long_layer_name_for_signature_5.weight:4x2x1x1 in this network"), std::string::npos) << m;
  EXPECT_NE(m.find(file), std::string::npos) << m;
  DDT(DDCheckpointLoad(a, NULL, file.c_str())); /* its own checkpoint loads */
  DDT(DDNetDestroy(&a));
  DDT(DDNetDestroy(&b));
  DDT(DDTensorDestroy(&x));
  RemoveTestFile(file);
}

TEST(DataFiles, AnotherSampleShapeNamesBothShapes)
{
  std::string file = Tmp("shape.h5");
  DDDataset   ds   = NULL;
  RemoveTestFile(file);
  WriteSlices(file, 4, 4);
  DDT(OpenDataset(file, &ds));
  PetscInt        order;
  const PetscInt *ss;
  DDT(DDDatasetGetSampleShape(ds, 0, &order, &ss));
  ASSERT_GE(order, 1);
  /* a batch tensor for samples one entry wider in the last dimension */
  std::vector<PetscInt> bshape = {2}, bpart = {1};
  std::string           fs, bs;
  for (PetscInt k = 0; k < order; k++) {
    PetscInt v = ss[k] + (k == order - 1);
    bshape.push_back(v);
    bpart.push_back(1);
    fs += (k ? "x" : "") + std::to_string(ss[k]);
    bs += (k ? "x" : "") + std::to_string(v);
  }
  DDTensor t = MakeInput({bshape, bpart, {}, {}}, DD_FLOAT64, 1);
  std::string    m;
  PetscErrorCode e = Catch([&]() { return DDDatasetReadBatch(ds, 0, 0, 2, t); }, &m);
  EXPECT_EQ(e, PETSC_ERR_ARG_SIZ) << m;
  EXPECT_NE(m.find("have shape " + fs + ", but the batch tensor holds samples of shape " + bs), std::string::npos) << m;
  EXPECT_NE(m.find(file), std::string::npos) << m;
  DDT(DDTensorDestroy(&t));
  DDT(DDDatasetDestroy(&ds));
  RemoveTestFile(file);
}

/* the values of every parameter, buffer, counter and optimizer state, and the step count: what a failed load must leave as it was */
struct Snapshot {
  std::vector<std::vector<double>> tensors;
  std::vector<PetscInt64>          counters;
  PetscInt                         step = -1, epoch = -1;
  bool operator==(const Snapshot &o) const { return tensors == o.tensors && counters == o.counters && step == o.step && epoch == o.epoch; }
};

static Snapshot Snap(DDNet net, DDOptimizer opt)
{
  Snapshot  s;
  PetscInt  n, nl;
  DDTensor *ps;
  DDT(DDNetGetParameters(net, &n, &ps, NULL));
  for (PetscInt i = 0; i < n; i++) s.tensors.push_back(GatherAll(ps[i]));
  DDT(DDNetGetNumLayers(net, &nl));
  for (PetscInt i = 0; i < nl; i++) {
    DDLayer            l;
    const char        *name;
    PetscInt           nb;
    const char *const *bn;
    DDTensor          *bt;
    PetscInt64       **bc;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    DDT(DDLayerGetBuffers(l, &nb, &bn, &bt, &bc));
    for (PetscInt b = 0; b < nb; b++) {
      if (bt[b]) s.tensors.push_back(GatherAll(bt[b]));
      else s.counters.push_back(*bc[b]);
    }
  }
  if (opt) {
    PetscInt           ns;
    DDTensor          *st;
    const char *const *names;
    DDT(DDOptimizerGetState(opt, &ns, &st, &names));
    for (PetscInt i = 0; i < ns; i++) s.tensors.push_back(GatherAll(st[i]));
    DDT(DDOptimizerGetStepCount(opt, &s.step, &s.epoch));
  }
  return s;
}

/* on rank 0, with serial HDF5: edits an attribute of the file's root group or of a dataset */
static void EditFile(const std::string &file, const std::function<void(hid_t)> &edit)
{
  if (Rank() == 0) {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    edit(f);
    H5Fclose(f);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
}

static void WriteScalarAttribute(hid_t obj, const char *name, hid_t type, const void *v)
{
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, v);
  H5Aclose(a);
  H5Sclose(sp);
}

static ssize_t OpenFiles()
{
  return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
}

/* BufferNet() set up on a split input and target, with an Adam optimizer; destroyed with the holder */
struct BufferRun {
  DDTensor    x, t, in[2];
  DDNet       net;
  DDOptimizer opt;
  explicit BufferRun(bool init)
  {
    const int P = Size();
    x           = MakeInput({{4, 2, 6, 4 * P}, {1, 1, 1, P}, {}, {}}, DD_FLOAT64, 1);
    t           = MakeInput({{4, 1, 6, 4 * P}, {1, 1, 1, P}, {}, {}}, DD_FLOAT64, 2);
    in[0]       = x;
    in[1]       = t;
    net         = BufferNet();
    DDT(DDNetSetUp(net, 2, in));
    if (init) DDT(DDNetInitializeParameters(net, 3));
    opt = Optimizer(net);
  }
  ~BufferRun()
  {
    DDT(DDOptimizerDestroy(&opt));
    DDT(DDNetDestroy(&net));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&t));
  }
};

TEST(Checkpoints, AFailedLoadChangesNothing)
{
  std::string file = Tmp("ckatomic.h5"), wfile = Tmp("wsatomic.h5");
  BufferRun   run(true);
  DDNet       net = run.net;
  DDOptimizer opt = run.opt;
  DDTensor   *in  = run.in;
  RunSteps(net, opt, in, 0, 2);
  DDT(DDCheckpointSave(net, opt, file.c_str()));
  DDT(DDNetSaveWeights(net, wfile.c_str()));
  RunSteps(net, opt, in, 2, 1); /* now the network differs from the files */
  const Snapshot before = Snap(net, opt);
  std::string    m;

  /* the last parameter's dataset corrupted: found after the others were read */
  std::string good = Rank() == 0 ? ReadBytes(file) : "";
  EditFile(file, [](hid_t f) {
    hid_t    d = H5Dopen2(f, "params/c2.bias", H5P_DEFAULT), a = H5Aopen(d, "ddnn_checksum", H5P_DEFAULT);
    uint64_t sum;
    H5Aread(a, H5T_NATIVE_UINT64, &sum);
    H5Aclose(a);
    sum ^= 1;
    WriteScalarAttribute(d, "ddnn_checksum", H5T_NATIVE_UINT64, &sum);
    H5Dclose(d);
  });
  EXPECT_NE(Catch([&]() { return DDCheckpointLoad(net, opt, file.c_str()); }, &m), 0);
  EXPECT_NE(m.find("params/c2.bias"), std::string::npos) << m;
  EXPECT_TRUE(AllTrue(Snap(net, opt) == before)) << "a checkpoint that failed at its last parameter changed the network";
  EXPECT_EQ(OpenFiles(), 0);

  /* an unusable optimizer state (a negative second moment), checksum and all valid: the optimizer's check fails */
  if (Rank() == 0) WriteBytes(file, good);
  MPI_Barrier(PETSC_COMM_WORLD);
  {
    PetscInt           ns;
    DDTensor          *st, neg;
    const char *const *names;
    DDT(DDOptimizerGetState(opt, &ns, &st, &names));
    ASSERT_EQ(std::string(names[1]), "exp_avg_sq");
    DDT(DDTensorDuplicate(st[1], &neg));
    DDT(DDTensorSet(neg, -1.0));
    DDT(DDTensorWriteHDF5(neg, file.c_str(), "optimizer/c1.weight/exp_avg_sq", PETSC_TRUE));
    DDT(DDTensorDestroy(&neg));
  }
  EXPECT_NE(Catch([&]() { return DDCheckpointLoad(net, opt, file.c_str()); }, &m), 0);
  EXPECT_TRUE(AllTrue(Snap(net, opt) == before)) << "a checkpoint with an unusable optimizer state changed the network or the optimizer: " << m;

  /* a parameter holding a nan or an inf, checksum valid, in the checkpoint or the weights file: an error naming the file and dataset */
  {
    PetscInt    np;
    DDTensor   *ps, bad;
    const char *pname;
    DDT(DDNetGetParameters(net, &np, &ps, NULL));
    DDT(DDNetGetParameterName(net, np - 1, &pname));
    DDT(DDTensorDuplicate(ps[np - 1], &bad));
    for (double v : {(double)NAN, -(double)INFINITY}) {
      const std::string what = std::isnan(v) ? "a nan" : "an inf";
      DDT(DDTensorSet(bad, 0.5));
      {
        void    *a;
        PetscInt ml;
        int      holder;
        DDT(DDTensorGetLocalSize(bad, &ml));
        const int me = ml > 0 ? Rank() : -1;
        MPI_Allreduce(&me, &holder, 1, MPI_INT, MPI_MAX, PETSC_COMM_WORLD);
        DDT(DDTensorGetArray(bad, &a));
        if (Rank() == holder) ((double *)a)[ml - 1] = v; /* on one rank: the last that holds entries */
        DDT(DDTensorRestoreArray(bad, &a));
      }
      if (Rank() == 0) WriteBytes(file, good);
      MPI_Barrier(PETSC_COMM_WORLD);
      DDT(DDTensorWriteHDF5(bad, file.c_str(), (std::string("params/") + pname).c_str(), PETSC_TRUE));
      EXPECT_EQ(Catch([&]() { return DDCheckpointLoad(net, opt, file.c_str()); }, &m), PETSC_ERR_FILE_UNEXPECTED);
      EXPECT_NE(m.find(std::string("Dataset \"params/") + pname + "\" of \"" + file + "\" holds " + what), std::string::npos) << m;
      EXPECT_TRUE(AllTrue(Snap(net, opt) == before)) << "a checkpoint with a non-finite parameter changed the network";
      DDT(DDNetSaveWeights(net, wfile.c_str()));
      DDT(DDTensorWriteHDF5(bad, wfile.c_str(), pname, PETSC_TRUE));
      EXPECT_EQ(Catch([&]() { return DDNetLoadWeights(net, wfile.c_str()); }, &m), PETSC_ERR_FILE_UNEXPECTED);
      EXPECT_NE(m.find(std::string("Dataset \"") + pname + "\" of \"" + wfile + "\" holds " + what), std::string::npos) << m;
      EXPECT_TRUE(AllTrue(Snap(net, opt) == before)) << "a weights file with a non-finite parameter changed the network";
    }
    DDT(DDTensorDestroy(&bad));
  }

  /* an attribute of the wrong type is an error naming it, not a 0 */
  if (Rank() == 0) WriteBytes(file, good);
  MPI_Barrier(PETSC_COMM_WORLD);
  EditFile(file, [](hid_t f) {
    hid_t s = H5Tcopy(H5T_C_S1);
    H5Tset_size(s, 2);
    WriteScalarAttribute(f, "ddnn_step", s, "3");
    H5Tclose(s);
  });
  EXPECT_EQ(Catch([&]() { return DDCheckpointLoad(net, opt, file.c_str()); }, &m), PETSC_ERR_FILE_UNEXPECTED);
  EXPECT_NE(m.find("\"ddnn_step\""), std::string::npos) << m;
  EXPECT_NE(m.find("is not one integer"), std::string::npos) << m;
  EXPECT_TRUE(AllTrue(Snap(net, opt) == before));
  EditFile(file, [](hid_t f) {
    long long big = 1LL << 40; /* does not fit a 32-bit PetscInt */
    WriteScalarAttribute(f, "ddnn_step", H5T_NATIVE_LLONG, &big);
  });
  EXPECT_NE(Catch([&]() { return DDCheckpointLoad(net, opt, file.c_str()); }, &m), 0);
  if (sizeof(PetscInt) == 4) EXPECT_NE(m.find("exceeds PetscInt"), std::string::npos) << m;
  /* a variable-length string (h5py's default for str) reads as its value */
  if (Rank() == 0) WriteBytes(file, good);
  MPI_Barrier(PETSC_COMM_WORLD);
  EditFile(file, [](hid_t f) {
    hid_t a = H5Aopen(f, "ddnn_signature", H5P_DEFAULT), ft = H5Aget_type(a);
    std::vector<char> sig(H5Tget_size(ft) + 1, 0);
    H5Aread(a, ft, sig.data());
    H5Tclose(ft);
    H5Aclose(a);
    hid_t       v = H5Tcopy(H5T_C_S1);
    const char *p = sig.data();
    H5Tset_size(v, H5T_VARIABLE);
    WriteScalarAttribute(f, "ddnn_signature", v, &p);
    H5Tclose(v);
  });
  DDT(DDCheckpointLoad(net, opt, file.c_str()));
  EXPECT_FALSE(AllTrue(Snap(net, opt) == before)) << "the checkpoint was not loaded";

  /* a weights file whose last tensor has another shape: nothing is loaded */
  RunSteps(net, opt, in, 3, 1);
  const Snapshot now = Snap(net, NULL);
  EditFile(wfile, [](hid_t f) {
    H5Ldelete(f, "c2.bias", H5P_DEFAULT);
    hsize_t two = 2;
    hid_t   sp = H5Screate_simple(1, &two, NULL), d = H5Dcreate2(f, "c2.bias", H5T_NATIVE_DOUBLE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(sp);
  });
  EXPECT_EQ(Catch([&]() { return DDNetLoadWeights(net, wfile.c_str()); }, &m), PETSC_ERR_FILE_UNEXPECTED);
  EXPECT_NE(m.find("c2.bias"), std::string::npos) << m;
  EXPECT_TRUE(AllTrue(Snap(net, NULL) == now)) << "a weights file that failed at its last tensor changed the network";
  EXPECT_EQ(OpenFiles(), 0);

  /* a parameter's dataset replaced by a soft link to another one (whose checksum is the other's): refused, naming it */
  const Snapshot then = Snap(net, opt);
  if (Rank() == 0) WriteBytes(file, good);
  MPI_Barrier(PETSC_COMM_WORLD);
  EditFile(file, [](hid_t f) {
    H5Ldelete(f, "params/c2.bias", H5P_DEFAULT);
    H5Lcreate_soft("/params/c1.bias", f, "params/c2.bias", H5P_DEFAULT, H5P_DEFAULT);
  });
  EXPECT_EQ(Catch([&]() { return DDCheckpointLoad(net, opt, file.c_str()); }, &m), PETSC_ERR_FILE_UNEXPECTED);
  EXPECT_NE(m.find("\"params/c2.bias\" in HDF5 file \"" + file + "\" is a soft or external link"), std::string::npos) << m;
  EXPECT_TRUE(AllTrue(Snap(net, opt) == then));

  /* a string attribute rewritten the way h5py writes str (variable length, UTF-8) holds the same value: it loads (last: the network changes) */
  if (Rank() == 0) WriteBytes(file, good);
  MPI_Barrier(PETSC_COMM_WORLD);
  EditFile(file, [](hid_t f) {
    hid_t       s = H5Tcopy(H5T_C_S1);
    const char *v = "adam";
    H5Tset_size(s, H5T_VARIABLE);
    H5Tset_cset(s, H5T_CSET_UTF8);
    WriteScalarAttribute(f, "ddnn_optimizer", s, &v);
    H5Tclose(s);
  });
  DDT(DDCheckpointLoad(net, opt, file.c_str()));

  RemoveTestFile(file);
  RemoveTestFile(wfile);
}

TEST(Checkpoints, AFailedWriteLeavesNoFileOpenAndNoTemporary)
{
  std::string file = Tmp("ckfail.h5"), dfile = Tmp("slicefail.h5");
  BufferRun   run(true);
  DDNet       net = run.net;
  DDOptimizer opt = run.opt;
  DDTensor    x = run.x, t = run.t;
  DDT(DDCheckpointSave(net, opt, file.c_str()));
  const std::string good = Rank() == 0 ? ReadBytes(file) : "";
  std::string       m;
  ASSERT_EQ(OpenFiles(), 0);
  /* an optimizer of another parameter list: refused before the file is touched */
  DDOptimizer other;
  PetscInt    n;
  DDTensor   *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &other));
  DDT(DDOptimizerSetType(other, DDOPTIMIZERADAM));
  DDT(DDOptimizerSetUp(other, n - 1, ps, gs));
  EXPECT_EQ(Catch([&]() { return DDCheckpointSave(net, other, file.c_str()); }, &m), PETSC_ERR_ARG_INCOMP);
  EXPECT_EQ(OpenFiles(), 0);
  /* failures inside a write: a tensor under a dataset's path, a slice of another shape */
  EXPECT_NE(Catch([&]() { return DDTensorWriteHDF5(x, file.c_str(), "params/c1.weight/x", PETSC_TRUE); }, &m), 0);
  EXPECT_EQ(OpenFiles(), 0) << "a failed DDTensorWriteHDF5() left its file open";
  DDT(DDTensorWriteHDF5Slice(t, dfile.c_str(), "input", 0, 3));
  EXPECT_EQ(Catch([&]() { return DDTensorWriteHDF5Slice(x, dfile.c_str(), "input", 1, 3); }, &m), PETSC_ERR_FILE_UNEXPECTED);
  EXPECT_NE(m.find("exists with another shape"), std::string::npos) << m;
  EXPECT_EQ(OpenFiles(), 0) << "a failed DDTensorWriteHDF5Slice() left its file open";
  /* the checkpoint is intact (the failed tensor write appended nothing), loads, and no temporary is left */
  if (Rank() == 0) {
    struct stat sb;
    EXPECT_NE(stat((file + ".tmp").c_str(), &sb), 0) << "a temporary was left";
  }
  DDT(DDCheckpointLoad(net, opt, file.c_str()));
  DDT(DDOptimizerDestroy(&other));
  RemoveTestFile(file);
  RemoveTestFile(dfile);
}

TEST(Checkpoints, AnOptimizerOfANetworkSetUpAgainIsAnError)
{
  std::string file = Tmp("ckresetup.h5");
  BufferRun   run(false);
  DDNet       net = run.net;
  DDOptimizer opt = run.opt;
  DDTensor   *in  = run.in;
  RunSteps(net, opt, in, 0, 1);
  DDT(DDCheckpointSave(net, opt, file.c_str()));
  /* set up again: new parameter tensors; the optimizer's are no longer the network's (its steps used to update them silently) */
  DDT(DDNetSetUp(net, 2, in));
  DDT(DDNetForward(net, 2, in));
  DDT(DDNetBackward(net, NULL));
  DD_EXPECT_ERROR(DDOptimizerStep(opt), PETSC_ERR_ARG_WRONGSTATE, "DDOptimizerStep: parameter 0 of the optimizer is no longer its layer's");
  DD_EXPECT_ERROR(DDCheckpointSave(net, opt, file.c_str()), PETSC_ERR_ARG_WRONGSTATE, "DDCheckpointSave: parameter 0 of the optimizer is no longer its layer's");
  DD_EXPECT_ERROR(DDCheckpointLoad(net, opt, file.c_str()), PETSC_ERR_ARG_WRONGSTATE, "DDCheckpointLoad: parameter 0");
  /* an optimizer of other parameters (here: all but the last) */
  PetscInt  n;
  DDTensor *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerSetUp(opt, n - 1, ps, gs));
  DD_EXPECT_ERROR(DDCheckpointSave(net, opt, file.c_str()), PETSC_ERR_ARG_INCOMP, "the optimizer was not set up with this network's parameters");
  /* set up again with the network's parameters: it steps, saves and loads */
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  DDT(DDCheckpointLoad(net, opt, file.c_str()));
  RunSteps(net, opt, in, 1, 1);
  DDT(DDCheckpointSave(net, opt, file.c_str()));
  RemoveTestFile(file);
}
