/*
  SplitApplyGuard: a layer that overlaps work with a primitive's communication (DDPrimitiveApplyBegin(),
  its own computation, DDPrimitiveApplyEnd(); or the adjoint pair) holds one from the Begin on (C++
  only). If its scope is left by an error return (or a C++ exception) between the Begin and the End,
  the guard's destructor ends the application: the messages are completed and the result is discarded.
  Without it the primitive stays begun, so every later call of the layer fails ("A previous Begin of
  this primitive has not been ended"), and the peers' matching End waits on messages this rank never
  completes. An error of that End is not raised again: the error being returned is the one that
  counts. When the End ran, the guard does nothing, also when that End failed half-way (the End
  marks the primitive ended first: it may have waited for messages a second End would wait for
  again). The peers must have begun too (every rank of the primitive reaches its Begin before the
  work that fails); a failure on one rank alone while the others go on is not recoverable this way.
*/
#pragma once
#include <ddprimitive.h>

namespace ddnn
{
class SplitApplyGuard
{
public:
  /* a and b as given to the Begin (x and y, or for the adjoint y and x) */
  SplitApplyGuard(DDPrimitive p, DDTensor a, DDTensor b) noexcept : p_(p), a_(a), b_(b) { }
  SplitApplyGuard(SplitApplyGuard &&o) noexcept : p_(o.p_), a_(o.a_), b_(o.b_) { o.p_ = nullptr; }
  SplitApplyGuard(const SplitApplyGuard &)            = delete;
  SplitApplyGuard &operator=(const SplitApplyGuard &) = delete;
  SplitApplyGuard &operator=(SplitApplyGuard &&)      = delete;
  ~SplitApplyGuard();

private:
  DDPrimitive p_;
  DDTensor    a_, b_;
};
} // namespace ddnn
