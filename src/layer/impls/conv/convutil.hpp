/* Hyper-parameter arrays of sliding-window layers (kernel, stride, padding, dilation), C++ only. */
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <string>

namespace ddnn
{
/* An integer per spatial dimension, given with 1 entry (all dimensions) or D entries. */
struct SpatialParam {
  PetscInt    n = 0;         /* entries given, 0: not given */
  PetscInt    v[3] = {0, 0, 0};
  const char *opt = "";      /* its option key, for error messages */
  PetscErrorCode Set(MPI_Comm comm, PetscInt cnt, const PetscInt vals[], const char *what)
  {
    PetscFunctionBegin;
    PetscCheck(cnt >= 1 && cnt <= 3, comm, PETSC_ERR_ARG_SIZ, "%s needs 1 to 3 entries, %" PetscInt_FMT " given", what, cnt);
    n = cnt;
    for (PetscInt j = 0; j < cnt; j++) v[j] = vals[j];
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* out[3] (padded with leading defaults) for D spatial dimensions; errors name the option */
  PetscErrorCode Resolve(DDLayer l, PetscInt D, PetscInt dflt, bool required, PetscInt minv, PetscInt out[3]) const
  {
    const char *prefix;
    PetscFunctionBegin;
    PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
    PetscCheck(n || !required, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs -%s%s (or its setter)", prefix ? prefix : "", prefix ? prefix : "", opt);
    PetscCheck(n <= 1 || n == D, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_SIZ, "-%s%s has %" PetscInt_FMT " entries but the input has %" PetscInt_FMT " spatial dimension(s)", prefix ? prefix : "", opt, n, D);
    for (PetscInt j = 0; j < 3; j++) out[j] = (j < 3 - D) ? 1 : (n == 0 ? dflt : (n == 1 ? v[0] : v[j - (3 - D)]));
    for (PetscInt j = 3 - D; j < 3; j++) PetscCheck(out[j] >= minv, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "-%s%s entry %" PetscInt_FMT " must be at least %" PetscInt_FMT, prefix ? prefix : "", opt, out[j], minv);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode FromOptions(PetscOptionItems *PetscOptionsObject, const char *key, const char *text, const char *man)
  {
    PetscInt  vals[8], cnt = 8;
    PetscBool set;
    PetscFunctionBegin;
    opt = key + 1;
    for (PetscInt j = 0; j < 3; j++) vals[j] = v[j];
    PetscCall(PetscOptionsIntArray(key, text, man, vals, &cnt, &set));
    if (set) {
      PetscCheck(cnt >= 1 && cnt <= 3, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "%s has %" PetscInt_FMT " entries; give 1 to 3", key, cnt);
      n = cnt;
      for (PetscInt j = 0; j < cnt; j++) v[j] = vals[j];
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
} // namespace ddnn
