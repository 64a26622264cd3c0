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
  /* optional: one update of n contiguous entries p with gradient g and the type's nstate state
     arrays s[k], exactly as step updates a parameter's entries (the same coefficients: settings,
     step count, lr). The built-in types' step is DDOptimizerStepByArrays_Private(), this op over
     every parameter's contiguous runs, so both give the same numbers. With it, copies of a
     parameter that other ranks keep (the network's data-parallel weight mode, DDParameterMirror)
     are updated where they live; without it they are refreshed from the parameter after each step. */
  PetscErrorCode (*steparrays)(DDOptimizer, PetscReal, DDDataType, PetscInt, void *, const void *, void *const[]);
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
  DDMemType                  memtype; /* where every parameter lives (DDOptimizerSetUp() checks they agree); the updates run on the backend of that memory */
  PetscBool                  setupcalled;
};

/* an error when a parameter of the optimizer was let go by its layer (the network was set up again) */
PETSC_EXTERN PetscErrorCode DDOptimizerCheckParameters_Private(DDOptimizer, const char[]);
/* step over every parameter's contiguous runs with ops->steparrays (the built-in types' step) */
PETSC_EXTERN PetscErrorCode DDOptimizerStepByArrays_Private(DDOptimizer, PetscReal);

/*
  Copies of parameters that other ranks keep and update along with them: the network's
  data-parallel weight mode (src/net/replicas.cxx) composes a PetscContainer holding a pointer to
  this on each such parameter tensor, under the name DD_PARAMETER_MIRROR. DDOptimizerStep() calls,
  on every rank, once per distinct mirror among its parameters (in the order of their first
  parameter) and with the indices idx[] (into the optimizer's parameters) of the parameters it
  covers: begin() before it clips the gradients, end() after it updated the parameters and bumped
  their states, with the learning rate and the factor the gradients were scaled by (1: none).
  Either may communicate within the ranks of the parameters' communicator.
*/
#define DD_PARAMETER_MIRROR "DDParameterMirror"
struct DDParameterMirror {
  void *ctx;
  PetscErrorCode (*begin)(void *ctx, DDOptimizer, PetscInt n, const PetscInt idx[]);
  PetscErrorCode (*end)(void *ctx, DDOptimizer, PetscReal lr, PetscReal gscale, PetscInt n, const PetscInt idx[]);
};

/* Adds a state tensor of parameter i (a zeroed duplicate of it) named name (a string that outlives the optimizer) */
PETSC_EXTERN PetscErrorCode DDOptimizerAddState_Private(DDOptimizer, PetscInt, const char[]);
/* The state tensor k (0 .. nstate-1) of parameter i */
PETSC_EXTERN PetscErrorCode DDOptimizerGetParameterState_Private(DDOptimizer, PetscInt, PetscInt, DDTensor *);
