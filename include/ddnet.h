/*
  ddnet.h - DDNet: a network of DDLayers (a DAG: chains, residual adds, U-Net concatenations,
  partition changes), built in code or from the options database / a YAML options file, and
  the training loop.

    DDNetCreate(comm, &net);
    DDNetSetFromOptions(net);          -net_inputs x,target -net_layers c1,r1,c2,loss
                                       -c1_layer_type conv -c1_layer_inputs x ...
    DDNetSetUp(net, 2, (DDTensor[]){x, t});
    DDNetForward(net, 2, (DDTensor[]){x, t});
    DDNetBackward(net);                gradients of the last layer's output (a loss: dL = 1)
*/
#pragma once
#include <ddlayer.h>

typedef struct _p_DDNet *DDNet;
PETSC_EXTERN PetscClassId DD_NET_CLASSID;

PETSC_EXTERN PetscErrorCode DDNetCreate(MPI_Comm, DDNet *);
PETSC_EXTERN PetscErrorCode DDNetSetOptionsPrefix(DDNet, const char[]);
PETSC_EXTERN PetscErrorCode DDNetSetInputNames(DDNet, PetscInt, const char *const[]);
PETSC_EXTERN PetscErrorCode DDNetAddLayer(DDNet, DDLayer, const char[], PetscInt, const char *const[]);
PETSC_EXTERN PetscErrorCode DDNetSetOutput(DDNet, const char[]);
PETSC_EXTERN PetscErrorCode DDNetSetFromOptions(DDNet);
PETSC_EXTERN PetscErrorCode DDNetSetUp(DDNet, PetscInt, DDTensor[]);
PETSC_EXTERN PetscErrorCode DDNetForward(DDNet, PetscInt, DDTensor[]);
PETSC_EXTERN PetscErrorCode DDNetBackward(DDNet, DDTensor);
PETSC_EXTERN PetscErrorCode DDNetGetOutput(DDNet, DDTensor *);
PETSC_EXTERN PetscErrorCode DDNetGetLayer(DDNet, const char[], DDLayer *);
PETSC_EXTERN PetscErrorCode DDNetGetNumLayers(DDNet, PetscInt *);
PETSC_EXTERN PetscErrorCode DDNetGetLayerByIndex(DDNet, PetscInt, DDLayer *, const char *[]);
PETSC_EXTERN PetscErrorCode DDNetGetLayerOutput(DDNet, const char[], DDTensor *);
PETSC_EXTERN PetscErrorCode DDNetGetInputGradient(DDNet, PetscInt, DDTensor *);
PETSC_EXTERN PetscErrorCode DDNetGetParameters(DDNet, PetscInt *, DDTensor *[], DDTensor *[]);
PETSC_EXTERN PetscErrorCode DDNetGetParameterName(DDNet, PetscInt, const char *[]);
PETSC_EXTERN PetscErrorCode DDNetGetNumParameters(DDNet, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDNetZeroGradients(DDNet);
PETSC_EXTERN PetscErrorCode DDNetInitializeParameters(DDNet, PetscInt64);
PETSC_EXTERN PetscErrorCode DDNetSetTraining(DDNet, PetscBool);
PETSC_EXTERN PetscErrorCode DDNetGetLoss(DDNet, PetscReal *);
PETSC_EXTERN PetscErrorCode DDNetSetCheckFinite(DDNet, PetscBool);
PETSC_EXTERN PetscErrorCode DDNetSetLayerTiming(DDNet, PetscBool);
PETSC_EXTERN PetscErrorCode DDNetGetLayerTimes(DDNet, PetscInt, PetscReal *, PetscReal *);
PETSC_EXTERN PetscErrorCode DDNetView(DDNet, PetscViewer);
PETSC_EXTERN PetscErrorCode DDNetViewFromOptions(DDNet, PetscObject, const char[]);
PETSC_EXTERN PetscErrorCode DDNetDestroy(DDNet *);
/* automatic per-layer distribution (issue 16; paper 003 sec. V-C), src/net/distribution.cxx */
typedef enum {
  DD_NET_DISTRIBUTION_GIVEN = 0,
  DD_NET_DISTRIBUTION_AUTO  = 1
} DDNetDistribution;
PETSC_EXTERN const char *const DDNetDistributions[];
PETSC_EXTERN PetscErrorCode    DDNetSetDistribution(DDNet, DDNetDistribution);
PETSC_EXTERN PetscErrorCode    DDNetGetDistribution(DDNet, DDNetDistribution *);
PETSC_EXTERN PetscErrorCode    DDNetSetMemoryLimit(DDNet, PetscInt64);
PETSC_EXTERN PetscErrorCode    DDNetGetMemoryLimit(DDNet, PetscInt64 *);
PETSC_EXTERN PetscErrorCode    DDNetGetDistributionPlan(DDNet, PetscInt *, PetscReal *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode    DDNetViewDistribution(DDNet, PetscViewer);
/* when weights are broadcast to their workers and their gradients summed (issue 16 item 6; src/net/replicas.cxx) */
typedef enum {
  DD_NET_WEIGHTS_BROADCAST  = 0,
  DD_NET_WEIGHTS_REPLICATED = 1,
  DD_NET_WEIGHTS_AUTO       = 2,
  DD_NET_WEIGHTS_DATAPARALLEL = 3
} DDNetWeightMode;
PETSC_EXTERN const char *const DDNetWeightModes[];
PETSC_EXTERN PetscErrorCode    DDNetSetWeightMode(DDNet, DDNetWeightMode);
PETSC_EXTERN PetscErrorCode    DDNetGetWeightMode(DDNet, DDNetWeightMode *);
PETSC_EXTERN PetscErrorCode    DDNetSetWeightCheckInterval(DDNet, PetscInt);
PETSC_EXTERN PetscErrorCode    DDNetGetWeightCheckInterval(DDNet, PetscInt *);
PETSC_EXTERN PetscErrorCode    DDNetSetWeightBucketSize(DDNet, PetscReal);
PETSC_EXTERN PetscErrorCode    DDNetGetWeightBucketSize(DDNet, PetscReal *);
/* weights as a PyTorch state_dict in HDF5 (src/net/weights.cxx) */
PETSC_EXTERN PetscErrorCode DDNetLoadWeights(DDNet, const char[]);
PETSC_EXTERN PetscErrorCode DDNetSaveWeights(DDNet, const char[]);
PETSC_EXTERN PetscErrorCode DDNetSetLayerWeightsName(DDNet, const char[], const char[]);
