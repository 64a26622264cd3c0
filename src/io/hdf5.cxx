/*
  Parallel HDF5 I/O of distributed tensors: every rank selects the hyperslab of its own piece
  of the global dataset and the transfer is collective (H5FD_MPIO_COLLECTIVE), so the file
  holds the global tensor, whatever the partition, readable by h5py with the global shape.

  Integrity: files are created with the 1.8 file format or later (H5Pset_libver_bounds), whose
  superblock and object headers carry checksums, so a flipped byte in the metadata is an error
  on open. The contents are checksummed by ddnn: every dataset written here has an attribute
  "ddnn_checksum", the sum modulo 2^64 of h(g, bits(x_g)) over the entries, h a splitmix64 hash of
  the entry's global C-order index g and the bits of its value in the file's type. A sum of
  per-entry hashes does not depend on how the entries are split over ranks or read in pieces.
*/
#include <cfloat>
#include <cmath>
#include <io/h5util.hpp>
#include <tensor/layout.hpp>
#include <dddataset.h>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <libgen.h>
#include <sys/ddcxx.hpp>

using namespace ddnn;

namespace ddnn
{
static void Quiet()
{
  static bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported as PETSc errors */
    done = true;
  }
}

PetscErrorCode CheckRegularOrMissing(MPI_Comm comm, const char *path, bool nolink)
{
  PetscMPIInt rank;
  int         kind = 0; /* 0 missing or regular, 1 another kind of file, 2 a symbolic link */

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  if (!rank) {
    struct stat sb;
    if (nolink && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) kind = 2;
    else if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) kind = 1;
  }
  PetscCallMPI(MPI_Bcast(&kind, 1, MPI_INT, 0, comm));
  PetscCheck(kind != 1, comm, PETSC_ERR_FILE_WRITE, "\"%s\" exists and is not a regular file (a directory, device, pipe or socket): refusing to write over it", path);
  PetscCheck(kind != 2, comm, PETSC_ERR_FILE_WRITE, "\"%s\" is a symbolic link: refusing to replace it with a file", path);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode FileCommit(MPI_Comm comm, const char *tmp, const char *file)
{
  PetscMPIInt rank;
  int         err[2] = {0, 0}; /* step that failed, errno */

  PetscFunctionBegin;
  PetscCall(CheckRegularOrMissing(comm, tmp, true));
  PetscCall(CheckRegularOrMissing(comm, file, true));
  PetscCallMPI(MPI_Barrier(comm));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  if (!rank) {
    int fd = open(tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) err[0] = 1;
    if (fd >= 0) close(fd);
    if (!err[0] && std::rename(tmp, file) != 0) err[0] = 2;
    if (err[0]) err[1] = errno;
    if (!err[0]) { /* the rename itself: sync the directory's entry */
      std::string d(file);
      std::vector<char> c(d.begin(), d.end());
      c.push_back(0);
      int dfd = open(dirname(c.data()), O_RDONLY | O_DIRECTORY);
      if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
      }
    }
  }
  PetscCallMPI(MPI_Bcast(err, 2, MPI_INT, 0, comm));
  PetscCheck(err[0] != 1, comm, PETSC_ERR_FILE_WRITE, "Cannot sync \"%s\" to disk: %s", tmp, std::strerror(err[1]));
  PetscCheck(err[0] != 2, comm, PETSC_ERR_FILE_WRITE, "Cannot rename \"%s\" to \"%s\": %s", tmp, file, std::strerror(err[1]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the hash of an entry: its global index and the bits of its value */
static inline uint64_t EntryHash(uint64_t g, uint64_t bits)
{
  return SplitMix64(SplitMix64(g ^ 0x6A09E667F3BCC909ull) ^ bits);
}

uint64_t HashBox(const void *buf, size_t es, const std::vector<hsize_t> &dims, const std::vector<hsize_t> &start, const std::vector<hsize_t> &count)
{
  const size_t d = dims.size();
  uint64_t     n = 1, sum = 0;
  for (size_t k = 0; k < d; k++) n *= count[k];
  if (!n) return 0;
  std::vector<uint64_t> gs(d, 1);
  for (size_t k = d; k-- > 1;) gs[k - 1] = gs[k] * dims[k];
  std::vector<hsize_t> j(d, 0);
  const size_t         in = d ? d - 1 : 0;
  for (uint64_t i = 0; i < n;) {
    uint64_t g = 0;
    for (size_t k = 0; k < d; k++) g += gs[k] * (start[k] + j[k]);
    const uint64_t run = d ? count[in] : 1;
    for (uint64_t r = 0; r < run; r++, i++) {
      uint64_t bits;
      if (es == 4) {
        uint32_t b;
        std::memcpy(&b, (const char *)buf + i * 4, 4);
        bits = b;
      } else std::memcpy(&bits, (const char *)buf + i * 8, 8);
      sum += EntryHash(g + r, bits);
    }
    if (!d) break;
    /* next run: increment the outer indices */
    size_t k = in;
    while (k-- > 0) {
      if (++j[k] < count[k]) break;
      j[k] = 0;
    }
  }
  return sum;
}

PetscErrorCode H5WriteChecksum(hid_t obj, uint64_t sum)
{
  PetscFunctionBegin;
  if (H5Aexists(obj, "ddnn_checksum") > 0) H5Adelete(obj, "ddnn_checksum");
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a  = H5Acreate2(obj, "ddnn_checksum", H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  PetscCheck(a >= 0, PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "Cannot create the checksum attribute");
  herr_t st = H5Awrite(a, H5T_NATIVE_UINT64, &sum);
  H5Aclose(a);
  H5Sclose(sp);
  PetscCheck(st >= 0, PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "Cannot write the checksum attribute");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the stored checksum; has = false when there is none */
static bool H5ReadChecksum(hid_t obj, uint64_t *sum)
{
  if (H5Aexists(obj, "ddnn_checksum") <= 0) return false;
  hid_t a = H5Aopen(obj, "ddnn_checksum", H5P_DEFAULT);
  if (a < 0) return false;
  herr_t st = H5Aread(a, H5T_NATIVE_UINT64, sum);
  H5Aclose(a);
  return st >= 0;
}

/* the file type's element size as ddnn reads it: 4 (float) or 8 (double and anything else) */
static size_t FileElementSize(hid_t dset)
{
  hid_t  ft = H5Dget_type(dset);
  size_t es = H5Tget_size(ft) == 4 ? 4 : 8;
  H5Tclose(ft);
  return es;
}

PetscErrorCode H5DatasetChecksum(MPI_Comm comm, hid_t dset, uint64_t *sum)
{
  PetscMPIInt rank, size;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  hid_t                fsp = H5Dget_space(dset);
  int                  nd  = H5Sget_simple_extent_ndims(fsp);
  std::vector<hsize_t> dims(nd > 0 ? nd : 0);
  if (nd > 0) H5Sget_simple_extent_dims(fsp, dims.data(), NULL);
  const size_t es  = FileElementSize(dset);
  hsize_t      per = 1, rows = nd > 0 ? dims[0] : 1;
  for (int k = 1; k < nd; k++) per *= dims[k];
  /* my rows, read in blocks of at most ~8 MiB (the same number of collective reads on every rank) */
  const hsize_t r0 = nd > 0 ? rows * rank / size : 0, r1 = nd > 0 ? rows * (rank + 1) / size : (rank ? 0 : 1);
  hsize_t       blk = PetscMax((hsize_t)1, (hsize_t)(8 << 20) / PetscMax((hsize_t)1, per * es)), nblk = (r1 - r0 + blk - 1) / blk, maxblk;
  PetscCallMPI(MPI_Allreduce(&nblk, &maxblk, 1, MPI_UINT64_T, MPI_MAX, comm));
  uint64_t mine = 0;
  int      bad  = 0;
  hid_t    dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  for (hsize_t b = 0; b < maxblk; b++) {
    hsize_t              a = PetscMin(r0 + b * blk, r1), e = PetscMin(a + blk, r1), nmem = (e - a) * per;
    std::vector<hsize_t> st(dims.size(), 0), ct(dims);
    std::vector<char>    buf(nmem * es + 1);
    hid_t                msp = H5Screate_simple(1, &nmem, NULL);
    if (nmem && nd > 0) {
      st[0] = a;
      ct[0] = e - a;
      H5Sselect_hyperslab(fsp, H5S_SELECT_SET, st.data(), NULL, ct.data(), NULL);
    } else if (nmem) H5Sselect_all(fsp); /* a scalar, on rank 0 */
    else {
      H5Sselect_none(fsp);
      H5Sselect_none(msp);
    }
    if (H5Dread(dset, es == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, msp, fsp, dxpl, buf.data()) < 0) bad = 1;
    H5Sclose(msp);
    if (nmem && !bad) mine += HashBox(buf.data(), es, dims, st, ct);
  }
  H5Pclose(dxpl);
  H5Sclose(fsp);
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm));
  PetscCheck(!bad, comm, PETSC_ERR_FILE_READ, "Reading a dataset back for its checksum failed (truncated file?)");
  PetscCallMPI(MPI_Allreduce(&mine, sum, 1, MPI_UINT64_T, MPI_SUM, comm));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5VerifyDataset(MPI_Comm comm, hid_t fid, const char *file, const char *path)
{
  PetscFunctionBegin;
  hid_t dset = H5Dopen2(fid, path, H5P_DEFAULT);
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_UNEXPECTED, "\"%s\" in HDF5 file \"%s\" is not a dataset", path, file);
  if (H5Aexists(dset, "ddnn_slices_written") > 0) {
    long long w = -1;
    hid_t     a = H5Aopen(dset, "ddnn_slices_written", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_LLONG, &w);
    H5Aclose(a);
    hid_t   sp = H5Dget_space(dset);
    hsize_t d[32];
    int     nd = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, d, NULL);
    H5Sclose(sp);
    if (nd < 1 || w != (long long)d[0]) H5Dclose(dset);
    DDCheckAll(comm, nd >= 1 && w == (long long)d[0], PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" is incomplete: dataset \"%s\" has %lld of its %lld samples written (was its generation interrupted?); remove or regenerate it", file, path, w, nd >= 1 ? (long long)d[0] : 0LL);
  }
  uint64_t stored = 0, sum = 0;
  bool     has    = H5ReadChecksum(dset, &stored);
  PetscErrorCode ierr = has ? H5DatasetChecksum(comm, dset, &sum) : PETSC_SUCCESS;
  H5Dclose(dset);
  PetscCall(ierr);
  DDCheckAll(comm, !has || sum == stored, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of HDF5 file \"%s\" is corrupted: its content checksum is %016llx, the stored one %016llx", path, file, (unsigned long long)sum, (unsigned long long)stored);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5Open(MPI_Comm comm, const char *file, char mode, hid_t *fid)
{
  hid_t fapl;

  PetscFunctionBegin;
  Quiet();
  /* a name that differs between ranks would leave them in different collective HDF5 calls */
  PetscCall(DDCheckSameString(comm, "the HDF5 file name", file));
  if (mode != 'r') PetscCall(CheckRegularOrMissing(comm, file, false));
  else { /* opening a FIFO would block, a device read garbage */
    PetscMPIInt rank;
    int         other = 0;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    if (!rank) {
      struct stat sb;
      other = stat(file, &sb) == 0 && !S_ISREG(sb.st_mode);
    }
    PetscCallMPI(MPI_Bcast(&other, 1, MPI_INT, 0, comm));
    PetscCheck(!other, comm, PETSC_ERR_FILE_OPEN, "Cannot read \"%s\" as an HDF5 file: it is not a regular file (a directory, device, pipe or socket)", file);
  }
  fapl = H5Pcreate(H5P_FILE_ACCESS);
  PetscCheck(fapl >= 0, PETSC_COMM_SELF, PETSC_ERR_LIB, "H5Pcreate failed");
  PetscCheck(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0, PETSC_COMM_SELF, PETSC_ERR_LIB, "H5Pset_fapl_mpio failed");
  /* the 1.8 format or later: checksummed superblock and object headers */
  PetscCheck(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) >= 0, PETSC_COMM_SELF, PETSC_ERR_LIB, "H5Pset_libver_bounds failed");
  if (mode == 'w') *fid = H5Fcreate(file, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  else if (mode == 'a') {
    PetscMPIInt rank;
    int         is = 0;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    if (!rank) is = access(file, F_OK) == 0;
    PetscCallMPI(MPI_Bcast(&is, 1, MPI_INT, 0, comm));
    if (is) *fid = H5Fopen(file, H5F_ACC_RDWR, fapl);
    else *fid = H5Fcreate(file, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
  } else *fid = H5Fopen(file, H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  DDCheckAll(comm, *fid >= 0, PETSC_ERR_FILE_OPEN, "Cannot %s HDF5 file \"%s\" (missing, truncated or not HDF5)", mode == 'r' ? "open" : "create", file);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* closes the file; a close whose flush the file system refuses (a full disk) is an error naming the file, and
   HDF5 may keep the handle open (it retries the flush when the library shuts down) */
PetscErrorCode H5Close(MPI_Comm comm, hid_t fid)
{
  char name[PETSC_MAX_PATH_LEN] = "";

  PetscFunctionBegin;
  H5Fget_name(fid, name, sizeof(name));
  DDCheckAll(comm, H5Fclose(fid) >= 0, PETSC_ERR_FILE_WRITE, "Closing HDF5 file \"%s\" failed: its last writes were refused (a full disk, a quota?)", name);
  PetscFunctionReturn(PETSC_SUCCESS);
}

void H5CloseAfterError(hid_t fid)
{
  const unsigned types = H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR | H5F_OBJ_LOCAL;
  ssize_t        n     = H5Fget_obj_count(fid, types);
  if (n > 0) {
    std::vector<hid_t> ids((size_t)n);
    n = H5Fget_obj_ids(fid, types, (size_t)n, ids.data());
    for (ssize_t i = 0; i < n; i++) switch (H5Iget_type(ids[i])) {
      case H5I_DATASET: H5Dclose(ids[i]); break;
      case H5I_GROUP: H5Gclose(ids[i]); break;
      case H5I_DATATYPE: H5Tclose(ids[i]); break;
      case H5I_ATTR: H5Aclose(ids[i]); break;
      default: break;
      }
  }
  H5Fclose(fid);
}

PetscErrorCode H5RemoveTemporary(MPI_Comm comm, const char *tmp)
{
  PetscMPIInt rank;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Barrier(comm)); /* every rank has closed it */
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  if (!rank) {
    struct stat sb;
    if (lstat(tmp, &sb) == 0 && S_ISREG(sb.st_mode)) (void)unlink(tmp);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* this rank's hyperslab: start and count per dimension; empty when it holds no (primary) piece */
static bool Hyperslab(DDTensor t, bool primaryonly, std::vector<hsize_t> &start, std::vector<hsize_t> &count)
{
  start.assign(t->order, 0);
  count.assign(t->order, 0);
  if (!t->active || !t->layout.bulksize) return false;
  if (primaryonly)
    for (PetscInt k = 0; k < t->order; k++)
      if (t->replicated[k] && t->part->coords[k] != 0) return false;
  for (PetscInt k = 0; k < t->order; k++) {
    start[k] = (hsize_t)t->layout.start[k];
    count[k] = (hsize_t)t->layout.n[k];
  }
  return true;
}

/* one collective write of this rank's bulk (mine: at the hyperslab start/count of fspace; otherwise nothing) into dset, packed in C order into buf */
static PetscErrorCode WritePiece(DDTensor t, hid_t dset, hid_t type, hid_t fspace, bool mine, const std::vector<hsize_t> &start, const std::vector<hsize_t> &count, std::vector<char> &buf, herr_t *st)
{
  hsize_t nmem   = mine ? (hsize_t)t->layout.bulksize : 0;
  hid_t   mspace = H5Screate_simple(1, &nmem, NULL);

  PetscFunctionBegin;
  buf.assign(nmem * (t->dtype == DD_FLOAT32 ? 4 : 8) + 1, 0);
  if (mine) {
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), NULL, count.data(), NULL);
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(t->layout, (T *)t->array, (T *)buf.data(), 0);
      return PETSC_SUCCESS;
    }));
  } else {
    H5Sselect_none(fspace);
    H5Sselect_none(mspace);
  }
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  *st = H5Dwrite(dset, type, mspace, fspace, dxpl, buf.data());
  H5Pclose(dxpl);
  H5Sclose(mspace);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  f(h) on a host tensor h laid out as the device tensor t (collective: its set-up): t's values
  copied in first when in, h's copied back when out and f succeeded (a failed read leaves t as it
  was). The files of device tensors go through it.
*/
template <class F>
static PetscErrorCode ThroughHostCopy(DDTensor t, bool in, bool out, F &&f)
{
  DDTensor h;

  PetscFunctionBegin;
  PetscCall(DDTensorDuplicateLayoutIn_Private(t, t->dtype, DD_MEMTYPE_HOST, &h));
  PetscErrorCode ierr = in ? DDTensorCopy(t, h) : PETSC_SUCCESS;
  if (!ierr) ierr = f(h);
  if (!ierr && out) ierr = DDTensorCopy(h, t);
  PetscCall(DDTensorDestroy(&h));
  PetscCall(ierr);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5WriteTensor(hid_t fid, const char *path, DDTensor t)
{
  MPI_Comm             comm = PetscObjectComm((PetscObject)t);
  std::vector<hsize_t> dims(t->order), start, count;
  hid_t                type = t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;

  PetscFunctionBegin;
  if (t->memtype != DD_MEMTYPE_HOST) { /* a device tensor: written from a host copy */
    PetscCall(ThroughHostCopy(t, true, false, [&](DDTensor h) { return H5WriteTensor(fid, path, h); }));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  for (PetscInt k = 0; k < t->order; k++) dims[k] = (hsize_t)t->shape[k];
  if (H5Lexists(fid, path, H5P_DEFAULT) > 0) H5Ldelete(fid, path, H5P_DEFAULT);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t fspace = H5Screate_simple((int)t->order, dims.data(), NULL);
  hid_t dset   = H5Dcreate2(fid, path, type, fspace, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_WRITE, "Cannot create HDF5 dataset \"%s\"", path);
  bool              mine = Hyperslab(t, true, start, count);
  herr_t            st;
  std::vector<char> buf;
  PetscCall(WritePiece(t, dset, type, fspace, mine, start, count, buf, &st));
  H5Sclose(fspace);
  /* the content checksum, over the primary copies (each entry once) */
  uint64_t hmine = mine && st >= 0 ? HashBox(buf.data(), t->dtype == DD_FLOAT32 ? 4 : 8, dims, start, count) : 0, sum;
  int      ok    = st >= 0, allok;
  PetscCallMPI(MPI_Allreduce(&hmine, &sum, 1, MPI_UINT64_T, MPI_SUM, comm));
  PetscCallMPI(MPI_Allreduce(&ok, &allok, 1, MPI_INT, MPI_MIN, comm));
  if (allok) allok = H5WriteChecksum(dset, sum) == PETSC_SUCCESS;
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &allok, 1, MPI_INT, MPI_MIN, comm));
  H5Dclose(dset);
  if (!allok) { /* a dataset written in part (a full disk) would read back without complaint (it has no checksum): it goes (collectively) */
    char   fname[PETSC_MAX_PATH_LEN] = "";
    H5Fget_name(fid, fname, sizeof(fname));
    H5Ldelete(fid, path, H5P_DEFAULT);
    SETERRQ(comm, PETSC_ERR_FILE_WRITE, "Writing HDF5 dataset \"%s\" to \"%s\" failed (the file system refused the data: full, over quota or read-only?); the partial dataset was removed", path, fname);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5DatasetShape(MPI_Comm comm, hid_t fid, const char *file, const char *path, std::vector<PetscInt> &dims)
{
  PetscFunctionBegin;
  htri_t ex = H5Lexists(fid, path, H5P_DEFAULT) > 0 ? H5Oexists_by_name(fid, path, H5P_DEFAULT) : 0;
  DDCheckAll(comm, ex > 0, PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" has no dataset \"%s\"", file, path);
  hid_t dset = H5Dopen2(fid, path, H5P_DEFAULT);
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_UNEXPECTED, "\"%s\" in HDF5 file \"%s\" is not a dataset", path, file);
  hid_t   sp = H5Dget_space(dset);
  int     nd = H5Sget_simple_extent_ndims(sp);
  hsize_t d[32];
  H5Sget_simple_extent_dims(sp, d, NULL);
  dims.assign(d, d + (nd > 0 ? nd : 0));
  H5Sclose(sp);
  H5Dclose(dset);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static std::string DimsString(const std::vector<PetscInt> &v)
{
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? "x" : "") + std::to_string(v[i]);
  return s.empty() ? "()" : s;
}

PetscErrorCode H5ReadTensor(hid_t fid, const char *file, const char *path, DDTensor t, bool requirechecksum, bool requirefinite)
{
  MPI_Comm              comm = PetscObjectComm((PetscObject)t);
  std::vector<PetscInt> fd, td(t->shape, t->shape + t->order);
  std::vector<hsize_t>  start, count, ps, pc, dims(t->shape, t->shape + t->order);

  PetscFunctionBegin;
  if (t->memtype != DD_MEMTYPE_HOST) { /* a device tensor: read into a host copy, then copied over (only when the read succeeded: a failed read changes nothing) */
    PetscCall(ThroughHostCopy(t, false, true, [&](DDTensor h) { return H5ReadTensor(fid, file, path, h, requirechecksum, requirefinite); }));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (requirefinite) { /* a network's state: its dataset itself, not a soft or external link to another one (whose checksum is the other's) */
    H5L_info_t li;
    bool       hard = H5Lexists(fid, path, H5P_DEFAULT) <= 0 || (H5Lget_info(fid, path, &li, H5P_DEFAULT) >= 0 && li.type == H5L_TYPE_HARD);
    DDCheckAll(comm, hard, PETSC_ERR_FILE_UNEXPECTED, "\"%s\" in HDF5 file \"%s\" is a soft or external link, not a dataset of its own: a network's state is read from its own datasets", path, file);
  }
  PetscCall(H5DatasetShape(comm, fid, file, path, fd));
  DDCheckAll(comm, fd == td, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" has shape %s, the tensor %s", path, file, DimsString(fd).c_str(), DimsString(td).c_str());
  hid_t dset = H5Dopen2(fid, path, H5P_DEFAULT);
  hid_t ft   = H5Dget_type(dset);
  bool  isfl = H5Tget_class(ft) == H5T_FLOAT;
  H5Tclose(ft);
  if (!isfl) H5Dclose(dset);
  DDCheckAll(comm, isfl, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" is not floating point", path, file);
  uint64_t stored = 0;
  bool     has    = H5ReadChecksum(dset, &stored);
  if (!has && requirechecksum) H5Dclose(dset);
  DDCheckAll(comm, has || !requirechecksum, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" has no content checksum (attribute \"ddnn_checksum\"): damaged, or not written by ddnn", path, file);
  /* read in the file's type (the checksum is over its bits), then convert to the tensor's */
  const size_t      es     = FileElementSize(dset), te = t->dtype == DD_FLOAT32 ? 4 : 8;
  hid_t             fspace = H5Dget_space(dset);
  bool              mine   = Hyperslab(t, false, start, count);
  bool              prim   = Hyperslab(t, true, ps, pc);
  hsize_t           nmem   = mine ? (hsize_t)t->layout.bulksize : 0;
  hid_t             mspace = H5Screate_simple(1, &nmem, NULL);
  std::vector<char> buf(nmem * es + 1), conv;
  if (mine) H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), NULL, count.data(), NULL);
  else {
    H5Sselect_none(fspace);
    H5Sselect_none(mspace);
  }
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  herr_t st = H5Dread(dset, es == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, buf.data());
  H5Pclose(dxpl);
  H5Sclose(mspace);
  H5Sclose(fspace);
  H5Dclose(dset);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_READ, "Reading dataset \"%s\" of \"%s\" failed (truncated file?)", path, file);
  if (has) {
    uint64_t hmine = prim ? HashBox(buf.data(), es, dims, start, count) : 0, sum;
    PetscCallMPI(MPI_Allreduce(&hmine, &sum, 1, MPI_UINT64_T, MPI_SUM, comm));
    DDCheckAll(comm, sum == stored, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of HDF5 file \"%s\" is corrupted: its content checksum is %016llx, the stored one %016llx", path, file, (unsigned long long)sum, (unsigned long long)stored);
  }
  const char *src = buf.data();
  if (es != te) {
    conv.resize(nmem * te + 1);
    for (hsize_t i = 0; i < nmem; i++) {
      if (es == 4) ((double *)conv.data())[i] = ((const float *)buf.data())[i];
      else ((float *)conv.data())[i] = (float)((const double *)buf.data())[i];
    }
    src = conv.data();
  }
  if (requirefinite) { /* flags: 1 a nan, 2 an inf in the file, 4 a finite float64 beyond float32's range */
    int fl = 0;
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T    = decltype(z);
      const T *a = (const T *)src;
      for (hsize_t i = 0; i < nmem; i++)
        if (a[i] - a[i] != 0) {
          if (std::isnan(a[i])) fl |= 1;
          else if (es == 8 && te == 4 && std::isfinite(((const double *)buf.data())[i])) fl |= 4;
          else fl |= 2;
        }
      return PETSC_SUCCESS;
    }));
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &fl, 1, MPI_INT, MPI_BOR, comm));
    PetscCheck(!(fl & 3), comm, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of \"%s\" holds %s: a network's parameters, buffers and optimizer state must be finite", path, file, (fl & 3) == 1 ? "a nan" : (fl & 3) == 2 ? "an inf" : "a nan and an inf");
    PetscCheck(!fl, comm, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of \"%s\" holds a float64 value beyond float32's range (|v| > %g), which the float32 tensor cannot hold", path, file, (double)FLT_MAX);
  }
  if (mine)
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(t->layout, (T *)t->array, (T *)src, 1);
      return PETSC_SUCCESS;
    }));
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5WriteStringAttribute(hid_t fid, const char *name, const std::string &value)
{
  PetscFunctionBegin;
  if (H5Aexists(fid, name) > 0) H5Adelete(fid, name);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size() + 1);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a  = H5Acreate2(fid, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  PetscCheck(a >= 0, PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "Cannot create attribute %s", name);
  H5Awrite(a, type, value.c_str());
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(type);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5ReadStringAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, std::string &value)
{
  PetscFunctionBegin;
  htri_t ex = H5Aexists(fid, name);
  DDCheckAll(comm, ex >= 0, PETSC_ERR_FILE_UNEXPECTED, "Cannot read the attributes of HDF5 file \"%s\" (looking for \"%s\"): its metadata is corrupted", file, name);
  DDCheckAll(comm, ex > 0, PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" has no attribute \"%s\" (not a ddnn checkpoint?)", file, name);
  hid_t  a    = H5Aopen(fid, name, H5P_DEFAULT);
  hid_t  type = a >= 0 ? H5Aget_type(a) : -1, sp = a >= 0 ? H5Aget_space(a) : -1;
  bool   isstr = type >= 0 && H5Tget_class(type) == H5T_STRING && sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1;
  herr_t st    = -1;
  value.clear();
  if (isstr && H5Tis_variable_str(type) > 0) { /* h5py's default for str (UTF-8: the memory type takes the file's character set, HDF5 converts none) */
    hid_t mt = H5Tcopy(H5T_C_S1);
    char *p  = NULL;
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5Tget_cset(type));
    st = H5Aread(a, mt, &p);
    if (st >= 0 && p) value = p;
    if (p) H5free_memory(p);
    H5Tclose(mt);
  } else if (isstr) {
    size_t            n = H5Tget_size(type);
    std::vector<char> buf(n + 1, 0);
    hid_t             mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, n);
    H5Tset_cset(mt, H5Tget_cset(type));
    st = H5Aread(a, mt, buf.data());
    H5Tclose(mt);
    value = buf.data();
  }
  if (sp >= 0) H5Sclose(sp);
  if (type >= 0) H5Tclose(type);
  if (a >= 0) H5Aclose(a);
  DDCheckAll(comm, isstr, PETSC_ERR_FILE_UNEXPECTED, "Attribute \"%s\" of HDF5 file \"%s\" is not a string", name, file);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_READ, "Reading attribute \"%s\" of HDF5 file \"%s\" failed (corrupted file?)", name, file);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5WriteIntAttribute(hid_t fid, const char *name, PetscInt64 v)
{
  PetscFunctionBegin;
  if (H5Aexists(fid, name) > 0) H5Adelete(fid, name);
  hid_t     sp = H5Screate(H5S_SCALAR);
  hid_t     a  = H5Acreate2(fid, name, H5T_NATIVE_LLONG, sp, H5P_DEFAULT, H5P_DEFAULT);
  long long x  = v;
  H5Awrite(a, H5T_NATIVE_LLONG, &x);
  H5Aclose(a);
  H5Sclose(sp);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5ReadIntAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, PetscInt64 *v)
{
  PetscFunctionBegin;
  htri_t ex = H5Aexists(fid, name);
  DDCheckAll(comm, ex >= 0, PETSC_ERR_FILE_UNEXPECTED, "Cannot read the attributes of HDF5 file \"%s\" (looking for \"%s\"): its metadata is corrupted", file, name);
  DDCheckAll(comm, ex > 0, PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" has no attribute \"%s\"", file, name);
  hid_t     a     = H5Aopen(fid, name, H5P_DEFAULT);
  hid_t     type  = a >= 0 ? H5Aget_type(a) : -1, sp = a >= 0 ? H5Aget_space(a) : -1;
  bool      isint = type >= 0 && H5Tget_class(type) == H5T_INTEGER && sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1;
  bool      fits  = isint && (H5Tget_size(type) < 8 || H5Tget_sign(type) != H5T_SGN_NONE); /* an unsigned 64-bit value may not fit a signed one */
  long long x     = 0;
  herr_t    st    = -1;
  if (isint) st = H5Aread(a, fits ? H5T_NATIVE_LLONG : H5T_NATIVE_ULLONG, &x);
  if (!fits && x < 0) st = -1;
  if (sp >= 0) H5Sclose(sp);
  if (type >= 0) H5Tclose(type);
  if (a >= 0) H5Aclose(a);
  DDCheckAll(comm, isint, PETSC_ERR_FILE_UNEXPECTED, "Attribute \"%s\" of HDF5 file \"%s\" is not one integer", name, file);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_READ, "Reading attribute \"%s\" of HDF5 file \"%s\" failed (corrupted file, or a value beyond 64-bit integers)", name, file);
  *v = x;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn

