/*
  DDOptimizer: the interface. Types (src/optimizer/impls: sgd, adam, adamw, or the user's, added
  with DDOptimizerRegister()) declare their state and update the parameters; this file holds the
  common settings, learning-rate schedules and gradient clipping by global norm.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddoptimizerimpl.h>
#include <tensor/layout.hpp>
#include <sys/ddsysimpl.h>
#include <vector>
#include <string>
#include <cmath>
#include <cstdio>

using namespace ddnn;

/* whether every rank of sub's group is in comm's (then sums over comm's ranks cover sub's) */
static PetscErrorCode CommIsSubset(MPI_Comm sub, MPI_Comm comm, PetscBool *flg)
{
  PetscMPIInt cmp, n;
  MPI_Group   gs, gc, gd;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_compare(sub, comm, &cmp));
  if (cmp == MPI_IDENT || cmp == MPI_CONGRUENT) {
    *flg = PETSC_TRUE;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCallMPI(MPI_Comm_group(sub, &gs));
  PetscCallMPI(MPI_Comm_group(comm, &gc));
  PetscCallMPI(MPI_Group_difference(gs, gc, &gd));
  PetscCallMPI(MPI_Group_size(gd, &n));
  *flg = n == 0 ? PETSC_TRUE : PETSC_FALSE;
  PetscCallMPI(MPI_Group_free(&gd));
  PetscCallMPI(MPI_Group_free(&gc));
  PetscCallMPI(MPI_Group_free(&gs));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscClassId      DD_OPTIMIZER_CLASSID;
PetscFunctionList DDOptimizerList = NULL;
static PetscBool  DDOptimizerRegisterAllCalled = PETSC_FALSE;
const char *const DDSchedules[]   = {"constant", "step", "cosine", "DDSchedule", "DD_SCHEDULE_", nullptr};

PetscErrorCode DDOptimizerInitializePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Optimizer", &DD_OPTIMIZER_CLASSID));
  PetscCall(DDOptimizerRegisterAll());
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDOptimizerFinalizePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscFunctionListDestroy(&DDOptimizerList));
  DDOptimizerRegisterAllCalled = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDOptimizerRegister - Adds an optimizer type

  Not collective

  Input Parameters:
+ name     - the type name, used with `DDOptimizerSetType()` and -optimizer_type
- function - the constructor, which fills the ops table (ddnn/private/ddoptimizerimpl.h) of a new optimizer

  Notes:
  The built-in types are registered by `DDOptimizerRegisterAll()` when the package initializes.
  Registering a name again replaces its constructor.

  Level: advanced

.seealso: `DDOptimizerSetType()`, `DDOptimizerRegisterAll()`
@*/
PetscErrorCode DDOptimizerRegister(const char name[], PetscErrorCode (*function)(DDOptimizer))
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDInitializePackage());
  PetscCall(PetscFunctionListAdd(&DDOptimizerList, name, function));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PETSC_EXTERN PetscErrorCode DDOptimizerCreate_SGD(DDOptimizer);
PETSC_EXTERN PetscErrorCode DDOptimizerCreate_Adam(DDOptimizer);
PETSC_EXTERN PetscErrorCode DDOptimizerCreate_AdamW(DDOptimizer);

