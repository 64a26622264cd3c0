/*
  oneDNN pooling kernels of the pooling layer, float32.

  The input window is read in place when it is the whole halo-padded storage (the usual case:
  the layer's halo exchange allocates exactly the window), so the jit kernels run on the
  tensor's own (plain, channels-last or blocked) format with no reorder. A window that is a
  strict part of the storage (extra input of Appendix B.4-B.5, or a halo grown by another
  layer) is a sub-memory, which oneDNN 2.6 only pools with its slow reference kernel; that
  window is copied into a dense buffer of the same format first (a plain copy, not a format
  change) and the gradient copied back.
*/
#include <backend/cpu/pool_dnnl.hpp>
#include <unordered_map>
#include <algorithm>
#if DDNN_WITH_DNNL
namespace ddnn
{
using md  = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;

/* The dense descriptor with the format of a (possibly sub-memory) descriptor */
static md DenseLike(const md &w)
{
  const dnnl_memory_desc_t &c = w.data;
  dnnl::memory::dims        dims(c.dims, c.dims + c.ndims);
  const auto               &b = c.format_desc.blocking;
  if (b.inner_nblks == 1) { /* channel blocks: nCw8c / nChw16c / ... */
    const PetscInt D = c.ndims - 2, bs = b.inner_blks[0];
    tag            t = tag::undef;
    if (bs == 16) t = D == 1 ? tag::nCw16c : D == 2 ? tag::nChw16c : tag::nCdhw16c;
    else if (bs == 8) t = D == 1 ? tag::nCw8c : D == 2 ? tag::nChw8c : tag::nCdhw8c;
    else t = D == 1 ? tag::nCw4c : D == 2 ? tag::nChw4c : tag::nCdhw4c;
    return md(dims, dnnl::memory::data_type::f32, t);
  }
  /* strided: the same order of the strides, dense */
  std::vector<int> ord(c.ndims);
  for (int i = 0; i < c.ndims; i++) ord[i] = i;
  std::stable_sort(ord.begin(), ord.end(), [&](int a, int bb) { return b.strides[a] > b.strides[bb]; });
  dnnl::memory::dims st(c.ndims);
  dnnl_dim_t         s = 1;
  for (int i = c.ndims - 1; i >= 0; i--) {
    st[ord[i]] = s;
    s *= dims[ord[i]];
  }
  return md(dims, dnnl::memory::data_type::f32, st);
}

PetscErrorCode DnnlPool::SetUp(PetscInt D, const PetscInt k[3], const PetscInt s[3], const PetscInt d[3], const PetscInt padl[3], const PetscInt padr[3], dnnl::algorithm alg, const md &x, bool dense, const md &y)
{
  PetscFunctionBegin;
  xwin   = x;
  yd     = y;
  copy   = !dense;
  needws = alg == dnnl::algorithm::pooling_max;
  DDDnnlCall({
    dnnl::memory::dims ks, ss, ds, pl, pr;
    for (PetscInt j = 3 - D; j < 3; j++) {
      ks.push_back(k[j]);
      ss.push_back(s[j]);
      ds.push_back(d[j] - 1); /* oneDNN counts dilation from 0 */
      pl.push_back(padl[j]);
      pr.push_back(padr[j]);
    }
    xd = copy ? DenseLike(xwin) : xwin;
    dnnl::pooling_v2_forward::desc           ft(dnnl::prop_kind::forward_training, alg, xd, yd, ss, ks, ds, pl, pr);
    dnnl::pooling_v2_forward::primitive_desc fpd(ft, CpuEngine());
    fwdtrain = dnnl::pooling_v2_forward(fpd);
    wsmd     = fpd.workspace_desc();
    if (needws) ws.resize(wsmd.get_size() + 1);
    dnnl::pooling_v2_forward::desc           fi(dnnl::prop_kind::forward_inference, alg, xd, yd, ss, ks, ds, pl, pr);
    dnnl::pooling_v2_forward::primitive_desc ipd(fi, CpuEngine());
    fwdinf = dnnl::pooling_v2_forward(ipd);
    dnnl::pooling_v2_backward::desc           bd(alg, xd, yd, ss, ks, ds, pl, pr);
    dnnl::pooling_v2_backward::primitive_desc bpd(bd, CpuEngine(), fpd);
    bwd  = dnnl::pooling_v2_backward(bpd);
    impl = std::string(fpd.impl_info_str()) + (copy ? " (window copied: it is part of the storage)" : "");
    if (copy) {
      xbuf.resize(xd.get_size() / sizeof(float) + 1);
      rin  = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), xwin, CpuEngine(), xd));
      rout = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), xd, CpuEngine(), xwin));
    }
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DnnlPool::Forward(void *x, void *y, bool training)
{
  PetscFunctionBegin;
  DDDnnlCall({
    void *xp = x;
    if (copy) {
      dnnl::memory src(xwin, CpuEngine(), x), dst(xd, CpuEngine(), xbuf.data());
      rin.execute(CpuStream(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
      xp = xbuf.data();
    }
    std::unordered_map<int, dnnl::memory> args;
    args.insert({DNNL_ARG_SRC, dnnl::memory(xd, CpuEngine(), xp)});
    args.insert({DNNL_ARG_DST, dnnl::memory(yd, CpuEngine(), y)});
    if (training && needws) {
      args.insert({DNNL_ARG_WORKSPACE, dnnl::memory(wsmd, CpuEngine(), ws.data())});
      fwdtrain.execute(CpuStream(), args);
    } else if (training) fwdtrain.execute(CpuStream(), args);
    else fwdinf.execute(CpuStream(), args);
    CpuStream().wait();
  });
  wsvalid = training;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DnnlPool::Backward(void *dy, void *dx)
{
  PetscFunctionBegin;
  PetscCheck(HasWorkspace(), PETSC_COMM_SELF, PETSC_ERR_PLIB, "Max pooling's backward needs the workspace of a training forward");
  DDDnnlCall({
    std::unordered_map<int, dnnl::memory> args;
    void                                 *dxp = copy ? (void *)xbuf.data() : dx;
    args.insert({DNNL_ARG_DIFF_DST, dnnl::memory(yd, CpuEngine(), dy)});
    args.insert({DNNL_ARG_DIFF_SRC, dnnl::memory(xd, CpuEngine(), dxp)});
    if (needws) args.insert({DNNL_ARG_WORKSPACE, dnnl::memory(wsmd, CpuEngine(), ws.data())});
    bwd.execute(CpuStream(), args);
    if (copy) {
      dnnl::memory src(xd, CpuEngine(), xbuf.data()), dst(xwin, CpuEngine(), dx);
      rout.execute(CpuStream(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
    }
    CpuStream().wait();
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
#endif
