/*
  ddlayer.h - DDLayer: distributed neural-network layers, configured like a KSP.

  A layer is a local kernel plus data-movement primitives (paper 000, sec. 4; paper 003,
  sec. III). Forward computes y = F(x); Backward computes dx = J^* dy, the adjoint of the
  Jacobian at the stored forward state, and accumulates the parameters' gradients.

    DDLayerCreate(comm, &conv);
    DDLayerSetOptionsPrefix(conv, "enc1_");
    DDLayerSetType(conv, DDLAYERCONV);            -enc1_layer_type conv
    DDLayerSetFromOptions(conv);                  -enc1_layer_conv_kernel 3,3 ...
    DDLayerSetUp(conv, x);                        input layout known: halos, output layout, weights
    DDLayerGetOutput(conv, &y);                   (or DDLayerCreateOutput() for a tensor of your own)
    DDLayerForward(conv, x, y);
    DDLayerBackward(conv, dy, dx);                dx = J^* dy; parameter gradients accumulate
    DDLayerDestroy(&conv);

  Hyper-parameters mean what they mean in PyTorch, and weights are stored (out, in, k...).
*/
#pragma once
#include <ddprimitive.h>

typedef struct _p_DDLayer *DDLayer;
PETSC_EXTERN PetscClassId DD_LAYER_CLASSID;

typedef const char *DDLayerType;
#define DDLAYERCONV          "conv"
#define DDLAYERCONVTRANSPOSE "convtranspose"
#define DDLAYERPOOL          "pool"
#define DDLAYERAFFINE        "affine"
#define DDLAYERBATCHNORM     "batchnorm"
#define DDLAYERGROUPNORM     "groupnorm"
#define DDLAYERACTIVATION    "activation"
#define DDLAYERDROPOUT       "dropout"
#define DDLAYERUPSAMPLE      "upsample"
#define DDLAYERLOSS          "loss"
#define DDLAYERREPARTITION   "repartition"
#define DDLAYERADD           "add"
#define DDLAYERCONCAT        "concat"
#define DDLAYERFLATTEN       "flatten"
#define DDLAYERSPECTRAL      "spectral"
#define DDLAYERLAYERNORM     "layernorm"
#define DDLAYERRESHAPE       "reshape"

#define DD_LAYER_MAX_INPUTS 8

PETSC_EXTERN PetscFunctionList DDLayerList;
PETSC_EXTERN PetscErrorCode    DDLayerRegister(const char[], PetscErrorCode (*)(DDLayer));
PETSC_EXTERN PetscErrorCode    DDLayerRegisterAll(void);