/*@C
  DDOptimizerRegisterAll - Registers the built-in optimizer types (sgd, adam, adamw)

  Not collective

  Notes:
  Called by `DDInitializePackage()`; calling it again does nothing. Types of the user are added
  with `DDOptimizerRegister()`.

  Level: developer

.seealso: `DDOptimizerRegister()`, `DDOptimizerSetType()`
@*/
PetscErrorCode DDOptimizerRegisterAll(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (DDOptimizerRegisterAllCalled) PetscFunctionReturn(PETSC_SUCCESS);
  DDOptimizerRegisterAllCalled = PETSC_TRUE;
  PetscCall(PetscFunctionListAdd(&DDOptimizerList, DDOPTIMIZERSGD, DDOptimizerCreate_SGD));
  PetscCall(PetscFunctionListAdd(&DDOptimizerList, DDOPTIMIZERADAM, DDOptimizerCreate_Adam));
  PetscCall(PetscFunctionListAdd(&DDOptimizerList, DDOPTIMIZERADAMW, DDOptimizerCreate_AdamW));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerCreate - Creates an optimizer (SGD by default, learning rate 0.01)

  Collective

  Level: beginner

.seealso: `DDOptimizerSetType()`, `DDOptimizerSetUp()`, `DDOptimizerStep()`
@*/
PetscErrorCode DDOptimizerCreate(MPI_Comm comm, DDOptimizer *opt)
DD_CXX_TRY
{
  DDOptimizer o;

  PetscFunctionBegin;
  PetscValidPointer(opt, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(o, DD_OPTIMIZER_CLASSID, "DDOptimizer", "Optimizer", "DDOptimizer", comm, DDOptimizerDestroy, DDOptimizerView));
  o->lr           = 0.01;
  o->nstate       = 0;
  o->beta1        = 0.9;
  o->beta2        = 0.999;
  o->eps          = 1e-8;
  o->gamma        = 0.1;
  o->step_size    = 1;
  o->tmax         = 1;
  o->schedule     = DD_SCHEDULE_CONSTANT;
  o->params       = new std::vector<DDTensor>;
  o->grads        = new std::vector<DDTensor>;
  o->state        = new std::vector<DDTensor>;
  o->statenames   = new std::vector<const char *>;
  *opt            = o;
  PetscCall(DDOptimizerSetType(o, DDOPTIMIZERSGD));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDOptimizerReset(DDOptimizer o)
{
  PetscFunctionBegin;
  for (auto &t : *o->state) PetscCall(DDTensorDestroy(&t));
  o->state->clear();
  o->statenames->clear();
  for (auto &t : *o->params) PetscCall(DDTensorDestroy(&t));
  for (auto &t : *o->grads) PetscCall(DDTensorDestroy(&t));
  o->params->clear();
  o->grads->clear();
  o->nstate      = 0;
  o->setupcalled = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDOptimizerSetType - Chooses the optimizer's type by name

  Collective

  Input Parameters:
+ opt  - the optimizer
- type - `DDOPTIMIZERSGD` ("sgd"), `DDOPTIMIZERADAM` ("adam"), `DDOPTIMIZERADAMW` ("adamw"), or a
         name registered with `DDOptimizerRegister()`

  Options Database Key:
. -optimizer_type <sgd,adam,adamw> - the type

  Notes:
  The common settings (learning rate, schedule, weight decay, momentum, betas, clipping) are kept.
  An unknown name is an error that lists the known ones.

  Level: beginner

.seealso: `DDOptimizerCreate()`, `DDOptimizerRegister()`, `DDOptimizerGetType()`
@*/
PetscErrorCode DDOptimizerSetType(DDOptimizer opt, DDOptimizerType type)
DD_CXX_TRY
{
  PetscErrorCode (*create)(DDOptimizer);
  PetscBool match;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscValidCharPointer(type, 2);
  PetscCall(PetscObjectTypeCompare((PetscObject)opt, type, &match));
  if (match) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscFunctionListFind(DDOptimizerList, type, &create));
  if (!create) {
    char known[1024];
    PetscCall(DDFunctionListKnownTypes_Private(DDOptimizerList, known, sizeof(known)));
    SETERRQ(PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_UNKNOWN_TYPE, "Unknown optimizer type \"%s\" (known types: %s)", type, known);
  }
  PetscCheck(!opt->setupcalled, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_WRONGSTATE, "Set the type before DDOptimizerSetUp()");
  if (opt->ops->destroy) PetscCall((*opt->ops->destroy)(opt));
  PetscCall(PetscMemzero(opt->ops, sizeof(struct _DDOptimizerOps)));
  opt->data = NULL;
  PetscCall(PetscObjectChangeTypeName((PetscObject)opt, type));
  PetscCall((*create)(opt));
  PetscCheck(opt->ops->setup && opt->ops->step, PetscObjectComm((PetscObject)opt), PETSC_ERR_PLIB, "Optimizer type \"%s\" must set the setup and step ops", type);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDOptimizerGetType - The optimizer's type

  Not collective

  Level: beginner

.seealso: `DDOptimizerSetType()`
@*/
PetscErrorCode DDOptimizerGetType(DDOptimizer opt, DDOptimizerType *type)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  *type = ((PetscObject)opt)->type_name;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDOptimizerSetOptionsPrefix - Prefix of the optimizer's options

  Logically collective

  Level: intermediate

.seealso: `DDOptimizerSetFromOptions()`
@*/
PetscErrorCode DDOptimizerSetOptionsPrefix(DDOptimizer opt, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectSetOptionsPrefix((PetscObject)opt, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetLearningRate - The base learning rate

  Logically collective

  Options Database Key:
. -optimizer_lr <lr> - the rate

  Level: beginner

.seealso: `DDOptimizerSetSchedule()`
@*/
PetscErrorCode DDOptimizerSetLearningRate(DDOptimizer opt, PetscReal lr)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  if (!(lr > 0 && !PetscIsInfOrNanReal(lr))) {
    char        v[64];
    const char *prefix = ((PetscObject)opt)->prefix ? ((PetscObject)opt)->prefix : "";
    (void)snprintf(v, sizeof(v), "%g", (double)lr); /* C's %g: PETSc's formatting would print "inf." */
    SETERRQ(PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_OUTOFRANGE, "The learning rate %s (-%soptimizer_lr) must be positive and finite", v, prefix);
  }
  opt->lr = lr;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerGetLearningRate - The learning rate of the current epoch (after the schedule)

  Not collective

  Level: beginner

.seealso: `DDOptimizerSetLearningRate()`
@*/
PetscErrorCode DDOptimizerGetLearningRate(DDOptimizer opt, PetscReal *lr)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  switch (opt->schedule) {
  case DD_SCHEDULE_STEP:
    *lr = opt->lr * PetscPowReal(opt->gamma, (PetscReal)(opt->epoch / opt->step_size));
    break;
  case DD_SCHEDULE_COSINE:
    *lr = opt->eta_min + 0.5 * (opt->lr - opt->eta_min) * (1 + PetscCosReal(PETSC_PI * (PetscReal)PetscMin(opt->epoch, opt->tmax) / opt->tmax));
    break;
  default:
    *lr = opt->lr;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetMomentum - SGD momentum (PyTorch: buf = m buf + g; p -= lr buf) and Nesterov

  Logically collective

  Options Database Keys:
+ -optimizer_momentum <m> - momentum (default 0)
- -optimizer_nesterov <bool> - Nesterov momentum

  Level: beginner

.seealso: `DDOptimizerSetWeightDecay()`
@*/
PetscErrorCode DDOptimizerSetMomentum(DDOptimizer opt, PetscReal m, PetscBool nesterov)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(m >= 0 && m < 1, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_OUTOFRANGE, "Momentum %g must be in [0, 1)", (double)m);
  opt->momentum = m;
  opt->nesterov = nesterov;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetWeightDecay - L2 weight decay (coupled for sgd and adam, decoupled for adamw)

  Logically collective

  Options Database Key:
. -optimizer_weight_decay <wd> - the decay

  Level: beginner

.seealso: `DDOptimizerSetMomentum()`
@*/
PetscErrorCode DDOptimizerSetWeightDecay(DDOptimizer opt, PetscReal wd)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(wd >= 0 && !PetscIsInfOrNanReal(wd), PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_OUTOFRANGE, "Weight decay %g must be non-negative and finite", (double)wd);
  opt->weight_decay = wd;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetBetas - Adam's beta1, beta2 and epsilon

  Logically collective

  Options Database Keys:
+ -optimizer_beta1 <b1> - default 0.9
. -optimizer_beta2 <b2> - default 0.999
- -optimizer_eps <eps> - default 1e-8

  Level: intermediate

.seealso: `DDOPTIMIZERADAM`
@*/
PetscErrorCode DDOptimizerSetBetas(DDOptimizer opt, PetscReal b1, PetscReal b2, PetscReal eps)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1 && eps > 0 && !PetscIsInfOrNanReal(eps), PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_OUTOFRANGE, "Adam needs 0 <= beta1, beta2 < 1 and a finite eps > 0 (beta1 %g, beta2 %g, eps %g)", (double)b1, (double)b2, (double)eps);
  opt->beta1 = b1;
  opt->beta2 = b2;
  opt->eps   = eps;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetSchedule - Learning-rate schedule over epochs

  Logically collective

  Input Parameters:
+ opt      - the optimizer
. schedule - `DD_SCHEDULE_CONSTANT`, `DD_SCHEDULE_STEP` (lr gamma^(floor(epoch / n))) or
             `DD_SCHEDULE_COSINE` (eta_min + (lr - eta_min)(1 + cos(pi epoch / n)) / 2)
. n        - step size (step) or T_max (cosine), in epochs
- a        - gamma (step) or eta_min (cosine)

  Options Database Keys:
+ -optimizer_schedule <constant,step,cosine> - the schedule
. -optimizer_step_size <n> - step size
. -optimizer_gamma <g> - step factor
. -optimizer_tmax <n> - cosine period
- -optimizer_eta_min <e> - cosine floor

  Level: intermediate

.seealso: `DDOptimizerEndEpoch()`
@*/
PetscErrorCode DDOptimizerSetSchedule(DDOptimizer opt, DDSchedule schedule, PetscInt n, PetscReal a)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(n >= 1, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_OUTOFRANGE, "Schedule period %" PetscInt_FMT " must be positive", n);
  opt->schedule = schedule;
  if (schedule == DD_SCHEDULE_STEP) {
    opt->step_size = n;
    opt->gamma     = a;
  } else if (schedule == DD_SCHEDULE_COSINE) {
    opt->tmax    = n;
    opt->eta_min = a;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetClipNorm - Clips the gradients to this global 2-norm before each step (0: off)

  Logically collective

  Options Database Key:
. -optimizer_clip_norm <c> - the bound

  Level: intermediate

.seealso: `DDOptimizerGetLastGradientNorm()`
@*/
PetscErrorCode DDOptimizerSetClipNorm(DDOptimizer opt, PetscReal c)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(c >= 0, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_OUTOFRANGE, "Clip norm %g must be non-negative", (double)c);
  opt->clip = c;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  the ranks must update alike: every setting of the update rule agrees (in the data-parallel weight
  mode each rank updates its own copies, so a momentum or an eps that differed would silently train
  other weights on each rank)
*/
static PetscErrorCode CheckSameSettings(DDOptimizer opt)
{
  char v[768];

  PetscFunctionBegin;
  PetscCall(PetscSNPrintf(v, sizeof(v), "type %s lr %.17g weight decay %.17g clip %.17g schedule %s step size %" PetscInt_FMT " gamma %.17g tmax %" PetscInt_FMT " eta_min %.17g momentum %.17g nesterov %d betas %.17g %.17g eps %.17g", ((PetscObject)opt)->type_name ? ((PetscObject)opt)->type_name : "none", (double)opt->lr, (double)opt->weight_decay, (double)opt->clip, DDSchedules[opt->schedule], opt->step_size, (double)opt->gamma, opt->tmax, (double)opt->eta_min, (double)opt->momentum, (int)opt->nesterov, (double)opt->beta1, (double)opt->beta2, (double)opt->eps));
  PetscCall(DDCheckSameString(PetscObjectComm((PetscObject)opt), "The optimizer's settings", v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDOptimizerSetFromOptions - Configures the optimizer from the options database

  Collective

  Options Database Keys:
+ -optimizer_type <sgd,adam,adamw> - type
. -optimizer_lr, -optimizer_weight_decay - see the setters
. -optimizer_momentum, -optimizer_nesterov - sgd (`DDOPTIMIZERSGD`)
. -optimizer_beta1, -optimizer_beta2, -optimizer_eps - adam, adamw (`DDOPTIMIZERADAM`)
. -optimizer_schedule, -optimizer_step_size, -optimizer_gamma, -optimizer_tmax, -optimizer_eta_min - schedule
- -optimizer_clip_norm <c> - gradient clipping

  Level: beginner

.seealso: `DDOptimizerSetType()`
@*/
PetscErrorCode DDOptimizerSetFromOptions(DDOptimizer opt)
DD_CXX_TRY
{
  char      type[64];
  PetscBool flg;
  PetscReal lr = opt->lr, wd = opt->weight_decay, clip = opt->clip, g = opt->gamma, em = opt->eta_min;
  PetscInt  ss = opt->step_size, tm = opt->tmax;
  PetscEnum sch = (PetscEnum)opt->schedule;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscObjectOptionsBegin((PetscObject)opt);
  PetscCall(PetscOptionsFList("-optimizer_type", "Optimizer", "DDOptimizerSetType", DDOptimizerList, ((PetscObject)opt)->type_name, type, sizeof(type), &flg));
  if (flg) PetscCall(DDOptimizerSetType(opt, type));
  PetscCall(PetscOptionsReal("-optimizer_lr", "Learning rate", "DDOptimizerSetLearningRate", lr, &lr, &flg));
  if (flg) PetscCall(DDOptimizerSetLearningRate(opt, lr));
  PetscCall(PetscOptionsReal("-optimizer_weight_decay", "Weight decay", "DDOptimizerSetWeightDecay", wd, &wd, NULL));
  PetscCall(DDOptimizerSetWeightDecay(opt, wd));
  PetscCall(PetscOptionsEnum("-optimizer_schedule", "Learning-rate schedule", "DDOptimizerSetSchedule", DDSchedules, sch, &sch, NULL));
  PetscCall(PetscOptionsInt("-optimizer_step_size", "Step schedule period (epochs)", "DDOptimizerSetSchedule", ss, &ss, NULL));
  PetscCall(PetscOptionsReal("-optimizer_gamma", "Step schedule factor", "DDOptimizerSetSchedule", g, &g, NULL));
  PetscCall(PetscOptionsInt("-optimizer_tmax", "Cosine schedule period (epochs)", "DDOptimizerSetSchedule", tm, &tm, NULL));
  PetscCall(PetscOptionsReal("-optimizer_eta_min", "Cosine schedule floor", "DDOptimizerSetSchedule", em, &em, NULL));
  opt->step_size = ss;
  opt->gamma     = g;
  opt->tmax      = tm;
  opt->eta_min   = em;
  const DDSchedule schedule = (DDSchedule)sch;
  PetscCall(DDOptimizerSetSchedule(opt, schedule, schedule == DD_SCHEDULE_COSINE ? tm : ss, schedule == DD_SCHEDULE_COSINE ? em : g));
  PetscCall(PetscOptionsReal("-optimizer_clip_norm", "Gradient clipping (global 2-norm)", "DDOptimizerSetClipNorm", clip, &clip, NULL));
  PetscCall(DDOptimizerSetClipNorm(opt, clip));
  if (opt->ops->setfromoptions) PetscCall((*opt->ops->setfromoptions)(opt, PetscOptionsObject));
  PetscOptionsEnd();
  {
    const char *pfx = ((PetscObject)opt)->prefix;
    std::string op  = std::string(pfx ? pfx : "") + "optimizer_";
    PetscCall(DDOptionsCheckIntegers(PetscObjectComm((PetscObject)opt), op.c_str()));
    PetscCall(CheckSameSettings(opt));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetUp - Gives the optimizer the parameters and their gradients; creates its state

  Collective

  Input Parameters:
+ opt    - the optimizer
. n      - number of parameter tensors
. params - the parameters (e.g. from `DDNetGetParameters()`)
- grads  - their gradients, laid out alike, on the optimizer's communicator or on a subset of its ranks

  Notes:
  Every parameter and gradient must be in one memory (`DDTensorSetMemType()`): the state tensors
  are made there and the updates run on the backend of that memory (device tensors: the /gpu/cuda
  update kernels; host tensors: the default backend's chain). Parameters in different memories
  are an error naming the parameter.

  Level: beginner

.seealso: `DDOptimizerStep()`, `DDNetGetParameters()`
@*/
PetscErrorCode DDOptimizerSetUp(DDOptimizer opt, PetscInt n, DDTensor params[], DDTensor grads[])
DD_CXX_TRY
{
  PetscBool inside = PETSC_TRUE;
  PetscInt  outside = -1;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCall(DDOptimizerReset(opt));
  PetscCall(CheckSameSettings(opt));
  /* the global gradient norm is one reduction over the optimizer's ranks: every gradient must live on them */
  for (PetscInt i = 0; i < n && inside; i++) {
    PetscCall(CommIsSubset(PetscObjectComm((PetscObject)grads[i]), PetscObjectComm((PetscObject)opt), &inside));
    if (!inside) outside = i;
  }
  DDCheckAll(PetscObjectComm((PetscObject)opt), inside, PETSC_ERR_ARG_INCOMP, "The gradient of parameter %" PetscInt_FMT " lives on ranks outside the optimizer's communicator", outside);
  /* one memory for every parameter and gradient (a tensor's memory is the same on every rank): the updates run on its backend */
  opt->memtype = n > 0 ? params[0]->memtype : DD_MEMTYPE_HOST;
  for (PetscInt i = 0; i < n; i++) {
    PetscCheck(params[i]->memtype == opt->memtype && grads[i]->memtype == opt->memtype, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_INCOMP, "DDOptimizerSetUp: parameter %" PetscInt_FMT " or its gradient is in %s memory, parameter 0 in %s memory; give the optimizer parameters in one memory", i, DDMemTypes[params[i]->memtype != opt->memtype ? params[i]->memtype : grads[i]->memtype], DDMemTypes[opt->memtype]);
  }
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDTensorCheckCompatible_Private(params[i], grads[i], "DDOptimizerSetUp"));
    PetscCheck(LayoutSameStorage(params[i]->layout, grads[i]->layout), PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "Parameter %" PetscInt_FMT " and its gradient must have the same storage layout", i);
    PetscCall(PetscObjectReference((PetscObject)params[i]));
    PetscCall(PetscObjectReference((PetscObject)grads[i]));
    opt->params->push_back(params[i]);
    opt->grads->push_back(grads[i]);
  }
  PetscCall((*opt->ops->setup)(opt));
  PetscCheck(opt->state->size() == (size_t)opt->nstate * opt->params->size(), PetscObjectComm((PetscObject)opt), PETSC_ERR_PLIB, "Optimizer type %s made %zu state tensors for %zu parameters", ((PetscObject)opt)->type_name, opt->state->size(), opt->params->size());
  opt->step        = 0;
  opt->epoch       = 0;
  opt->setupcalled = PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  errors (on every rank alike: set-up is collective) when a parameter the optimizer was set up with
  was let go by its layer: the network was set up again (DDNetSetUp(), which also re-initializes the
  parameters) and its parameters are new tensors, so the updates would silently miss the network
*/
PetscErrorCode DDOptimizerCheckParameters_Private(DDOptimizer opt, const char caller[])
{
  PetscFunctionBegin;
  for (size_t i = 0; i < opt->params->size(); i++)
    PetscCheck(!(*opt->params)[i]->retired && !(*opt->grads)[i]->retired, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "%s: parameter %zu of the optimizer is no longer its layer's: the network was set up again (DDNetSetUp()), which made new parameter tensors; set the optimizer up again with the network's (DDNetGetParameters(), DDOptimizerSetUp())", caller, i);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the first parameter (on any rank, the same answer on all) whose gradient holds a nan or an inf, or -1;
   kind: 1 a nan (with or without an inf), 2 an inf only. Collective; an element scan (a norm can overflow where every entry is finite) */
static PetscErrorCode FirstNonFiniteGradient(DDOptimizer opt, PetscInt *first, int *kind)
{
  const PetscInt n   = (PetscInt)opt->grads->size();
  PetscInt       bad = n;
  int            k   = 0;

  PetscFunctionBegin;
  for (PetscInt i = 0; i < n && bad == n; i++) {
    PetscCall(DDTensorFiniteFlags_Private((*opt->grads)[i], &k));
    if (k) bad = i;
  }
  MPI_Comm comm = PetscObjectComm((PetscObject)opt);
  PetscCallMPI(MPI_Allreduce(&bad, first, 1, MPIU_INT, MPI_MIN, comm));
  if (bad != *first) k = 0; /* the flags of that parameter's pieces, on the ranks that hold them */
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &k, 1, MPI_INT, MPI_BOR, comm));
  *kind = k & 1 ? 1 : 2;
  if (*first == n) *first = -1;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDOptimizerStep - One update of every parameter from its gradient (PyTorch's rules)

  Collective

  Notes:
  A gradient that holds a nan or an inf is an error on every rank naming the parameter (its index
  in the optimizer's list), before any parameter changes (`PETSC_ERR_FP`).
  With clipping, the gradients are first scaled to the global norm bound; then the type updates
  the parameters (`DDOPTIMIZERSGD`, `DDOPTIMIZERADAM`, `DDOPTIMIZERADAMW` give the rules). The
  global gradient norm (`DDOptimizerGetLastGradientNorm()`) takes one reduction over the
  optimizer's communicator per step, whatever the number of parameters.

  Parameters of a network in the data-parallel weight mode (`DDNetSetWeightMode()`) carry the
  network's hook: the step then also updates their replicas on the ranks that keep them (one small
  all-reduce per worker group), or refreshes them from the parameters where they are not in step.

  Level: beginner

.seealso: `DDOptimizerSetUp()`, `DDOptimizerEndEpoch()`, `DDNetSetWeightMode()`
@*/
PetscErrorCode DDOptimizerStep(DDOptimizer opt)
DD_CXX_TRY
{
  PetscReal lr;
  PetscReal gscale = 1;
  std::vector<std::pair<DDParameterMirror *, std::vector<PetscInt>>> mirrors; /* copies kept elsewhere, and their parameters */

  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(opt->setupcalled, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_WRONGSTATE, "Call DDOptimizerSetUp() first");
  PetscCall(DDOptimizerCheckParameters_Private(opt, "DDOptimizerStep"));
  /* global gradient norm: each parameter lives once, so the sum over the optimizer's ranks of the
     local sums of squares of all gradients is its square (DDTensorNorm()'s definition), in one
     reduction per step instead of one per parameter (SetUp checked the gradients live on these ranks).
     A gradient holding a nan or an inf would make every parameter it reaches nan: an error, before
     anything changes */
  {
    PetscReal tot;
    PetscCall(DDTensorNorm2SquaredSum_Private(PetscObjectComm((PetscObject)opt), (PetscInt)opt->grads->size(), opt->grads->data(), &tot));
    opt->lastnorm = PetscSqrtReal(tot);
    if (PetscIsInfOrNanReal(tot)) {
      PetscInt bad;
      int      kind;
      PetscCall(FirstNonFiniteGradient(opt, &bad, &kind));
      PetscCheck(bad < 0, PetscObjectComm((PetscObject)opt), PETSC_ERR_FP, "DDOptimizerStep: the gradient of parameter %" PetscInt_FMT " (of %" PetscInt_FMT ") holds %s at optimizer step %" PetscInt_FMT "; the parameters are left as they were. The data or the network made it (with a network, -dd_check_finite names the first layer and tensor)", bad, (PetscInt)opt->grads->size(), kind == 1 ? "a nan" : "an inf", opt->step + 1);
    }
  }
  for (PetscInt i = 0; i < (PetscInt)opt->params->size(); i++) {
    PetscObject c;
    void       *m;
    PetscCall(PetscObjectQuery((PetscObject)(*opt->params)[i], DD_PARAMETER_MIRROR, &c));
    if (!c) continue;
    PetscCall(PetscContainerGetPointer((PetscContainer)c, &m));
    size_t j = 0;
    while (j < mirrors.size() && mirrors[j].first != (DDParameterMirror *)m) j++;
    if (j == mirrors.size()) mirrors.push_back({(DDParameterMirror *)m, {}});
    mirrors[j].second.push_back(i);
  }
  for (auto &m : mirrors) PetscCall(m.first->begin(m.first->ctx, opt, (PetscInt)m.second.size(), m.second.data()));
  if (opt->clip > 0 && opt->lastnorm > opt->clip) { /* after the mirrors' begin, which checks the gradients' states */
    gscale = opt->clip / (opt->lastnorm + 1e-6);
    for (auto g : *opt->grads) PetscCall(DDTensorScale(g, gscale));
  }
  opt->step++;
  PetscCall(DDOptimizerGetLearningRate(opt, &lr));
  PetscCall((*opt->ops->step)(opt, lr));
  for (auto p : *opt->params) PetscCall(DDTensorStateIncrease_Private(p));
  for (auto &m : mirrors) PetscCall(m.first->end(m.first->ctx, opt, lr, gscale, (PetscInt)m.second.size(), m.second.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the built-in types' step: ops->steparrays over every parameter's contiguous runs (parameter,
   gradient and state tensors share one storage layout, DDOptimizerSetUp() checked it) */
PetscErrorCode DDOptimizerStepByArrays_Private(DDOptimizer opt, PetscReal lr)
{
  std::vector<void *> s(opt->nstate);

  PetscFunctionBegin;
  for (PetscInt i = 0; i < (PetscInt)opt->params->size(); i++) {
    DDTensor p = (*opt->params)[i], g = (*opt->grads)[i];
    size_t   es;
    PetscCall(DDDataTypeGetSize(p->dtype, &es));
    std::vector<char *> st(opt->nstate);
    for (PetscInt k = 0; k < opt->nstate; k++) {
      DDTensor t;
      PetscCall(DDOptimizerGetParameterState_Private(opt, i, k, &t));
      st[k] = (char *)t->array;
    }
    PetscErrorCode ierr = PETSC_SUCCESS;
    ForEachBulkRun(p->layout, [&](PetscInt off, PetscInt len) {
      if (ierr) return;
      for (PetscInt k = 0; k < opt->nstate; k++) s[k] = st[k] + es * (size_t)off;
      ierr = (*opt->ops->steparrays)(opt, lr, p->dtype, len, (char *)p->array + es * (size_t)off, (const char *)g->array + es * (size_t)off, s.data());
    });
    PetscCall(ierr);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDOptimizerEndEpoch - Advances the schedule by one epoch

  Logically collective

  Level: beginner

.seealso: `DDOptimizerSetSchedule()`
@*/
PetscErrorCode DDOptimizerEndEpoch(DDOptimizer opt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  opt->epoch++;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerGetStepCount - Steps taken and epochs completed

  Not collective

  Level: intermediate

.seealso: `DDOptimizerSetStepCount()`
@*/
PetscErrorCode DDOptimizerGetStepCount(DDOptimizer opt, PetscInt *step, PetscInt *epoch)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  if (step) *step = opt->step;
  if (epoch) *epoch = opt->epoch;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerSetStepCount - Restores the step and epoch counters (checkpoint restart)

  Logically collective

  Level: developer

.seealso: `DDOptimizerGetStepCount()`, `DDCheckpointLoad()`
@*/
PetscErrorCode DDOptimizerSetStepCount(DDOptimizer opt, PetscInt step, PetscInt epoch)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  opt->step  = step;
  opt->epoch = epoch;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDOptimizerGetState - The state tensors (per parameter: sgd momentum_buffer; adam exp_avg, exp_avg_sq)

  Not collective

  Output Parameters:
+ n     - number of state tensors
. state - the tensors, parameter by parameter
- names - their names

  Level: developer

.seealso: `DDCheckpointSave()`
@*/
PetscErrorCode DDOptimizerGetState(DDOptimizer opt, PetscInt *n, DDTensor *state[], const char *const *names[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(opt->setupcalled, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_WRONGSTATE, "Call DDOptimizerSetUp() first");
  if (n) *n = (PetscInt)opt->state->size();
  if (state) *state = opt->state->data();
  if (names) *names = opt->statenames->data();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerGetLastGradientNorm - Global gradient 2-norm seen by the last step (before clipping)

  Not collective

  Level: intermediate

.seealso: `DDOptimizerSetClipNorm()`
@*/
PetscErrorCode DDOptimizerGetLastGradientNorm(DDOptimizer opt, PetscReal *nrm)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  *nrm = opt->lastnorm;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerCheckState - Checks the state tensors after they were overwritten (by `DDCheckpointLoad()`)

  Collective

  Notes:
  The type checks what its update needs (finite moments, a non-negative second moment for Adam)
  and raises the same error on every rank, naming the parameter, when the state is unusable.

  Level: developer

.seealso: `DDOptimizerGetState()`, `DDCheckpointLoad()`
@*/
PetscErrorCode DDOptimizerCheckState(DDOptimizer opt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  PetscCheck(opt->setupcalled, PetscObjectComm((PetscObject)opt), PETSC_ERR_ARG_WRONGSTATE, "Call DDOptimizerSetUp() first");
  if (opt->ops->checkstate) PetscCall((*opt->ops->checkstate)(opt));
  for (auto s : *opt->state) PetscCall(DDTensorStateIncrease_Private(s));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDOptimizerAddState_Private(DDOptimizer opt, PetscInt i, const char name[])
DD_CXX_TRY
{
  DDTensor s;

  PetscFunctionBegin;
  PetscCheck(i >= 0 && i < (PetscInt)opt->params->size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Parameter %" PetscInt_FMT " of %zu", i, opt->params->size());
  PetscCheck(opt->nstate > 0 && opt->state->size() >= (size_t)opt->nstate * i && opt->state->size() < (size_t)opt->nstate * (i + 1), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Set nstate, then add the %" PetscInt_FMT " state tensors of each parameter in order", opt->nstate);
  PetscCall(DDTensorDuplicate((*opt->params)[i], &s));
  PetscCall(DDTensorZeroEntries(s));
  opt->state->push_back(s);
  opt->statenames->push_back(name);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDOptimizerGetParameterState_Private(DDOptimizer opt, PetscInt i, PetscInt k, DDTensor *s)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck(k >= 0 && k < opt->nstate && (size_t)(opt->nstate * i + k) < opt->state->size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "No state tensor %" PetscInt_FMT " of parameter %" PetscInt_FMT, k, i);
  *s = (*opt->state)[opt->nstate * i + k];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDOptimizerView - Prints the optimizer's settings

  Collective

  Level: beginner

.seealso: `DDOptimizerCreate()`
@*/
PetscErrorCode DDOptimizerView(DDOptimizer opt, PetscViewer viewer)
DD_CXX_TRY
{
  PetscBool iascii;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(opt, DD_OPTIMIZER_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)opt), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscObjectPrintClassNamePrefixType((PetscObject)opt, viewer));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  PetscCall(PetscViewerASCIIPrintf(viewer, "lr %g (%s schedule), weight decay %g, clip norm %g, %" PetscInt_FMT " steps\n", (double)opt->lr, DDSchedules[opt->schedule], (double)opt->weight_decay, (double)opt->clip, opt->step));
  if (opt->ops->view) PetscCall((*opt->ops->view)(opt, viewer));
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDOptimizerDestroy - Destroys an optimizer

  Collective

  Level: beginner

.seealso: `DDOptimizerCreate()`
@*/
PetscErrorCode DDOptimizerDestroy(DDOptimizer *opt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (!*opt) PetscFunctionReturn(PETSC_SUCCESS);
  PetscValidHeaderSpecific(*opt, DD_OPTIMIZER_CLASSID, 1);
  if (--((PetscObject)(*opt))->refct > 0) {
    *opt = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDOptimizerReset(*opt));
  if ((*opt)->ops->destroy) PetscCall((*(*opt)->ops->destroy)(*opt));
  delete (*opt)->params;
  delete (*opt)->grads;
  delete (*opt)->state;
  delete (*opt)->statenames;
  PetscCall(PetscHeaderDestroy(opt));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
