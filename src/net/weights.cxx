/*
  Weights in and out as a PyTorch state_dict: one HDF5 dataset per tensor, named as torch names
  it ("<module>.<param>", "<module>.<buffer>"), of the tensor's global shape in torch's layout
  (conv weights (Co, Ci, k...), transposed conv (Ci, Co, k...), affine (Fo, Fi): ddnn's layouts
  are torch's). Each rank reads or writes only its piece, collectively (src/io/hdf5.cxx), so a
  file written by torch (share/ddnn/torch_to_h5.py) loads into a network on any number of ranks
  and a file written here loads into torch (share/ddnn/h5_to_torch.py).
*/
#include <ddnn/private/ddnetimpl.h>
#include <io/h5util.hpp>
#include <map>
#include <set>
#include <sys/ddcxx.hpp>

using namespace ddnn;

namespace
{
/* one tensor of the state_dict: a parameter or buffer tensor, or an integer counter */
struct Entry {
  std::string path;  /* the dataset: "<weights name>.<param or buffer>" */
  std::string layer; /* the ddnn layer, for messages */
  std::string what;  /* "parameter weight", "buffer running_mean" */
  DDTensor    t = NULL;
  PetscInt64 *c = NULL;
};
} // namespace

/* counters that PyTorch keeps in its state_dict; the others (dropout's call count) are ddnn's own
   state, saved by checkpoints only */
static bool TorchCounter(const char *name)
{
  return std::string(name) == "num_batches_tracked";
}

/* the weights name of node i: -<layer prefix>layer_weights_name, else the one set in code, else the layer's name */
static PetscErrorCode WeightsName(DDNet net, size_t i, std::string &wname)
{
  NetNode    &nd = net->impl->nodes[i];
  const char *prefix;
  char        buf[PETSC_MAX_PATH_LEN];
  PetscBool   flg = PETSC_FALSE;

  PetscFunctionBegin;
  wname = nd.weightsnameset ? nd.weightsname : nd.name;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)nd.layer, &prefix));
  if (prefix) PetscCall(PetscOptionsGetString(((PetscObject)nd.layer)->options, prefix, "-layer_weights_name", buf, sizeof(buf), &flg));
  if (flg) wname = buf;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the network's state_dict entries, in layer order (parameters, then buffers); two entries of one name are an error */