/* life cycle */
PETSC_EXTERN PetscErrorCode DDLayerCreate(MPI_Comm, DDLayer *);
PETSC_EXTERN PetscErrorCode DDLayerSetType(DDLayer, DDLayerType);
PETSC_EXTERN PetscErrorCode DDLayerGetType(DDLayer, DDLayerType *);
PETSC_EXTERN PetscErrorCode DDLayerSetOptionsPrefix(DDLayer, const char[]);
PETSC_EXTERN PetscErrorCode DDLayerSetBackend(DDLayer, const char[]);
PETSC_EXTERN PetscErrorCode DDLayerGetBackend(DDLayer, const char *[]);
PETSC_EXTERN PetscErrorCode DDLayerAppendOptionsPrefix(DDLayer, const char[]);
PETSC_EXTERN PetscErrorCode DDLayerGetOptionsPrefix(DDLayer, const char *[]);
PETSC_EXTERN PetscErrorCode DDLayerSetFromOptions(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerSetUp(DDLayer, DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerSetUpMulti(DDLayer, PetscInt, DDTensor[]);
PETSC_EXTERN PetscErrorCode DDLayerGetOutput(DDLayer, DDTensor *);
PETSC_EXTERN PetscErrorCode DDLayerCreateOutput(DDLayer, DDTensor *);
PETSC_EXTERN PetscErrorCode DDLayerForward(DDLayer, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerForwardMulti(DDLayer, PetscInt, DDTensor[], DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerBackward(DDLayer, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerBackwardMulti(DDLayer, DDTensor, PetscInt, DDTensor[]);
PETSC_EXTERN PetscErrorCode DDLayerView(DDLayer, PetscViewer);
PETSC_EXTERN PetscErrorCode DDLayerViewFromOptions(DDLayer, PetscObject, const char[]);
PETSC_EXTERN PetscErrorCode DDLayerDestroy(DDLayer *);

/* parameters */
PETSC_EXTERN PetscErrorCode DDLayerGetParameters(DDLayer, PetscInt *, DDTensor *[]);
PETSC_EXTERN PetscErrorCode DDLayerGetGradients(DDLayer, PetscInt *, DDTensor *[]);
PETSC_EXTERN PetscErrorCode DDLayerGetParameterName(DDLayer, PetscInt, const char *[]);
PETSC_EXTERN PetscErrorCode DDLayerGetNumParameters(DDLayer, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerGetBuffers(DDLayer, PetscInt *, const char *const *[], DDTensor *[], PetscInt64 **[]);
PETSC_EXTERN PetscErrorCode DDLayerZeroGradients(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerInitializeParameters(DDLayer, PetscInt64);
PETSC_EXTERN PetscErrorCode DDLayerSetTraining(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerGetTraining(DDLayer, PetscBool *);
PETSC_EXTERN PetscErrorCode DDLayerGetNumInputs(DDLayer, PetscInt *);

/*E
  DDInitType - how parameters are initialized (all give the same global values on any partition for a seed)

$ DD_INIT_DEFAULT        - the layer's PyTorch default (Kaiming-uniform with a = sqrt(5) for conv and affine weights)
$ DD_INIT_KAIMING_UNIFORM - U(-b, b), b = gain sqrt(3 / fan_in) with ReLU gain
$ DD_INIT_KAIMING_NORMAL  - N(0, gain^2 / fan_in)
$ DD_INIT_XAVIER_UNIFORM  - U(-b, b), b = sqrt(6 / (fan_in + fan_out))
$ DD_INIT_XAVIER_NORMAL   - N(0, 2 / (fan_in + fan_out))
$ DD_INIT_UNIFORM         - U(-1, 1) scaled by DDLayerSetInitScale()
$ DD_INIT_ZEROS           - zeros

  Level: intermediate

.seealso: `DDLayerSetInitType()`, `DDLayerInitializeParameters()`
E*/
typedef enum {
  DD_INIT_DEFAULT,
  DD_INIT_KAIMING_UNIFORM,
  DD_INIT_KAIMING_NORMAL,
  DD_INIT_XAVIER_UNIFORM,
  DD_INIT_XAVIER_NORMAL,
  DD_INIT_UNIFORM,
  DD_INIT_ZEROS
} DDInitType;
PETSC_EXTERN const char *const DDInitTypes[];
PETSC_EXTERN PetscErrorCode    DDLayerSetInitType(DDLayer, DDInitType);
PETSC_EXTERN PetscErrorCode    DDLayerSetInitScale(DDLayer, PetscReal);

/* convolution (and transposed convolution) */
PETSC_EXTERN PetscErrorCode DDLayerConvSetOutputChannels(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode DDLayerConvSetKernel(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerConvSetStride(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerConvSetPadding(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerConvSetDilation(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerConvSetOutputPadding(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerConvSetBias(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerConvSetPaddingMode(DDLayer, DDPaddingMode);
PETSC_EXTERN PetscErrorCode DDLayerConvSetChannelWorkers(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode DDLayerConvSetOverlap(DDLayer, PetscBool);
/* the padding rule of a convolution: explicit entries (DDLayerConvSetPadding(), DDLayerConvSetPaddingBeforeAfter()), or PyTorch's padding='same' / 'valid' */
typedef enum {
  DD_CONV_PADDING_EXPLICIT = 0,
  DD_CONV_PADDING_SAME,
  DD_CONV_PADDING_VALID
} DDConvPaddingType;
PETSC_EXTERN const char *const DDConvPaddingTypes[];
PETSC_EXTERN PetscErrorCode    DDLayerConvSetPaddingType(DDLayer, DDConvPaddingType);
PETSC_EXTERN PetscErrorCode    DDLayerConvSetPaddingBeforeAfter(DDLayer, PetscInt, const PetscInt[], const PetscInt[]);
PETSC_EXTERN PetscErrorCode    DDLayerConvSetGroups(DDLayer, PetscInt);

/* pooling */
typedef enum {
  DD_POOL_MAX = 0,
  DD_POOL_AVG = 1
} DDPoolType;
PETSC_EXTERN const char *const DDPoolTypes[];
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetType(DDLayer, DDPoolType);
PETSC_EXTERN PetscErrorCode    DDLayerPoolGetType(DDLayer, DDPoolType *);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetKernel(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetStride(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetPadding(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetDilation(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetCeilMode(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetCountIncludePad(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode    DDLayerPoolSetDivisorOverride(DDLayer, PetscInt);

/* affine (dense) */
PETSC_EXTERN PetscErrorCode DDLayerAffineSetOutputFeatures(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode DDLayerAffineSetBias(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerAffineSetOutputWorkers(DDLayer, PetscInt);

/* normalization */
PETSC_EXTERN PetscErrorCode DDLayerBatchNormSetMomentum(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormSetEpsilon(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormSetAffine(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormGetRunningStatistics(DDLayer, DDTensor *, DDTensor *);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormSetCumulativeAverage(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormSetTrackRunningStats(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormGetNumBatchesTracked(DDLayer, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerBatchNormSetNumBatchesTracked(DDLayer, PetscInt64);
PETSC_EXTERN PetscErrorCode DDLayerGroupNormSetGroups(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode DDLayerGroupNormSetEpsilon(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode DDLayerLayerNormSetDimensions(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode DDLayerLayerNormSetNormalizedShape(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerLayerNormSetEpsilon(DDLayer, PetscReal);

/* activations and dropout */
typedef enum {
  DD_ACT_RELU      = 0,
  DD_ACT_LEAKYRELU = 1,
  DD_ACT_TANH      = 2,
  DD_ACT_SIGMOID   = 3,
  DD_ACT_GELU      = 4,
  DD_ACT_IDENTITY  = 5,
  DD_ACT_SILU      = 6,
  DD_ACT_ELU       = 7,
  DD_ACT_SOFTPLUS  = 8,
  DD_ACT_PRELU     = 9
} DDActivationType;
PETSC_EXTERN const char *const DDActivationTypes[];
typedef enum {
  DD_GELU_APPROXIMATE_NONE = 0,
  DD_GELU_APPROXIMATE_TANH = 1
} DDGeluApproximate;
PETSC_EXTERN const char *const DDGeluApproximates[];
PETSC_EXTERN PetscErrorCode    DDLayerActivationSetType(DDLayer, DDActivationType);
PETSC_EXTERN PetscErrorCode    DDLayerActivationGetType(DDLayer, DDActivationType *);
PETSC_EXTERN PetscErrorCode    DDLayerActivationSetNegativeSlope(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode    DDLayerActivationSetGeluApproximate(DDLayer, DDGeluApproximate);
PETSC_EXTERN PetscErrorCode    DDLayerActivationSetAlpha(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode    DDLayerActivationSetSoftplus(DDLayer, PetscReal, PetscReal);
PETSC_EXTERN PetscErrorCode    DDLayerActivationSetPReLU(DDLayer, PetscInt, PetscReal);
PETSC_EXTERN PetscErrorCode    DDLayerDropoutSetProbability(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode    DDLayerDropoutSetSeed(DDLayer, PetscInt64);

/* upsampling */
typedef enum {
  DD_UPSAMPLE_NEAREST = 0,
  DD_UPSAMPLE_LINEAR  = 1,
  DD_UPSAMPLE_NEAREST_EXACT = 2
} DDUpsampleMode;
PETSC_EXTERN const char *const DDUpsampleModes[];
PETSC_EXTERN PetscErrorCode    DDLayerUpsampleSetMode(DDLayer, DDUpsampleMode);
PETSC_EXTERN PetscErrorCode    DDLayerUpsampleSetScale(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode    DDLayerUpsampleSetAlignCorners(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode    DDLayerUpsampleSetScaleFactors(DDLayer, PetscInt, const PetscReal[]);
PETSC_EXTERN PetscErrorCode    DDLayerUpsampleSetSize(DDLayer, PetscInt, const PetscInt[]);

/* losses */
typedef enum {
  DD_LOSS_MSE          = 0,
  DD_LOSS_L1           = 1,
  DD_LOSS_CROSSENTROPY = 2
} DDLossType;
PETSC_EXTERN const char *const DDLossTypes[];
typedef enum {
  DD_REDUCTION_MEAN = 0,
  DD_REDUCTION_SUM  = 1,
  DD_REDUCTION_NONE = 2
} DDReduction;
PETSC_EXTERN const char *const DDReductions[];
PETSC_EXTERN PetscErrorCode    DDLayerLossSetType(DDLayer, DDLossType);
PETSC_EXTERN PetscErrorCode    DDLayerLossSetReduction(DDLayer, DDReduction);
PETSC_EXTERN PetscErrorCode    DDLayerLossGetValue(DDLayer, PetscReal *);
PETSC_EXTERN PetscErrorCode    DDLayerLossSetClassWeights(DDLayer, PetscInt, const PetscReal[]);
PETSC_EXTERN PetscErrorCode    DDLayerLossSetIgnoreIndex(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode    DDLayerLossSetLabelSmoothing(DDLayer, PetscReal);
PETSC_EXTERN PetscErrorCode    DDLayerLossSetProbabilityTargets(DDLayer, PetscBool);

/* structure: repartition, add (skip connection), concat (U-Net), flatten */
PETSC_EXTERN PetscErrorCode DDLayerRepartitionSetPartition(DDLayer, DDPartition);
PETSC_EXTERN PetscErrorCode DDLayerRepartitionSetShape(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerConcatSetDimension(DDLayer, PetscInt);
PETSC_EXTERN PetscErrorCode DDLayerFlattenSetPartition(DDLayer, DDPartition);
PETSC_EXTERN PetscErrorCode DDLayerReshapeSetShape(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerReshapeSetPartition(DDLayer, DDPartition);

/* spectral convolution (Fourier neural operators) */
PETSC_EXTERN PetscErrorCode DDLayerSpectralSetModes(DDLayer, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerSpectralSetOutputChannels(DDLayer, PetscInt);

/* testing the linear part of a layer (paper 000, eq. 26) */
PETSC_EXTERN PetscErrorCode DDLayerAdjointTest(DDLayer, PetscBool, PetscInt64, PetscReal *);