/*@C
  DDTensorWriteHDF5 - Writes a tensor as a dataset of its global shape, collectively

  Collective

  Input Parameters:
+ t       - the tensor
. file    - the HDF5 file
. dataset - the dataset's path ("group/name"; groups are created)
- append  - `PETSC_TRUE` adds to (or replaces the dataset in) an existing file, `PETSC_FALSE` truncates it

  Notes:
  Every rank writes the hyperslab of its piece (replicated dimensions: the copy at
  coordinate 0) in one collective MPI-IO transfer. h5py reads it with the global shape.
  The dataset gets a content checksum (attribute "ddnn_checksum", independent of the partition)
  that `DDTensorReadHDF5()` verifies; the file has the HDF5 1.8 format or later, with checksummed
  metadata. A path that exists and is not a regular file (a device, a directory) is refused.
  A device tensor (`DDTensorSetMemType()`) is written from a host copy of its storage.
  A new file (append `PETSC_FALSE`) is written as "<file>.tmp" and renamed at the end, so a write
  that fails (a full disk) leaves an existing file as it was (a symbolic link is written through,
  in place); a dataset whose write fails is removed from the file, not left half-written.
  The error names the file and the dataset.

  Level: beginner

.seealso: `DDTensorReadHDF5()`, `DDDataset`
@*/
PetscErrorCode DDTensorWriteHDF5(DDTensor t, const char file[], const char dataset[], PetscBool append)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorWriteHDF5"));
  PetscCall(DDCheckSameString(PetscObjectComm((PetscObject)t), "the HDF5 dataset name", dataset));
  MPI_Comm comm = PetscObjectComm((PetscObject)t);
  int      link = 0;
  if (!append) { /* a new file goes through "<file>.tmp", renamed at the end: a failed write leaves the old file; a symbolic link is written through */
    PetscMPIInt rank;
    struct stat sb;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    if (!rank) link = lstat(file, &sb) == 0 && S_ISLNK(sb.st_mode);
    PetscCallMPI(MPI_Bcast(&link, 1, MPI_INT, 0, comm));
  }
  if (!append && !link) PetscCall(H5WriteAtomically(comm, file, [&](hid_t fid) { return H5WriteTensor(fid, dataset, t); }));
  else PetscCall(H5WithFile(comm, file, append ? 'a' : 'w', [&](hid_t fid) { return H5WriteTensor(fid, dataset, t); }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorReadHDF5 - Reads a dataset of the tensor's global shape into it, collectively

  Collective

  Notes:
  Each rank reads only its piece. Errors, on every rank, name the file and dataset when the
  file is missing or truncated, the dataset missing, not floating point, or of another shape,
  or when its content checksum (written by `DDTensorWriteHDF5()`) does not match: a corrupted
  file. float32 and float64 datasets convert to the tensor's type. A device tensor is read into a
  host copy and copied over when the read succeeded (a failed read leaves it as it was).

  Level: beginner

.seealso: `DDTensorWriteHDF5()`
@*/
PetscErrorCode DDTensorReadHDF5(DDTensor t, const char file[], const char dataset[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorReadHDF5"));
  PetscCall(DDCheckSameString(PetscObjectComm((PetscObject)t), "the HDF5 dataset name", dataset));
  PetscCall(H5WithFile(PetscObjectComm((PetscObject)t), file, 'r', [&](hid_t fid) { return H5ReadTensor(fid, file, dataset, t, false); }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorWriteHDF5Slice - Writes a tensor as slice `index` of a dataset of samples

  Collective

  Input Parameters:
+ t       - the tensor: one sample, or a batch of one sample (leading dimension 1)
. file    - the HDF5 file (created if missing)
. dataset - the dataset, created with `total` slices if missing
. index   - the slice
- total   - the number of slices

  Notes:
  The dataset has shape (total, sample shape...), where the sample shape is t's shape, or t's
  shape without its leading dimension when that is 1 (a DMDA tensor (1, dof, ny, nx) gives
  samples (dof, ny, nx)). Data generators write sample after sample this way.

  A dataset created here is marked incomplete (attribute "ddnn_slices_written", the number of
  slices written in order 0, 1, ...) until its last slice is written; then its content checksum
  ("ddnn_checksum") is computed and stored. `DDDatasetSetUp()` refuses an incomplete dataset
  and verifies the checksum, so a generation that was interrupted (killed, full disk) is never
  read as data. Write the slices in order; write into a temporary file and rename it when done
  (`DDFileCommit()`) to replace a previous file atomically. A device tensor is written from a host copy.

  Level: intermediate

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDTensorWriteHDF5Slice(DDTensor t, const char file[], const char dataset[], PetscInt index, PetscInt total)
DD_CXX_TRY
{
  MPI_Comm             comm = PetscObjectComm((PetscObject)t);
  std::vector<hsize_t> s1, c1;
  hid_t                type = t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorWriteHDF5Slice"));
  if (t->memtype != DD_MEMTYPE_HOST) { /* a device tensor: written from a host copy */
    PetscCall(ThroughHostCopy(t, true, false, [&](DDTensor h) { return DDTensorWriteHDF5Slice(h, file, dataset, index, total); }));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCheck(index >= 0 && index < total, comm, PETSC_ERR_ARG_OUTOFRANGE, "Slice %" PetscInt_FMT " is outside [0, %" PetscInt_FMT ")", index, total);
  { /* a slice count given differently on the ranks (-nsamples on one rank) would write other slices on each rank and hang in the collective writes */
    char v[64];
    PetscCall(PetscSNPrintf(v, sizeof(v), "slice %" PetscInt_FMT " of %" PetscInt_FMT, index, total));
    PetscCall(DDCheckSameString(comm, "DDTensorWriteHDF5Slice()'s slice index or slice count", v));
  }
  const PetscInt       drop = (t->order > 1 && t->shape[0] == 1) ? 1 : 0;
  std::vector<hsize_t> dims(t->order + 1 - drop), start(dims.size(), 0), count(dims.size(), 0);
  dims[0] = (hsize_t)total;
  for (PetscInt k = drop; k < t->order; k++) dims[k + 1 - drop] = (hsize_t)t->shape[k];
  PetscCall(H5WithFile(comm, file, 'a', [&](hid_t fid) -> PetscErrorCode {
    hid_t dset, fspace;
    PetscFunctionBegin;
    if (H5Lexists(fid, dataset, H5P_DEFAULT) > 0) {
      std::vector<PetscInt> fd, td(dims.begin(), dims.end());
      PetscCall(H5DatasetShape(comm, fid, file, dataset, fd));
      DDCheckAll(comm, fd == td, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" exists with another shape", dataset, file);
      dset = H5Dopen2(fid, dataset, H5P_DEFAULT);
    } else {
      hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
      H5Pset_create_intermediate_group(lcpl, 1);
      hid_t sp = H5Screate_simple((int)dims.size(), dims.data(), NULL);
      dset     = H5Dcreate2(fid, dataset, type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
      H5Sclose(sp);
      H5Pclose(lcpl);
      if (dset >= 0) PetscCall(H5WriteIntAttribute(dset, "ddnn_slices_written", 0)); /* incomplete until the last slice */
    }
    DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_WRITE, "Cannot create dataset \"%s\" in \"%s\"", dataset, file);
    fspace    = H5Dget_space(dset);
    bool mine = Hyperslab(t, true, s1, c1);
    if (mine) {
      start[0] = (hsize_t)index;
      count[0] = 1;
      for (PetscInt k = drop; k < t->order; k++) {
        start[k + 1 - drop] = s1[k];
        count[k + 1 - drop] = c1[k];
      }
    }
    herr_t            st;
    std::vector<char> buf;
    PetscCall(WritePiece(t, dset, type, fspace, mine, start, count, buf, &st));
    H5Sclose(fspace);
    DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_WRITE, "Writing slice %" PetscInt_FMT " of \"%s\" in \"%s\" failed", index, dataset, file);
    /* completion: the count of slices written in order, then (once all are) the checksum, last */
    if (H5Aexists(dset, "ddnn_slices_written") > 0) {
      long long w = 0;
      hid_t     a = H5Aopen(dset, "ddnn_slices_written", H5P_DEFAULT);
      H5Aread(a, H5T_NATIVE_LLONG, &w);
      H5Aclose(a);
      if (w == (long long)index) PetscCall(H5WriteIntAttribute(dset, "ddnn_slices_written", ++w));
      if (w == (long long)total) {
        uint64_t sum;
        PetscCall(H5DatasetChecksum(comm, dset, &sum));
        PetscCall(H5WriteChecksum(dset, sum));
      }
    }
    H5Dclose(dset);
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDFileCommit - Replaces a file by a completely written temporary one: syncs it to disk and renames it

  Collective

  Input Parameters:
+ comm - the communicator of the writers (rank 0 does the file system calls)
. tmp  - the file just written and closed (e.g. "<file>.tmp")
- file - its final name

  Notes:
  The rename is atomic: readers of `file` see the previous version or the new complete one,
  never a partial file. The temporary file is fsync()ed before the rename and the directory
  after it. Errors name the path when either path exists and is not a regular file (a device
  such as /dev/null, a directory, a symbolic link: never replaced), or when the sync or the rename fails.

  Level: intermediate

.seealso: `DDCheckpointSave()`, `DDTensorWriteHDF5Slice()`, `DDFileCheckWritable()`
@*/
PetscErrorCode DDFileCommit(MPI_Comm comm, const char tmp[], const char file[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(FileCommit(comm, tmp, file));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDFileCheckWritable - Checks that a file can be written as "<file>.tmp" and renamed to `file`, before any work is done

  Collective

  Input Parameters:
+ comm - the communicator of the writers
- file - the file to be written later (a checkpoint, a data file)

  Notes:
  Errors, on every rank, naming the path when `file` or "<file>.tmp" exists and is not a regular
  file (a device such as /dev/null, a directory, a symbolic link), or when "<file>.tmp" cannot be
  created (missing directory, no permission, read-only file system). A stale "<file>.tmp" left
  by a killed run is a regular file and is fine: the next write truncates it. Nothing is left
  behind: a temporary file created by the check is removed.

  Level: intermediate

.seealso: `DDCheckpointSave()`, `DDFileCommit()`
@*/
PetscErrorCode DDFileCheckWritable(MPI_Comm comm, const char file[])
DD_CXX_TRY
{
  std::string tmp = std::string(file) + ".tmp";
  PetscMPIInt rank;
  int         err = 0;

  PetscFunctionBegin;
  PetscCall(DDCheckSameString(comm, "the file name", file));
  PetscCall(CheckRegularOrMissing(comm, file, true));
  PetscCall(CheckRegularOrMissing(comm, tmp.c_str(), true));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  if (!rank) {
    bool existed = access(tmp.c_str(), F_OK) == 0;
    int  fd      = open(tmp.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0) err = errno;
    else {
      close(fd);
      if (!existed) unlink(tmp.c_str());
    }
  }
  PetscCallMPI(MPI_Bcast(&err, 1, MPI_INT, 0, comm));
  PetscCheck(!err, comm, PETSC_ERR_FILE_OPEN, "Cannot write \"%s\" (for \"%s\"): %s", tmp.c_str(), file, std::strerror(err));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