static PetscErrorCode Entries(DDNet net, std::vector<Entry> &es)
{
  MPI_Comm                           comm = PetscObjectComm((PetscObject)net);
  std::map<std::string, std::string> owner;

  PetscFunctionBegin;
  es.clear();
  for (size_t i = 0; i < net->impl->nodes.size(); i++) {
    NetNode           &nd = net->impl->nodes[i];
    std::string        wname;
    PetscInt           nb;
    const char *const *bn;
    DDTensor          *bt;
    PetscInt64       **bc;
    PetscCall(WeightsName(net, i, wname));
    const std::string pre = wname.empty() ? "" : wname + ".";
    for (PetscInt k = 0; k < nd.layer->nparams; k++) {
      Entry e;
      e.path  = pre + nd.layer->paramnames[k];
      e.layer = nd.name;
      e.what  = std::string("parameter \"") + nd.layer->paramnames[k] + "\"";
      e.t     = nd.layer->params[k];
      es.push_back(e);
    }
    PetscCall(DDLayerGetBuffers(nd.layer, &nb, &bn, &bt, &bc));
    for (PetscInt b = 0; b < nb; b++) {
      if (!bt[b] && !TorchCounter(bn[b])) continue;
      Entry e;
      e.path  = pre + bn[b];
      e.layer = nd.name;
      e.what  = std::string("buffer \"") + bn[b] + "\"";
      e.t     = bt[b];
      e.c     = bc[b];
      es.push_back(e);
    }
  }
  for (auto &e : es) {
    auto it = owner.find(e.path);
    PetscCheck(it == owner.end(), comm, PETSC_ERR_ARG_WRONG, "Two tensors of the network have the weights name \"%s\": %s and %s of layer \"%s\"; give the layers distinct names with -<layer>_layer_weights_name or DDNetSetLayerWeightsName()", e.path.c_str(), it->second.c_str(), e.what.c_str(), e.layer.c_str());
    owner[e.path] = e.what + " of layer \"" + e.layer + "\"";
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static std::string Dims(const std::vector<PetscInt> &v)
{
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? "x" : "") + std::to_string(v[i]);
  return s.empty() ? "() (a scalar)" : s;
}

/* every dataset of the file, by its full path without the leading "/" */
#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t DDH5ObjInfo;
#else
typedef H5O_info_t DDH5ObjInfo;
#endif
static herr_t VisitDataset(hid_t, const char *name, const DDH5ObjInfo *info, void *ctx)
{
  if (info->type == H5O_TYPE_DATASET) ((std::vector<std::string> *)ctx)->push_back(name);
  return 0;
}

/* reads an integer counter (a scalar or one-element dataset, integer or floating point) on every rank into *value */
static PetscErrorCode ReadCounter(MPI_Comm comm, hid_t fid, const char *file, const Entry &e, PetscInt64 *value)
{
  std::vector<PetscInt> dims;

  PetscFunctionBegin;
  PetscCall(H5DatasetShape(comm, fid, file, e.path.c_str(), dims));
  PetscInt64 n = 1;
  for (auto d : dims) n *= d;
  DDCheckAll(comm, n == 1, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" (%s of layer \"%s\") has %" PetscInt64_FMT " entries: a counter has one (torch stores a 0-d int64 tensor)", e.path.c_str(), file, e.what.c_str(), e.layer.c_str(), n);
  hid_t     dset = H5Dopen2(fid, e.path.c_str(), H5P_DEFAULT);
  hid_t     ft   = H5Dget_type(dset);
  H5T_class_t cl = H5Tget_class(ft);
  H5Tclose(ft);
  long long v  = 0;
  herr_t    st = -1;
  if (cl == H5T_INTEGER || cl == H5T_FLOAT) st = H5Dread(dset, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
  H5Dclose(dset);
  DDCheckAll(comm, cl == H5T_INTEGER || cl == H5T_FLOAT, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" (%s of layer \"%s\") is not numeric", e.path.c_str(), file, e.what.c_str(), e.layer.c_str());
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_READ, "Reading dataset \"%s\" of \"%s\" failed (truncated file?)", e.path.c_str(), file);
  DDCheckAll(comm, v >= 0, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" (%s of layer \"%s\") holds %lld: a counter is not negative", e.path.c_str(), file, e.what.c_str(), e.layer.c_str(), v);
  { /* the same on every rank (it is read independently) */
    long long mn = v, mx = v;
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_LONG_LONG, MPI_MIN, comm));
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_LONG_LONG, MPI_MAX, comm));
    PetscCheck(mn == mx, comm, PETSC_ERR_FILE_READ, "Dataset \"%s\" of \"%s\" was read differently on different ranks", e.path.c_str(), file);
  }
  *value = (PetscInt64)v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* writes an integer counter as a 0-d int64 dataset (as torch stores num_batches_tracked); rank 0 writes */
