#include <backend/cpu/dnnl_util.hpp>
#if DDNN_WITH_DNNL
namespace ddnn
{
using tag = dnnl::memory::format_tag;
using dt  = dnnl::memory::data_type;

dnnl::engine &CpuEngine()
{
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream &CpuStream()
{
  static dnnl::stream s(CpuEngine());
  return s;
}

static tag BlockedTag(PetscInt D, PetscInt bs)
{
  if (bs == 16) return D == 1 ? tag::nCw16c : D == 2 ? tag::nChw16c : tag::nCdhw16c;
  if (bs == 8) return D == 1 ? tag::nCw8c : D == 2 ? tag::nChw8c : tag::nCdhw8c;
  return D == 1 ? tag::nCw4c : D == 2 ? tag::nChw4c : tag::nCdhw4c;
}

dnnl::memory::desc WindowDesc(DDTensor t, PetscInt lead, PetscInt D, const PetscInt origin[], const PetscInt n[], void **handle)
{
  const DDLayout   &L    = t->layout;
  const dt          type = dt::f32; /* oneDNN has no f64 convolution; float64 tensors use the reference loops */
  dnnl::memory::dims dims(2 + D), strides(2 + D), full(2 + D), offs(2 + D);
  for (PetscInt j = 0; j < 2 + D; j++) {
    dims[j]    = n[j];
    strides[j] = L.stride[lead + j];
    full[j]    = L.alloc[lead + j];
    offs[j]    = origin[lead + j];
  }
  if (L.bdim < 0) {
    *handle = (char *)t->array + LayoutOffset(L, origin) * (t->dtype == DD_FLOAT32 ? 4 : 8);
    return dnnl::memory::desc(dims, type, strides);
  }
  *handle = t->array;
  dnnl::memory::desc whole(full, type, BlockedTag(D, L.bs));
  return whole.submemory_desc(dims, offs);
}

bool FormatOfDesc(const dnnl::memory::desc &md, PetscInt D, DDTensorFormat *fmt, PetscInt *bs)
{
  const dnnl_memory_desc_t &c = md.data;
  if (c.format_kind != dnnl_blocked) return false;
  const auto &b = c.format_desc.blocking;
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1) {
    *fmt = DD_FORMAT_BLOCKED;
    *bs  = b.inner_blks[0];
    return true;
  }
  if (b.inner_nblks != 0) return false;
  /* strided: plain when strides decrease with the dimension, channels-last when C is fastest */
  const PetscInt nd      = 2 + D;
  bool           plain   = true, clast = true;
  for (PetscInt j = 0; j + 1 < nd; j++)
    if (c.dims[j] > 1 && c.dims[j + 1] > 1 && b.strides[j] < b.strides[j + 1]) plain = false;
  if (c.dims[1] > 1 && b.strides[1] != 1) clast = false;
  for (PetscInt j = 2; j + 1 < nd; j++)
    if (c.dims[j] > 1 && c.dims[j + 1] > 1 && b.strides[j] < b.strides[j + 1]) clast = false;
  if (plain && (c.dims[1] == 1 || b.strides[1] >= b.strides[nd - 1])) {
    *fmt = DD_FORMAT_PLAIN;
    *bs  = 1;
    return true;
  }
  if (clast) {
    *fmt = DD_FORMAT_CHANNELS_LAST;
    *bs  = 1;
    return true;
  }
  return false;
}

dnnl::memory::desc PlainWeightsDesc(PetscInt O, PetscInt I, PetscInt D, const PetscInt k[3])
{
  dnnl::memory::dims dims = {O, I};
  for (PetscInt j = 3 - D; j < 3; j++) dims.push_back(k[j]);
  return dnnl::memory::desc(dims, dt::f32, D == 1 ? tag::oiw : D == 2 ? tag::oihw : tag::oidhw);
}
} // namespace ddnn
#endif
