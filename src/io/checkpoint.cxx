/*
  Checkpoints: parameters, the layers' buffers (running statistics, counters) and optimizer
  state in one HDF5 file, each tensor a dataset of its global shape (so a checkpoint written on
  4 ranks loads on 1, 2 or 3) with a content checksum, and the network's signature (parameter
  names and shapes) to refuse another network's file. Written to "<file>.tmp", synced to disk and
  renamed when complete, so an interrupted write leaves the previous checkpoint intact.
*/
#include <io/h5util.hpp>
#include <ddnn/private/ddoptimizerimpl.h>
#include <dddataset.h>
#include <cstdio>
#include <string>
#include <vector>
#include <sys/ddcxx.hpp>

using namespace ddnn;

static PetscErrorCode Signature(DDNet net, std::string &sig)
{
  PetscInt  n;
  DDTensor *ps;

  PetscFunctionBegin;
  PetscCall(DDNetGetParameters(net, &n, &ps, NULL));
  sig.clear();
  for (PetscInt i = 0; i < n; i++) {
    const char *name;
    PetscCall(DDNetGetParameterName(net, i, &name));
    sig += name;
    sig += ":";
    for (PetscInt k = 0; k < ps[i]->order; k++) sig += (k ? "x" : "") + std::to_string(ps[i]->shape[k]);
    sig += ";";
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the first entry ("<layer>.<param>:<shape>") where two signatures differ, its index, and the entry counts */
static void SignatureFirstDifference(const std::string &a, const std::string &b, PetscInt *k, std::string &ea, std::string &eb, PetscInt *na, PetscInt *nb)
{
  auto split = [](const std::string &s) {
    std::vector<std::string> v;
    size_t                   p = 0, q;
    while ((q = s.find(';', p)) != std::string::npos) {
      v.push_back(s.substr(p, q - p));
      p = q + 1;
    }
    if (p < s.size()) v.push_back(s.substr(p));
    return v;
  };
  std::vector<std::string> va = split(a), vb = split(b);
  size_t                   i  = 0;
  while (i < va.size() && i < vb.size() && va[i] == vb[i]) i++;
  *k  = (PetscInt)i;
  ea  = i < va.size() ? va[i] : "";
  eb  = i < vb.size() ? vb[i] : "";
  *na = (PetscInt)va.size();
  *nb = (PetscInt)vb.size();
}

/* calls f(name "<layer>.<buffer>", tensor or NULL, counter or NULL) for every buffer of every layer */
template <class F>
static PetscErrorCode ForEachBuffer(DDNet net, F &&f)
{
  PetscInt nl;

  PetscFunctionBegin;
  PetscCall(DDNetGetNumLayers(net, &nl));
  for (PetscInt i = 0; i < nl; i++) {
    DDLayer            l;
    const char        *lname;
    PetscInt           nb;
    const char *const *bn;
    DDTensor          *bt;
    PetscInt64       **bc;
    PetscCall(DDNetGetLayerByIndex(net, i, &l, &lname));
    PetscCall(DDLayerGetBuffers(l, &nb, &bn, &bt, &bc));
    for (PetscInt b = 0; b < nb; b++) PetscCall(f(std::string(lname) + "." + bn[b], bt[b], bc[b]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the optimizer was set up with exactly the network's parameters, in order (its state i / (ns / n) is parameter i's), and they are still the layers' */
static PetscErrorCode CheckOptimizer(DDNet net, DDOptimizer opt, const char caller[])
{
  PetscInt  n;
  DDTensor *ps;
  bool      same;

  PetscFunctionBegin;
  PetscCall(DDOptimizerCheckParameters_Private(opt, caller));
  PetscCall(DDNetGetParameters(net, &n, &ps, NULL));
  same = opt->setupcalled && opt->params->size() == (size_t)n;
  for (PetscInt i = 0; same && i < n; i++) same = (*opt->params)[i] == ps[i];
  PetscCheck(same, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_INCOMP, "%s: the optimizer was not set up with this network's parameters (%zu parameters against the network's %" PetscInt_FMT ", in its order: DDOptimizerSetUp() with DDNetGetParameters())", caller, opt->params->size(), n);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDCheckpointSave - Writes the network's parameters and the optimizer's state to an HDF5 file

  Collective

  Input Parameters:
+ net  - a set-up network
. opt  - its optimizer, or NULL
- file - the checkpoint file

  Notes:
  The layout does not depend on the partition: every tensor is a dataset of its global shape
  ("params/<layer>.<param>", "buffers/<layer>.<buffer>", "optimizer/<layer>.<param>/<state>")
  with a content checksum; the layers' counters (`DDLayerGetBuffers()`: num_batches_tracked,
  dropout's call count) and the optimizer's step and epoch are attributes. So a restarted run
  continues exactly as the uninterrupted one, in training and in evaluation mode, on any number
  of ranks. The file is written as "<file>.tmp" (a stale one from a killed run is overwritten),
  synced to disk and renamed at the end (`DDFileCommit()`); a save that fails removes the
  temporary and leaves an existing file as it was. A path that is not a regular file
  (/dev/null, a directory) is refused. Check the path before training with `DDFileCheckWritable()`.

  Level: beginner

.seealso: `DDCheckpointLoad()`
@*/
PetscErrorCode DDCheckpointSave(DDNet net, DDOptimizer opt, const char file[])
DD_CXX_TRY
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)net);
  std::string sig;
  PetscInt    n;
  DDTensor   *ps;

  PetscFunctionBegin;
  PetscCall(Signature(net, sig));
  PetscCall(DDNetGetParameters(net, &n, &ps, NULL));
  if (opt) PetscCall(CheckOptimizer(net, opt, "DDCheckpointSave"));
  PetscCall(H5WriteAtomically(comm, file, [&](hid_t fid) -> PetscErrorCode {
    PetscFunctionBegin;
    for (PetscInt i = 0; i < n; i++) {
      const char *name;
      PetscCall(DDNetGetParameterName(net, i, &name));
      PetscCall(H5WriteTensor(fid, (std::string("params/") + name).c_str(), ps[i]));
    }
    PetscCall(ForEachBuffer(net, [&](const std::string &bname, DDTensor t, PetscInt64 *c) -> PetscErrorCode {
      PetscFunctionBegin;
      if (t) PetscCall(H5WriteTensor(fid, ("buffers/" + bname).c_str(), t));
      else PetscCall(H5WriteIntAttribute(fid, ("ddnn_counter " + bname).c_str(), *c));
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    PetscCall(H5WriteStringAttribute(fid, "ddnn_signature", sig));
    if (opt) {
      PetscInt           ns, step, epoch;
      DDTensor          *st;
      const char *const *names;
      DDOptimizerType    type;
      PetscCall(DDOptimizerGetState(opt, &ns, &st, &names));
      PetscCall(DDOptimizerGetType(opt, &type));
      PetscCall(DDOptimizerGetStepCount(opt, &step, &epoch));
      for (PetscInt i = 0; i < ns; i++) {
        const char *pname;
        PetscCall(DDNetGetParameterName(net, i / (ns / PetscMax(n, 1)), &pname));
        PetscCall(H5WriteTensor(fid, (std::string("optimizer/") + pname + "/" + names[i]).c_str(), st[i]));
      }
      PetscCall(H5WriteStringAttribute(fid, "ddnn_optimizer", type));
      PetscCall(H5WriteIntAttribute(fid, "ddnn_step", step));
      PetscCall(H5WriteIntAttribute(fid, "ddnn_epoch", epoch));
    } else PetscCall(H5WriteStringAttribute(fid, "ddnn_optimizer", "none"));
    PetscCall(H5WriteIntAttribute(fid, "ddnn_checkpoint_version", 2)); /* last: the file is complete */
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDCheckpointLoad - Restores the parameters (and optimizer state) from a checkpoint, on any partition

  Collective

  Input Parameters:
+ net  - a set-up network, the same architecture as the one saved (any partition)
. opt  - its optimizer set up on the network's parameters, or NULL
- file - the checkpoint

  Notes:
  Restores the parameters, the layers' buffers (`DDLayerGetBuffers()`) and the optimizer's state
  and step count. Errors on every rank, naming the file (and dataset), when the file is missing,
  truncated, incomplete or from an older ddnn, corrupted (a content checksum or HDF5 metadata
  checksum does not match), when it comes from another network (parameter names or shapes
  differ: the first parameter that differs is named, with its shape in the file and in the network)
  or another optimizer, when an attribute has the wrong type, when a parameter, buffer or optimizer
  state holds a nan or an inf (or a float64 value beyond float32's range for a float32 network) or
  is a soft or external link instead of a dataset of its own,
  or when the optimizer's state is unusable (`DDOptimizerCheckState()`). Everything is read and checked before anything changes
  (a copy of the parameters, buffers and optimizer state is held meanwhile): after an error the
  network and the optimizer are as they were.

  Level: beginner

.seealso: `DDCheckpointSave()`
@*/
PetscErrorCode DDCheckpointLoad(DDNet net, DDOptimizer opt, const char file[])
DD_CXX_TRY
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)net);
  std::string sig, fsig, ftype;
  PetscInt    n;
  DDTensor   *ps;
  Copies      in, state, old; /* what the file holds (the network's tensors, the optimizer's state), read first; the optimizer's state before it is replaced */

  PetscFunctionBegin;
  PetscCall(Signature(net, sig));
  PetscCall(DDNetGetParameters(net, &n, &ps, NULL));
  if (opt) PetscCall(CheckOptimizer(net, opt, "DDCheckpointLoad"));
  /* everything is read into copies first and checked: a file that fails part way (a checksum, a shape, an unusable optimizer state) leaves the network and the optimizer as they were */
  std::vector<PetscInt64 *> counters; /* the counters, and the values read for them */
  std::vector<PetscInt64>   cvals;
  PetscInt64               step = 0, epoch = 0; /* the optimizer's, from the file */
  DDTensor                *st   = NULL;
  PetscInt                 ns   = 0;
  PetscCall(H5WithFile(comm, file, 'r', [&](hid_t fid) -> PetscErrorCode {
    PetscFunctionBegin;
    PetscInt64 version = 0;
    PetscCall(H5ReadStringAttribute(comm, fid, file, "ddnn_signature", fsig));
    DDCheckAll(comm, H5Aexists(fid, "ddnn_checkpoint_version") > 0, PETSC_ERR_FILE_UNEXPECTED, "Checkpoint \"%s\" is incomplete or from an older ddnn (no \"ddnn_checkpoint_version\"): it lacks the layers' buffers and checksums", file);
    PetscCall(H5ReadIntAttribute(comm, fid, file, "ddnn_checkpoint_version", &version));
    DDCheckAll(comm, version == 2, PETSC_ERR_FILE_UNEXPECTED, "Checkpoint \"%s\" has format version %" PetscInt64_FMT ", this ddnn reads version 2", file, version);
    if (fsig != sig) {
      std::string fe, ne;
      PetscInt    k = 0, fn = 0, nn = 0;
      SignatureFirstDifference(fsig, sig, &k, fe, ne, &fn, &nn);
      DDCheckAll(comm, PETSC_FALSE, PETSC_ERR_FILE_UNEXPECTED, "Checkpoint \"%s\" is from another network (%" PetscInt_FMT " parameters in the file, %" PetscInt_FMT " in this network): the first that differs is parameter %" PetscInt_FMT ", %s in the file but %s in this network", file, fn, nn, k, fe.empty() ? "absent" : fe.c_str(), ne.empty() ? "absent" : ne.c_str());
    }
    for (PetscInt i = 0; i < n; i++) {
      const char *name;
      PetscCall(DDNetGetParameterName(net, i, &name));
      PetscCall(in.ReadFrom(fid, file, (std::string("params/") + name).c_str(), ps[i]));
    }
    PetscCall(ForEachBuffer(net, [&](const std::string &bname, DDTensor t, PetscInt64 *c) -> PetscErrorCode {
      PetscFunctionBegin;
      if (t) PetscCall(in.ReadFrom(fid, file, ("buffers/" + bname).c_str(), t));
      else {
        PetscInt64 v;
        PetscCall(H5ReadIntAttribute(comm, fid, file, ("ddnn_counter " + bname).c_str(), &v));
        DDCheckAll(comm, v >= 0, PETSC_ERR_FILE_UNEXPECTED, "Checkpoint \"%s\": counter \"%s\" is %" PetscInt64_FMT ", a counter is not negative", file, bname.c_str(), v);
        counters.push_back(c);
        cvals.push_back(v);
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    if (opt) {
      const char *const *names;
      DDOptimizerType    type;
      PetscCall(H5ReadStringAttribute(comm, fid, file, "ddnn_optimizer", ftype));
      PetscCall(DDOptimizerGetType(opt, &type));
      DDCheckAll(comm, ftype == type, PETSC_ERR_FILE_UNEXPECTED, "Checkpoint \"%s\" holds %s optimizer state, the optimizer is %s", file, ftype.c_str(), type);
      PetscCall(DDOptimizerGetState(opt, &ns, &st, &names));
      for (PetscInt i = 0; i < ns; i++) {
        const char *pname;
        PetscCall(DDNetGetParameterName(net, i / (ns / PetscMax(n, 1)), &pname));
        PetscCall(state.ReadFrom(fid, file, (std::string("optimizer/") + pname + "/" + names[i]).c_str(), st[i]));
      }
      PetscCall(H5ReadIntAttribute(comm, fid, file, "ddnn_step", &step));
      PetscCall(H5ReadIntAttribute(comm, fid, file, "ddnn_epoch", &epoch));
      DDCheckAll(comm, step >= 0 && step <= PETSC_MAX_INT && epoch >= 0 && epoch <= PETSC_MAX_INT, PETSC_ERR_FILE_UNEXPECTED, "Checkpoint \"%s\": the optimizer's step %" PetscInt64_FMT " or epoch %" PetscInt64_FMT " is negative or exceeds PetscInt", file, step, epoch);
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (opt) { /* the optimizer checks its state in place: the old one is kept to be put back */
    PetscInt ostep, oepoch;
    PetscCall(DDOptimizerGetStepCount(opt, &ostep, &oepoch));
    for (PetscInt i = 0; i < ns; i++) PetscCall(old.Keep(st[i]));
    PetscCall(state.Commit());
    PetscCall(DDOptimizerSetStepCount(opt, (PetscInt)step, (PetscInt)epoch));
    PetscErrorCode ierr = DDOptimizerCheckState(opt);
    if (ierr) {
      PetscCall(old.Commit());
      PetscCall(DDOptimizerSetStepCount(opt, ostep, oepoch));
      PetscCall(ierr);
    }
  }
  PetscCall(in.Commit());
  for (size_t i = 0; i < counters.size(); i++) *counters[i] = cvals[i];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