static PetscErrorCode WriteCounter(MPI_Comm comm, hid_t fid, const Entry &e)
{
  PetscMPIInt rank;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t fsp  = H5Screate(H5S_SCALAR);
  hid_t dset = H5Dcreate2(fid, e.path.c_str(), H5T_STD_I64LE, fsp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  if (dset < 0) H5Sclose(fsp);
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_WRITE, "Cannot create HDF5 dataset \"%s\"", e.path.c_str());
  hid_t msp = H5Screate(H5S_SCALAR);
  if (rank) {
    H5Sselect_none(fsp);
    H5Sselect_none(msp);
  }
  long long v    = (long long)*e.c;
  hid_t     dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  herr_t st = H5Dwrite(dset, H5T_NATIVE_LLONG, msp, fsp, dxpl, &v);
  H5Pclose(dxpl);
  H5Sclose(msp);
  H5Sclose(fsp);
  H5Dclose(dset);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_WRITE, "Writing HDF5 dataset \"%s\" failed", e.path.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDNetSetLayerWeightsName - Sets the name under which a layer's parameters and buffers appear in a weights file (a PyTorch state_dict)

  Logically collective

  Input Parameters:
+ net   - the network
. layer - the name of a layer of the network
- name  - the module's name in PyTorch ("conv1", "features.0", "encoder.block1.conv"); "" for tensors without a module prefix

  Options Database Key:
. -<layer>_layer_weights_name <name> - the same (with the network's prefix, if any); given, it overrides the name set here

  Notes:
  The layer's tensor "weight" is then the dataset "<name>.weight", its buffer "running_mean" the
  dataset "<name>.running_mean", and so on. The default name is the layer's name.

  Level: intermediate

.seealso: `DDNetLoadWeights()`, `DDNetSaveWeights()`
@*/
PetscErrorCode DDNetSetLayerWeightsName(DDNet net, const char layer[], const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidCharPointer(layer, 2);
  PetscValidCharPointer(name, 3);
  for (auto &nd : net->impl->nodes)
    if (nd.name == layer) {
      nd.weightsname    = name;
      nd.weightsnameset = true;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  SETERRQ(PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONG, "The network has no layer \"%s\"", layer);
}
DD_CXX_CATCH

/*@C
  DDNetLoadWeights - Reads a network's parameters and buffers from an HDF5 file holding a PyTorch state_dict

  Collective

  Input Parameters:
+ net  - a set-up network (any partition, any number of ranks)
- file - the HDF5 file: one dataset per tensor, named by PyTorch's state_dict keys, of the global shape torch gives it

  Options Database Keys:
+ -net_load_weights <file.h5> - `DDNetSetUp()` ends by loading the file (after initializing the parameters)
- -<layer>_layer_weights_name <name> - the layer's module name in the file (default: the layer's name; `DDNetSetLayerWeightsName()`)

  Notes:
  The layer "c1" with weights name "conv1" reads "conv1.weight", "conv1.bias" and, for batch
  normalization, "conv1.running_mean", "conv1.running_var" and "conv1.num_batches_tracked" (an
  int64 dataset in torch's files, 0-d; a counter of `DDLayerGetBuffers()`). ddnn's layouts are
  torch's (conv weights (Co, Ci, k...), transposed (Ci, Co, k...), affine (Fo, Fi)), so the
  datasets are the state_dict's tensors as they are. float32 and float64 datasets convert to the
  network's type. Counters that are ddnn's own (dropout's call count) are not in weights files;
  checkpoints (`DDCheckpointSave()`) keep them. Write a torch module's file with
  share/ddnn/torch_to_h5.py.

  Each rank reads only its piece of each tensor. Errors, on every rank, name the tensor: a
  dataset the network needs that the file lacks (with the layer and its weights name), a dataset
  of the file that no tensor of the network consumes (the file is another network's, or a
  weights name is wrong), a dataset of another shape (both shapes), two layers with one
  weights name; a corrupted dataset when it has a ddnn checksum (files written by torch have
  none, and none is required); a value that is nan or inf, or a float64 value beyond float32's
  range read into a float32 network; a dataset that is a soft or external link. Everything is read and checked before any tensor of the network
  changes (a copy of its parameters and buffers is held meanwhile): after an error the network
  is as it was.

  Level: beginner

.seealso: `DDNetSaveWeights()`, `DDNetSetLayerWeightsName()`, `DDCheckpointLoad()`, `DDTensorReadHDF5()`
@*/
PetscErrorCode DDNetLoadWeights(DDNet net, const char file[])
DD_CXX_TRY
{
  MPI_Comm           comm;
  std::vector<Entry> es;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidCharPointer(file, 2);
  comm = PetscObjectComm((PetscObject)net);
  PetscCheck(net->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() before DDNetLoadWeights() (or give -net_load_weights)");
  PetscCall(Entries(net, es));
  /* read into copies and checked first: a file that fails part way (a shape, a checksum) leaves the network as it was */
  Copies                  in;
  std::vector<PetscInt64> cvals(es.size(), 0);
  PetscCall(H5WithFile(comm, file, 'r', [&](hid_t fid) -> PetscErrorCode {
    std::vector<std::string> ds;
    std::set<std::string>    need;
    PetscFunctionBegin;
#if H5_VERSION_GE(1, 12, 0)
    herr_t vst = H5Ovisit3(fid, H5_INDEX_NAME, H5_ITER_NATIVE, VisitDataset, &ds, H5O_INFO_BASIC);
#else
    herr_t vst = H5Ovisit(fid, H5_INDEX_NAME, H5_ITER_NATIVE, VisitDataset, &ds);
#endif
    DDCheckAll(comm, vst >= 0, PETSC_ERR_FILE_UNEXPECTED, "Cannot list the datasets of HDF5 file \"%s\" (corrupted metadata?)", file);
    std::set<std::string> have(ds.begin(), ds.end());
    for (auto &e : es) {
      need.insert(e.path);
      DDCheckAll(comm, have.count(e.path) > 0, PETSC_ERR_FILE_UNEXPECTED, "Weights file \"%s\" has no dataset \"%s\" (%s of layer \"%s\"); set the layer's module name with -%s_layer_weights_name or DDNetSetLayerWeightsName()", file, e.path.c_str(), e.what.c_str(), e.layer.c_str(), e.layer.c_str());
    }
    for (auto &d : ds) DDCheckAll(comm, need.count(d) > 0, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of weights file \"%s\" is not a tensor of the network (%zu datasets in the file, %zu tensors in the network): the file is another network's, or a layer's weights name (-<layer>_layer_weights_name) is wrong", d.c_str(), file, ds.size(), es.size());
    for (auto &e : es) {
      if (e.t) {
        std::vector<PetscInt> fd, td(e.t->shape, e.t->shape + e.t->order);
        PetscCall(H5DatasetShape(comm, fid, file, e.path.c_str(), fd));
        DDCheckAll(comm, fd == td, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in weights file \"%s\" (%s of layer \"%s\") has shape %s, the network's tensor %s", e.path.c_str(), file, e.what.c_str(), e.layer.c_str(), Dims(fd).c_str(), Dims(td).c_str());
        PetscCall(in.ReadFrom(fid, file, e.path.c_str(), e.t, false));
      } else PetscCall(ReadCounter(comm, fid, file, e, &cvals[&e - es.data()]));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscCall(in.Commit());
  for (size_t i = 0; i < es.size(); i++)
    if (!es[i].t) *es[i].c = cvals[i];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetSaveWeights - Writes a network's parameters and buffers to an HDF5 file as a PyTorch state_dict

  Collective

  Input Parameters:
+ net  - a set-up network
- file - the HDF5 file (replaced)

  Notes:
  One dataset per tensor, named and laid out as `DDNetLoadWeights()` reads them
  ("<weights name>.weight", "<weights name>.running_mean", ..., num_batches_tracked as a 0-d
  int64 dataset), in the network's type, each with ddnn's content checksum as an attribute (torch
  ignores it). Load it into a torch module with share/ddnn/h5_to_torch.py. The file is written as
  "<file>.tmp" and renamed when complete (`DDFileCommit()`); a save that fails removes the temporary
  and leaves an existing file as it was. Optimizer state and ddnn's own
  counters are not saved: use `DDCheckpointSave()` to resume training.

  Level: beginner

.seealso: `DDNetLoadWeights()`, `DDNetSetLayerWeightsName()`, `DDCheckpointSave()`
@*/
PetscErrorCode DDNetSaveWeights(DDNet net, const char file[])
DD_CXX_TRY
{
  MPI_Comm           comm;
  std::vector<Entry> es;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidCharPointer(file, 2);
  comm = PetscObjectComm((PetscObject)net);
  PetscCheck(net->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() before DDNetSaveWeights()");
  PetscCall(Entries(net, es));
  PetscCall(H5WriteAtomically(comm, file, [&](hid_t fid) -> PetscErrorCode {
    PetscFunctionBegin;
    for (auto &e : es) {
      if (e.t) PetscCall(H5WriteTensor(fid, e.path.c_str(), e.t));
      else PetscCall(WriteCounter(comm, fid, e));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
