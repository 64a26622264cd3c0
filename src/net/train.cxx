/*
  The training loop: mini-batches from a DDDataset, forward, backward, optimizer step, with
  -log_view stages for each phase.
*/
#include <ddnn/private/ddimpl.h>
#include <dddataset.h>
#include <sys/ddsysimpl.h>
#include <cmath>
#include <sys/ddcxx.hpp>

static PetscLogStage StageForward = -1, StageBackward = -1, StageUpdate = -1, StageData = -1;

static PetscErrorCode Stages(void)
{
  PetscFunctionBegin;
  if (StageForward < 0) {
    PetscCall(PetscLogStageRegister("DD Data", &StageData));
    PetscCall(PetscLogStageRegister("DD Forward", &StageForward));
    PetscCall(PetscLogStageRegister("DD Backward", &StageBackward));
    PetscCall(PetscLogStageRegister("DD Update", &StageUpdate));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
/* the stages are registered on first use; PetscFinalize() forgets them, so a new PETSc session registers them again */
PetscErrorCode DDNetTrainResetStages_Private(void)
DD_CXX_TRY
{
  StageForward = StageBackward = StageUpdate = StageData = -1;
  return PETSC_SUCCESS;
}
DD_CXX_CATCH

/*@
  DDNetTrainEpoch - One epoch of mini-batch training

  Collective

  Input Parameters:
+ net   - a set-up network whose output is a loss
. opt   - an optimizer set up on the network's parameters
. ds    - the dataset, one field per network input (in order)
. batch - the batch size (the inputs' leading dimension); the last partial batch is dropped
. seed  - the shuffling seed of this epoch (the same on every partition)
- xs    - the network's input tensors, filled batch by batch

  Output Parameter:
. stats - mean loss, wall time, samples per second, batches

  Notes:
  Each step zeroes the gradients, runs `DDNetForward()`, `DDNetBackward()` and
  `DDOptimizerStep()`; a loss that is nan or inf stops training with an error naming the step
  (`DDNetSetCheckFinite()` names the first layer and tensor), or naming the data field and the
  batch's samples when the batch itself holds nan or inf; the batch size, seed and dataset
  size must agree on every rank (`DDCheckSameString()`); -log_view reports the stages "DD Data", "DD Forward", "DD Backward",
  "DD Update". Ends with `DDOptimizerEndEpoch()`.

  Level: beginner

.seealso: `DDNetEvaluate()`, `DDDatasetReadBatch()`
@*/
PetscErrorCode DDNetTrainEpoch(DDNet net, DDOptimizer opt, DDDataset ds, PetscInt batch, PetscInt64 seed, DDTensor xs[], DDTrainStats *stats)
DD_CXX_TRY
{
  PetscInt  S, nb;
  PetscReal sum = 0;
  double    t0;

  PetscFunctionBegin;
  PetscCall(Stages());
  PetscCall(DDDatasetGetNumSamples(ds, &S));
  PetscCheck(batch > 0 && batch <= S, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "Batch size %" PetscInt_FMT " must be in [1, %" PetscInt_FMT "] (the dataset's samples)", batch, S);
  PetscCall(DDNetSetTraining(net, PETSC_TRUE));
  PetscCall(DDDatasetShuffle(ds, seed));
  nb = S / batch;
  { /* batch size, seed, sample and batch counts must agree on every rank, or the ranks train other batches */
    char v[256];
    PetscCall(PetscSNPrintf(v, sizeof(v), "batch %" PetscInt_FMT ", seed %" PetscInt64_FMT ", samples %" PetscInt_FMT ", batches %" PetscInt_FMT, batch, seed, S, nb));
    PetscCall(DDCheckSameString(PetscObjectComm((PetscObject)net), "DDNetTrainEpoch()'s batch size, seed or dataset size", v));
  }
  PetscCallMPI(MPI_Barrier(PetscObjectComm((PetscObject)net)));
  t0 = MPI_Wtime();
  for (PetscInt b = 0; b < nb; b++) {
    PetscReal loss;
    PetscInt  nf = 0;
    PetscCall(PetscLogStagePush(StageData));
    for (DDTensor *x = xs; *x; x++) nf++;
    for (PetscInt f = 0; f < nf; f++) PetscCall(DDDatasetReadBatch(ds, f, b * batch, batch, xs[f]));
    PetscCall(PetscLogStagePop());
    PetscCall(PetscLogStagePush(StageForward));
    PetscCall(DDNetForward(net, nf, xs));
    PetscCall(PetscLogStagePop());
    PetscCall(DDNetGetLoss(net, &loss));
    if (PetscIsInfOrNanReal(loss)) { /* the loss is the same on every rank: a collective error */
      PetscInt step = 0, epoch = 0;
      PetscCall(DDOptimizerGetStepCount(opt, &step, &epoch));
      for (PetscInt f = 0; f < nf; f++) { /* non-finite data is the data file's fault, not the learning rate's */
        PetscReal nrm;
        PetscCall(DDTensorNorm(xs[f], NORM_2, &nrm));
        if (!PetscIsInfOrNanReal(nrm)) continue;
        const PetscInt *order;
        char            list[160] = "", one[24];
        PetscCall(DDDatasetGetOrder(ds, &order));
        for (PetscInt i = 0; i < batch && i < 8; i++) {
          PetscCall(PetscSNPrintf(one, sizeof(one), i ? ", %" PetscInt_FMT : "%" PetscInt_FMT, order[b * batch + i]));
          PetscCall(PetscStrlcat(list, one, sizeof(list)));
        }
        if (batch > 8) PetscCall(PetscStrlcat(list, ", ...", sizeof(list)));
        SETERRQ(PetscObjectComm((PetscObject)net), PETSC_ERR_FP, "Training stopped: the loss is %s at step %" PetscInt_FMT " of %" PetscInt_FMT " of this epoch (epoch %" PetscInt_FMT ") because the data is not finite: field %" PetscInt_FMT " of the dataset holds nan or inf in one of this batch's samples (%s)", std::isnan((double)loss) ? "nan" : ((double)loss > 0 ? "inf" : "-inf"), b + 1, nb, epoch + 1, f, list);
      }
      SETERRQ(PetscObjectComm((PetscObject)net), PETSC_ERR_NOT_CONVERGED, "Training diverged: the loss is %s at step %" PetscInt_FMT " of %" PetscInt_FMT " of this epoch (epoch %" PetscInt_FMT ", optimizer step %" PetscInt_FMT "); lower the learning rate, or run with -dd_check_finite to find the first layer and tensor that is not finite", std::isnan((double)loss) ? "nan" : ((double)loss > 0 ? "inf" : "-inf"), b + 1, nb, epoch + 1, step + 1);
    }
    sum += loss;
    PetscCall(PetscLogStagePush(StageBackward));
    PetscCall(DDNetZeroGradients(net));
    PetscCall(DDNetBackward(net, NULL));
    PetscCall(PetscLogStagePop());
    PetscCall(PetscLogStagePush(StageUpdate));
    PetscCall(DDOptimizerStep(opt));
    PetscCall(PetscLogStagePop());
  }
  PetscCall(DDOptimizerEndEpoch(opt));
  PetscCallMPI(MPI_Barrier(PetscObjectComm((PetscObject)net)));
  stats->seconds       = MPI_Wtime() - t0;
  stats->batches       = nb;
  stats->loss          = nb ? sum / nb : 0;
  stats->samples_per_s = stats->seconds > 0 ? nb * batch / stats->seconds : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetEvaluate - Mean loss over a dataset in evaluation mode (no gradients)

  Collective

  Input Parameters:
+ net   - the network
. ds    - the dataset
. batch - batch size (the last partial batch is dropped)
- xs    - the network's input tensors (NULL-terminated array)

  Output Parameter:
. loss - the mean loss

  Level: beginner

.seealso: `DDNetTrainEpoch()`
@*/
PetscErrorCode DDNetEvaluate(DDNet net, DDDataset ds, PetscInt batch, DDTensor xs[], PetscReal *loss)
DD_CXX_TRY
{
  PetscInt  S, nb, nf = 0;
  PetscReal sum = 0;

  PetscFunctionBegin;
  PetscCall(DDDatasetGetNumSamples(ds, &S));
  PetscCheck(batch > 0 && batch <= S, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "Batch size %" PetscInt_FMT " must be in [1, %" PetscInt_FMT "]", batch, S);
  {
    char v[128];
    PetscCall(PetscSNPrintf(v, sizeof(v), "batch %" PetscInt_FMT ", samples %" PetscInt_FMT, batch, S));
    PetscCall(DDCheckSameString(PetscObjectComm((PetscObject)net), "DDNetEvaluate()'s batch size or dataset size", v));
  }
  for (DDTensor *x = xs; *x; x++) nf++;
  PetscCall(DDNetSetTraining(net, PETSC_FALSE));
  PetscCall(DDDatasetShuffle(ds, 0));
  nb = S / batch;
  for (PetscInt b = 0; b < nb; b++) {
    PetscReal l;
    for (PetscInt f = 0; f < nf; f++) PetscCall(DDDatasetReadBatch(ds, f, b * batch, batch, xs[f]));
    PetscCall(DDNetForward(net, nf, xs));
    PetscCall(DDNetGetLoss(net, &l));
    PetscCheck(!PetscIsInfOrNanReal(l), PetscObjectComm((PetscObject)net), PETSC_ERR_NOT_CONVERGED, "The evaluation loss is %g on batch %" PetscInt_FMT " of %" PetscInt_FMT ": the network or the data holds nan/inf (run with -dd_check_finite to find the layer)", (double)l, b + 1, nb);
    sum += l;
  }
  PetscCall(DDNetSetTraining(net, PETSC_TRUE));
  *loss = nb ? sum / nb : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
