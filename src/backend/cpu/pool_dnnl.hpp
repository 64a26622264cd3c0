/* oneDNN max and average pooling on windows of ddnn tensors (float32), forward and backward. */
#pragma once
#include <backend/cpu/dnnl_util.hpp>
#if DDNN_WITH_DNNL
  #include <vector>
  #include <string>

namespace ddnn
{
class DnnlPool
{
public:
  /*
    Geometry (spatial entries padded to 3, leading unit dimensions): kernel k, stride s,
    dilation d (1: none), and the padding on each side of this worker's window (the taps of
    the window that lie outside the tensor: oneDNN skips them). alg: pooling_max,
    pooling_avg_exclude_padding or pooling_avg_include_padding.
    xwin: the descriptor of the input window in the tensor's storage; dense: whether xwin
    covers the whole storage (otherwise the window is copied into a dense buffer of the same
    format, because oneDNN's jit kernels take dense memory only). y: the output, its whole
    storage (an output with a halo is declined by the caller: it would have to be staged).
  */
  PetscErrorCode SetUp(PetscInt D, const PetscInt k[3], const PetscInt s[3], const PetscInt d[3], const PetscInt padl[3], const PetscInt padr[3], dnnl::algorithm alg, const dnnl::memory::desc &xwin, bool dense, const dnnl::memory::desc &y);
  /* y = pool(x window); training keeps max pooling's workspace for Backward */
  PetscErrorCode Forward(void *x, void *y, bool training);
  /* dx window = J^* dy (overwritten; the rest of dx is not touched). Max pooling needs the workspace of a training Forward */
  PetscErrorCode Backward(void *dy, void *dx);
  bool           HasWorkspace() const { return !needws || wsvalid; }
  std::string    Impl() const { return impl; }

private:
  bool                          copy = false, needws = false, wsvalid = false;
  dnnl::memory::desc            xwin, xd, yd;
  dnnl::primitive               fwdtrain, fwdinf, bwd, rin, rout;
  std::vector<float>            xbuf;
  std::vector<unsigned char>    ws;
  dnnl::memory::desc            wsmd;
  std::string                   impl;
};
} // namespace ddnn
#endif
