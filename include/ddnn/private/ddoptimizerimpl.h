/* ddnn/private/ddoptimizerimpl.h - the DDOptimizer class struct (C++), for implementers of optimizer types. */
#pragma once
#include <ddnn/private/ddimpl.h>
#include <ddoptimizer.h>
#include <vector>

/*
  An optimizer type (registered with DDOptimizerRegister()) fills this table in its constructor
  DDOptimizerCreate_<Type>(). The interface (src/optimizer/optimizer.cxx) owns the common
  settings (learning rate and its schedule, weight decay, momentum, betas, clipping), the
  parameters and gradients, and the list of state tensors; a type declares its state and
  updates the parameters.
*/
struct _DDOptimizerOps {
  PetscErrorCode (*setfromoptions)(DDOptimizer, PetscOptionItems *); /* the type's own options */
  /* creates the state tensors of every parameter with DDOptimizerAddState_Private(), the same
     names for each parameter: they are what a checkpoint saves and loads */
  PetscErrorCode (*setup)(DDOptimizer);
  /* one update of every parameter at learning rate lr (the step count already includes it; the
     gradients are already clipped) */
  PetscErrorCode (*step)(DDOptimizer, PetscReal);
  /* checks state tensors just overwritten (a checkpoint load), collectively */
  PetscErrorCode (*checkstate)(DDOptimizer);
  PetscErrorCode (*view)(DDOptimizer, PetscViewer);
  PetscErrorCode (*destroy)(DDOptimizer); /* frees data */
};

struct _p_DDOptimizer {
  PETSCHEADER(struct _DDOptimizerOps);
  void                      *data; /* the type's */
  PetscReal                  lr, momentum, weight_decay, beta1, beta2, eps, clip, gamma, eta_min, lastnorm;
  PetscBool                  nesterov;
  DDSchedule                 schedule;
  PetscInt                   step_size, tmax, step, epoch;
  PetscInt                   nstate; /* state tensors per parameter */
  std::vector<DDTensor>     *params, *grads;
  std::vector<DDTensor>     *state;  /* parameter by parameter, nstate each */
  std::vector<const char *> *statenames;
  PetscBool                  setupcalled;
};

/* Adds a state tensor of parameter i (a zeroed duplicate of it) named name (a string that outlives the optimizer) */
PETSC_EXTERN PetscErrorCode DDOptimizerAddState_Private(DDOptimizer, PetscInt, const char[]);
/* The state tensor k (0 .. nstate-1) of parameter i */
PETSC_EXTERN PetscErrorCode DDOptimizerGetParameterState_Private(DDOptimizer, PetscInt, PetscInt, DDTensor *);
