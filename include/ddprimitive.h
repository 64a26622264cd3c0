/*
  ddprimitive.h - DDPrimitive: data movement on distributed tensors as linear operators.

  Paper 000 (Hewett, Grady, Merizian), sec. 2-3: every data movement F is linear, and its
  adjoint F* is derived, not autodiffed.  A DDPrimitive applies F (DDPrimitiveApply) and F*
  (DDPrimitiveApplyAdjoint); DDPrimitiveGetMat() exposes the pair as a PETSc shell Mat
  (MatMult = F, MatMultTranspose = F*), and DDPrimitiveAdjointTest() checks eq. 26.

  Types:
    DDPRIMITIVEBROADCAST    B_{Px->Py}: copies along dims where Px_k = 1 < Py_k   (sec. 3.2.1)
    DDPRIMITIVESUMREDUCE    R_{Px->Py}: sums along dims where Py_k = 1 < Px_k     (sec. 3.2.2)
    DDPRIMITIVEALLSUMREDUCE A: sum over chosen partition dims, result everywhere   (sec. 3.2.3)
    DDPRIMITIVEREPARTITION  T_{Px->Py}: scatter/gather/all-to-all of a tensor      (sec. 3.2.4)
    DDPRIMITIVEHALO         H: in-place (unbalanced) halo exchange, with padding   (sec. 3.2.5, App. B)
    DDPRIMITIVESCATTER      S: entries of x to entries of y by a global index map   (sec. 3)
    DDPRIMITIVEFFT          F: distributed real FFT of the spatial dims, truncated to the lowest modes
                               (pencils through repartitions; FNO spectral convolution)
*/
#pragma once
#include <ddtensor.h>
#include <petscmat.h>

typedef struct _p_DDPrimitive *DDPrimitive;
PETSC_EXTERN PetscClassId DD_PRIMITIVE_CLASSID;

typedef const char *DDPrimitiveType;
#define DDPRIMITIVEBROADCAST    "broadcast"
#define DDPRIMITIVESUMREDUCE    "sumreduce"
#define DDPRIMITIVEALLSUMREDUCE "allsumreduce"
#define DDPRIMITIVEREPARTITION  "repartition"
#define DDPRIMITIVEHALO         "halo"
#define DDPRIMITIVESCATTER      "scatter"
#define DDPRIMITIVEFFT          "fft"

PETSC_EXTERN PetscFunctionList DDPrimitiveList;
PETSC_EXTERN PetscErrorCode    DDPrimitiveRegister(const char[], PetscErrorCode (*)(DDPrimitive));
PETSC_EXTERN PetscErrorCode    DDPrimitiveRegisterAll(void);

PETSC_EXTERN PetscErrorCode DDPrimitiveCreate(MPI_Comm, DDPrimitive *);
PETSC_EXTERN PetscErrorCode DDPrimitiveSetType(DDPrimitive, DDPrimitiveType);
PETSC_EXTERN PetscErrorCode DDPrimitiveGetType(DDPrimitive, DDPrimitiveType *);
PETSC_EXTERN PetscErrorCode DDPrimitiveSetOptionsPrefix(DDPrimitive, const char[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveAppendOptionsPrefix(DDPrimitive, const char[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveSetFromOptions(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveSetUp(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveApply(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveApplyAdjoint(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveApplyBegin(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveApplyEnd(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveApplyAdjointBegin(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveApplyAdjointEnd(DDPrimitive, DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDPrimitiveGetMat(DDPrimitive, Mat *);
PETSC_EXTERN PetscErrorCode DDPrimitiveAdjointTest(DDPrimitive, DDTensor, DDTensor, PetscInt64, PetscReal *);
PETSC_EXTERN PetscErrorCode DDPrimitiveView(DDPrimitive, PetscViewer);
PETSC_EXTERN PetscErrorCode DDPrimitiveViewFromOptions(DDPrimitive, PetscObject, const char[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveDestroy(DDPrimitive *);

/* helpers that create the output tensor a primitive expects */
PETSC_EXTERN PetscErrorCode DDTensorCreateBroadcast(DDTensor, DDPartition, DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorCreateSumReduce(DDTensor, DDPartition, DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorCreateRepartition(DDTensor, DDPartition, DDTensor *);

/* allsumreduce */
PETSC_EXTERN PetscErrorCode DDPrimitiveAllSumReduceSetDimensions(DDPrimitive, PetscInt, const PetscInt[]);

/* scatter */
PETSC_EXTERN PetscErrorCode DDPrimitiveScatterSetIndexMap(DDPrimitive, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveScatterSetZeroUnmapped(DDPrimitive, PetscBool);

/* fft */
PETSC_EXTERN PetscErrorCode DDTensorCreateFFT(DDTensor, PetscInt, const PetscInt[], DDTensor *);
PETSC_EXTERN PetscErrorCode DDPrimitiveFFTGetVolume(DDPrimitive, PetscInt64 *, PetscInt64 *);

/*E
  DDPaddingMode - how a halo exchange fills entries outside the global tensor

$ DD_PADDING_ZEROS     - a constant (zero unless DDPrimitiveHaloSetPadValue())
$ DD_PADDING_REFLECT   - mirror without repeating the edge entry (PyTorch "reflect")
$ DD_PADDING_REPLICATE - repeat the edge entry
$ DD_PADDING_CIRCULAR  - periodic wrap-around

  Level: intermediate

.seealso: `DDPrimitiveHaloSetPadding()`
E*/
typedef enum {
  DD_PADDING_ZEROS     = 0,
  DD_PADDING_REFLECT   = 1,
  DD_PADDING_REPLICATE = 2,
  DD_PADDING_CIRCULAR  = 3
} DDPaddingMode;
PETSC_EXTERN const char *const DDPaddingModes[];

/* halo */
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloSetKernel(DDPrimitive, PetscInt, PetscInt, PetscInt, PetscInt, PetscInt, PetscInt);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloSetOutputRanges(DDPrimitive, PetscInt, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloSetWindow(DDPrimitive, PetscInt, PetscInt, PetscInt);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloSetPadding(DDPrimitive, PetscInt, DDPaddingMode);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloSetPadValue(DDPrimitive, PetscReal);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloSetNeighborsOnly(DDPrimitive, PetscBool);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloGetWindow(DDPrimitive, PetscInt[], PetscInt[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloGetOutputCorners(DDPrimitive, PetscInt[], PetscInt[]);
PETSC_EXTERN PetscErrorCode DDPrimitiveHaloGetWidths(DDPrimitive, PetscInt[], PetscInt[]);
