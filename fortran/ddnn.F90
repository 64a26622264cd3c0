!
!  ddnn.F90 - module ddnn: ddnn for Fortran, beside `use petsc`.
!
!  Every subroutine has the name and the arguments of the C function it binds, plus a trailing
!  PetscErrorCode ierr, so that a PETSc Fortran program writes
!
!      PetscCall(DDLayerForward(layer, x, y, ierr))
!
!  Objects are derived types holding the C pointer, as PETSc's are (type(tVec) & co.):
!  type(tDDPartition), type(tDDTensor), type(tDDPrimitive), type(tDDLayer), type(tDDNet),
!  type(tDDOptimizer), type(tDDDataset); their component v is 0 until created and again after
!  DDxxxDestroy(), so that using a destroyed object is a clear "Null handle" error, not a
!  crash. With #include "ddnn/finclude/ddnn.h" they may be declared DDTensor :: x, as Vec :: v.
!  PETSc's Vec, DM and PetscViewer are taken as `use petsc` declares them.
!
!  Arrays whose length the C function takes as an argument (shapes, kernel sizes) are passed
!  the same way; where C returns a pointer to an internal array (DDTensorGetShape()), Fortran
!  passes an array that receives a copy. Generic interfaces accept a scalar where C takes an
!  array of length 1 (DDLayerConvSetKernel(l, 1, 3, ierr)), real(4) or real(8) arrays of
!  values, and the short forms noted below. Strings lose their trailing blanks.
!
!  This module only converts and forwards to the binding ABI (module ddnn_capi, over
!  c_api/ddnn_capi.h); the C functions' man pages are the documentation of each subroutine.
!
#include "petsc/finclude/petscsys.h"
#include "petsc/finclude/petscvec.h"
#include "petsc/finclude/petscdm.h"

module ddnn
  use, intrinsic :: iso_c_binding
  use petscdm
  use ddnn_capi
  implicit none
  private

  ! ------------------------------------------------------------------------------------------
  ! object types
  type, public :: tDDPartition
    integer(c_intptr_t) :: v = 0
  end type tDDPartition
  type, public :: tDDTensor
    integer(c_intptr_t) :: v = 0
  end type tDDTensor
  type, public :: tDDPrimitive
    integer(c_intptr_t) :: v = 0
  end type tDDPrimitive
  type, public :: tDDLayer
    integer(c_intptr_t) :: v = 0
  end type tDDLayer
  type, public :: tDDNet
    integer(c_intptr_t) :: v = 0
  end type tDDNet
  type, public :: tDDOptimizer
    integer(c_intptr_t) :: v = 0
  end type tDDOptimizer
  type, public :: tDDDataset
    integer(c_intptr_t) :: v = 0
  end type tDDDataset

  ! "no object", for the arguments that C allows to be NULL
  type(tDDPartition), parameter, public :: DD_NULL_PARTITION = tDDPartition(0)
  type(tDDTensor), parameter, public :: DD_NULL_TENSOR = tDDTensor(0)
  type(tDDPrimitive), parameter, public :: DD_NULL_PRIMITIVE = tDDPrimitive(0)
  type(tDDLayer), parameter, public :: DD_NULL_LAYER = tDDLayer(0)
  type(tDDNet), parameter, public :: DD_NULL_NET = tDDNet(0)
  type(tDDOptimizer), parameter, public :: DD_NULL_OPTIMIZER = tDDOptimizer(0)
  type(tDDDataset), parameter, public :: DD_NULL_DATASET = tDDDataset(0)

  ! ------------------------------------------------------------------------------------------
  ! enumerations (the values of the C enums) and type names
  PetscEnum, parameter, public :: DD_FLOAT32 = 0, DD_FLOAT64 = 1
  PetscEnum, parameter, public :: DD_FORMAT_PLAIN = 0, DD_FORMAT_CHANNELS_LAST = 1, DD_FORMAT_BLOCKED = 2
  PetscEnum, parameter, public :: DD_PADDING_ZEROS = 0, DD_PADDING_REFLECT = 1, DD_PADDING_REPLICATE = 2, DD_PADDING_CIRCULAR = 3
  PetscEnum, parameter, public :: DD_INIT_DEFAULT = 0, DD_INIT_KAIMING_UNIFORM = 1, DD_INIT_KAIMING_NORMAL = 2, &
                                  DD_INIT_XAVIER_UNIFORM = 3, DD_INIT_XAVIER_NORMAL = 4, DD_INIT_UNIFORM = 5, DD_INIT_ZEROS = 6
  PetscEnum, parameter, public :: DD_POOL_MAX = 0, DD_POOL_AVG = 1
  PetscEnum, parameter, public :: DD_ACT_RELU = 0, DD_ACT_LEAKYRELU = 1, DD_ACT_TANH = 2, DD_ACT_SIGMOID = 3, &
                                  DD_ACT_GELU = 4, DD_ACT_IDENTITY = 5
  PetscEnum, parameter, public :: DD_UPSAMPLE_NEAREST = 0, DD_UPSAMPLE_LINEAR = 1
  PetscEnum, parameter, public :: DD_LOSS_MSE = 0, DD_LOSS_L1 = 1, DD_LOSS_CROSSENTROPY = 2
  PetscEnum, parameter, public :: DD_REDUCTION_MEAN = 0, DD_REDUCTION_SUM = 1
  PetscInt, parameter, public :: DD_MAX_DIM = 8

  character(len=*), parameter, public :: DDPRIMITIVEBROADCAST = 'broadcast', DDPRIMITIVESUMREDUCE = 'sumreduce', &
                                         DDPRIMITIVEALLSUMREDUCE = 'allsumreduce', DDPRIMITIVEREPARTITION = 'repartition', &
                                         DDPRIMITIVEHALO = 'halo'
  character(len=*), parameter, public :: DDLAYERCONV = 'conv', DDLAYERCONVTRANSPOSE = 'convtranspose', DDLAYERPOOL = 'pool', &
                                         DDLAYERAFFINE = 'affine', DDLAYERBATCHNORM = 'batchnorm', DDLAYERGROUPNORM = 'groupnorm', &
                                         DDLAYERACTIVATION = 'activation', DDLAYERDROPOUT = 'dropout', DDLAYERUPSAMPLE = 'upsample', &
                                         DDLAYERLOSS = 'loss', DDLAYERREPARTITION = 'repartition', DDLAYERADD = 'add', &
                                         DDLAYERCONCAT = 'concat', DDLAYERFLATTEN = 'flatten'
  character(len=*), parameter, public :: DDOPTIMIZERSGD = 'sgd', DDOPTIMIZERADAM = 'adam', DDOPTIMIZERADAMW = 'adamw'

  ! ------------------------------------------------------------------------------------------
  ! generic interfaces
  public :: DDInitialize
  interface DDInitialize
    module procedure DDInitializeNoArguments, DDInitializeNoHelp, DDInitializeWithHelp
  end interface DDInitialize
  public :: DDPartitionCreateCartesian
  interface DDPartitionCreateCartesian
    module procedure DDPartitionCreateCartesianRanks, DDPartitionCreateCartesianAll
  end interface DDPartitionCreateCartesian
  public :: DDTensorSetValuesGlobal, DDTensorScatterFromRoot, DDTensorGatherToRoot
  interface DDTensorSetValuesGlobal
    module procedure DDTensorSetValuesGlobal4, DDTensorSetValuesGlobal8
  end interface DDTensorSetValuesGlobal
  interface DDTensorScatterFromRoot
    module procedure DDTensorScatterFromRoot4, DDTensorScatterFromRoot8
  end interface DDTensorScatterFromRoot
  interface DDTensorGatherToRoot
    module procedure DDTensorGatherToRoot4, DDTensorGatherToRoot8
  end interface DDTensorGatherToRoot
  public :: DDPrimitiveAllSumReduceSetDimensions
  interface DDPrimitiveAllSumReduceSetDimensions
    module procedure DDPrimitiveAllSumReduceSetDimensionsA, DDPrimitiveAllSumReduceSetDimensionsS
  end interface DDPrimitiveAllSumReduceSetDimensions
  public :: DDLayerConvSetKernel, DDLayerConvSetStride, DDLayerConvSetPadding, DDLayerConvSetDilation
  interface DDLayerConvSetKernel
    module procedure DDLayerConvSetKernelA, DDLayerConvSetKernelS
  end interface DDLayerConvSetKernel
  interface DDLayerConvSetStride
    module procedure DDLayerConvSetStrideA, DDLayerConvSetStrideS
  end interface DDLayerConvSetStride
  interface DDLayerConvSetPadding
    module procedure DDLayerConvSetPaddingA, DDLayerConvSetPaddingS
  end interface DDLayerConvSetPadding
  interface DDLayerConvSetDilation
    module procedure DDLayerConvSetDilationA, DDLayerConvSetDilationS
  end interface DDLayerConvSetDilation
  public :: DDLayerPoolSetKernel, DDLayerPoolSetStride, DDLayerPoolSetPadding, DDLayerUpsampleSetScale
  interface DDLayerPoolSetKernel
    module procedure DDLayerPoolSetKernelA, DDLayerPoolSetKernelS
  end interface DDLayerPoolSetKernel
  interface DDLayerPoolSetStride
    module procedure DDLayerPoolSetStrideA, DDLayerPoolSetStrideS
  end interface DDLayerPoolSetStride
  interface DDLayerPoolSetPadding
    module procedure DDLayerPoolSetPaddingA, DDLayerPoolSetPaddingS
  end interface DDLayerPoolSetPadding
  interface DDLayerUpsampleSetScale
    module procedure DDLayerUpsampleSetScaleA, DDLayerUpsampleSetScaleS
  end interface DDLayerUpsampleSetScale
  public :: DDLayerGetParameters, DDLayerGetGradients, DDNetGetParameters
  interface DDLayerGetParameters
    module procedure DDLayerGetParametersA, DDLayerGetParametersN
  end interface DDLayerGetParameters
  interface DDLayerGetGradients
    module procedure DDLayerGetGradientsA, DDLayerGetGradientsN
  end interface DDLayerGetGradients
  interface DDNetGetParameters
    module procedure DDNetGetParametersA, DDNetGetParametersN
  end interface DDNetGetParameters
  public :: DDNetAddLayer
  interface DDNetAddLayer
    module procedure DDNetAddLayerInputs, DDNetAddLayerChained
  end interface DDNetAddLayer
  public :: DDOptimizerSetUp
  interface DDOptimizerSetUp
    module procedure DDOptimizerSetUpArrays, DDOptimizerSetUpNet, DDOptimizerSetUpLayer
  end interface DDOptimizerSetUp

  ! ------------------------------------------------------------------------------------------
  ! specific subroutines
  public :: DDFinalize, DDInitialized, DDPushReturnErrorHandler, DDPopErrorHandler, DDGetErrorMessage, DDOptionsCheckUnused
  public :: DDPartitionCreate, DDPartitionSetShape, DDPartitionSetFromOptions, DDPartitionSetUp, DDPartitionCreateFromDMDA, &
            DDPartitionGetOrder, DDPartitionGetShape, DDPartitionGetSize, DDPartitionGetIndex, DDPartitionGetCoordinates, &
            DDPartitionIsActive, DDPartitionView, DDPartitionDestroy
  public :: DDTensorCreate, DDTensorSetPartition, DDTensorSetShape, DDTensorSetDataType, DDTensorSetOwnershipRanges, &
            DDTensorSetFormat, DDTensorSetHalo, DDTensorSetFromOptions, DDTensorSetUp, DDTensorCreateFromPartition, &
            DDTensorCreateFromDMDA, DDTensorDuplicate, DDTensorGetOrder, DDTensorGetShape, DDTensorGetSize, &
            DDTensorGetLocalSize, DDTensorGetDataType, DDTensorGetFormat, DDTensorGetPartition, DDTensorGetCorners, &
            DDTensorGetHalo, DDTensorGetOwnershipRanges, DDTensorIsActive, DDTensorZeroEntries, DDTensorSet, DDTensorScale, &
            DDTensorCopy, DDTensorAXPY, DDTensorAXPBY, DDTensorDot, DDTensorNorm, DDTensorSum, DDTensorMaxAbsDiff, &
            DDTensorSetRandomGlobal, DDTensorPlaceVec, DDTensorResetVec, DDTensorCopyFromVec, DDTensorCopyToVec, &
            DDTensorCreateVec, DDTensorWriteHDF5, DDTensorReadHDF5, DDTensorView, DDTensorDestroy, &
            DDTensorCreateBroadcast, DDTensorCreateSumReduce, DDTensorCreateRepartition
  public :: DDPrimitiveCreate, DDPrimitiveSetType, DDPrimitiveGetType, DDPrimitiveSetOptionsPrefix, DDPrimitiveSetFromOptions, &
            DDPrimitiveSetUp, DDPrimitiveApply, DDPrimitiveApplyAdjoint, DDPrimitiveAdjointTest, DDPrimitiveHaloSetKernel, &
            DDPrimitiveHaloSetPadding, DDPrimitiveHaloSetPadValue, DDPrimitiveHaloSetWindow, DDPrimitiveView, DDPrimitiveDestroy
  public :: DDLayerCreate, DDLayerSetType, DDLayerGetType, DDLayerSetOptionsPrefix, DDLayerAppendOptionsPrefix, &
            DDLayerSetFromOptions, DDLayerSetUp, DDLayerSetUpMulti, DDLayerGetOutput, DDLayerCreateOutput, DDLayerForward, &
            DDLayerForwardMulti, DDLayerBackward, DDLayerBackwardMulti, DDLayerGetNumParameters, DDLayerZeroGradients, &
            DDLayerInitializeParameters, DDLayerSetInitType, DDLayerSetInitScale, DDLayerSetTraining, DDLayerAdjointTest, &
            DDLayerView, DDLayerDestroy, DDLayerConvSetOutputChannels, DDLayerConvSetBias, DDLayerConvSetPaddingMode, &
            DDLayerPoolSetType, DDLayerAffineSetOutputFeatures, DDLayerAffineSetBias, DDLayerActivationSetType, &
            DDLayerActivationSetNegativeSlope, DDLayerUpsampleSetMode, DDLayerConcatSetDimension, DDLayerLossSetType, &
            DDLayerLossSetReduction, DDLayerLossGetValue
  public :: DDNetCreate, DDNetSetOptionsPrefix, DDNetSetInputNames, DDNetSetOutput, DDNetSetFromOptions, DDNetSetUp, &
            DDNetForward, DDNetBackward, DDNetGetOutput, DDNetGetLayer, DDNetGetNumLayers, DDNetGetLayerOutput, &
            DDNetGetNumParameters, DDNetZeroGradients, DDNetInitializeParameters, DDNetSetTraining, DDNetGetLoss, &
            DDNetView, DDNetDestroy
  public :: DDOptimizerCreate, DDOptimizerSetType, DDOptimizerSetOptionsPrefix, DDOptimizerSetFromOptions, &
            DDOptimizerSetLearningRate, DDOptimizerGetLearningRate, DDOptimizerSetMomentum, DDOptimizerSetWeightDecay, &
            DDOptimizerSetClipNorm, DDOptimizerStep, DDOptimizerEndEpoch, DDOptimizerGetStepCount, DDOptimizerView, &
            DDOptimizerDestroy
  public :: DDDatasetCreate, DDDatasetSetFile, DDDatasetSetFields, DDDatasetSetRange, DDDatasetSetOptionsPrefix, &
            DDDatasetSetFromOptions, DDDatasetSetUp, DDDatasetGetNumSamples, DDDatasetShuffle, DDDatasetReadBatch, &
            DDDatasetDestroy, DDCheckpointSave, DDCheckpointLoad

  ! the signature of the ABI's (layer, n, ints) setters
  abstract interface
    function layer_ints_fn(l, n, a) bind(C) result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: a(*)
    end function layer_ints_fn
  end interface

  logical, save :: dd_began_petsc = .false. ! DDInitialize() initialized PETSc

contains

  ! ==========================================================================================
  ! helpers

  ! the length of a string without its trailing blanks
  pure function slen(s) result(n)
    character(len=*), intent(in) :: s
    integer(c_int64_t) :: n
    n = len_trim(s, kind=c_int64_t)
  end function slen

  pure function cbool(b) result(i)
    PetscBool, intent(in) :: b
    integer(c_int) :: i
    i = merge(1_c_int, 0_c_int, b)
  end function cbool

  ! a NUL-terminated C string into a blank-padded Fortran one
  subroutine FromCString(buf, s)
    character(kind=c_char), intent(in) :: buf(:)
    character(len=*), intent(out) :: s
    integer :: i
    s = ' '
    do i = 1, min(size(buf), len(s))
      if (buf(i) == c_null_char) exit
      s(i:i) = buf(i)
    end do
  end subroutine FromCString

  ! names(1:n) as NUL-terminated C strings: chars keeps them, ptrs points at them (null beyond size(names))
  subroutine ToCStrings(names, n, chars, ptrs)
    character(len=*), intent(in) :: names(:)
    integer, intent(in) :: n
    character(kind=c_char), allocatable, target, intent(inout) :: chars(:, :)
    type(c_ptr), allocatable, intent(inout) :: ptrs(:)
    integer :: i, j, l
    allocate (chars(len(names) + 1, max(size(names), 1)), ptrs(max(n, 1)))
    ptrs = c_null_ptr
    do i = 1, min(n, size(names))
      l = len_trim(names(i))
      do j = 1, l
        chars(j, i) = names(i) (j:j)
      end do
      chars(l + 1, i) = c_null_char
      ptrs(i) = c_loc(chars(1, i))
    end do
  end subroutine ToCStrings

  ! the handles of xs(1:n), null beyond size(xs) (reported by the ABI as null handles)
  pure function handles(xs, n) result(h)
    type(tDDTensor), intent(in) :: xs(:)
    PetscInt, intent(in) :: n
    integer(c_intptr_t) :: h(max(size(xs), int(n), 1))
    h = 0
    h(1:size(xs)) = xs%v
  end function handles

  ! (n, ints) setters of layers; a scalar is an array of length n = 1
  subroutine LayerInts(f, l, n, a, ierr)
    procedure(layer_ints_fn) :: f
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n
    PetscInt, intent(in) :: a(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: b(max(size(a), 1))
    b(1:size(a)) = a
    ierr = f(l%v, int(n, c_int64_t), b)
  end subroutine LayerInts

  ! ==========================================================================================
  ! package

  ! DDInitialize - initializes PETSc (with Fortran's PetscInitialize(), if not yet done) and ddnn
  subroutine DDInitializeNoArguments(ierr)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: flg
    ierr = ddnn_petsc_initialized(flg)
    if (ierr /= 0) return
    if (flg == 0) then
      call PetscInitialize(ierr)
      if (ierr /= 0) return
      dd_began_petsc = .true.
    end if
    ierr = ddnn_initialize('', 0_c_int64_t, '', 0_c_int64_t)
  end subroutine DDInitializeNoArguments

  ! DDInitialize - as above, with an options file (or PETSC_NULL_CHARACTER)
  subroutine DDInitializeNoHelp(file, ierr)
    character(len=*), intent(in) :: file
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: flg
    ierr = ddnn_petsc_initialized(flg)
    if (ierr /= 0) return
    if (flg == 0) then
      call PetscInitialize(file, ierr)
      if (ierr /= 0) return
      dd_began_petsc = .true.
    end if
    ierr = ddnn_initialize('', 0_c_int64_t, '', 0_c_int64_t)
  end subroutine DDInitializeNoHelp

  ! DDInitialize - as above, with an options file and a help message printed by -help
  subroutine DDInitializeWithHelp(file, help, ierr)
    character(len=*), intent(in) :: file, help
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: flg
    ierr = ddnn_petsc_initialized(flg)
    if (ierr /= 0) return
    if (flg == 0) then
      call PetscInitialize(file, help, ierr)
      if (ierr /= 0) return
      dd_began_petsc = .true.
    end if
    ierr = ddnn_initialize('', 0_c_int64_t, '', 0_c_int64_t)
  end subroutine DDInitializeWithHelp

  ! DDFinalize - finalizes ddnn, and PETSc if DDInitialize() initialized it
  subroutine DDFinalize(ierr)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_finalize()
    if (ierr /= 0) return
    if (dd_began_petsc) then
      dd_began_petsc = .false.
      call PetscFinalize(ierr)
    end if
  end subroutine DDFinalize

  ! DDInitialized - whether ddnn's package is initialized
  subroutine DDInitialized(flg, ierr)
    PetscBool, intent(out) :: flg
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: i
    ierr = ddnn_initialized(i)
    flg = i /= 0
  end subroutine DDInitialized

  ! DDPushReturnErrorHandler - PetscPushErrorHandler(PetscReturnErrorHandler): errors return their code silently
  !   (PETSc 3.18's Fortran interface cannot name PetscReturnErrorHandler); undo with DDPopErrorHandler()
  subroutine DDPushReturnErrorHandler(ierr)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_push_error_handler_return()
  end subroutine DDPushReturnErrorHandler

  ! DDPopErrorHandler - PetscPopErrorHandler()
  subroutine DDPopErrorHandler(ierr)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_pop_error_handler()
  end subroutine DDPopErrorHandler

  ! DDGetErrorMessage - the message of the most recent error raised with code (PetscErrorMessage())
  subroutine DDGetErrorMessage(code, msg, ierr)
    PetscErrorCode, intent(in) :: code
    character(len=*), intent(out) :: msg
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char) :: buf(max(len(msg), 1) + 1)
    ierr = ddnn_error_message(int(code, c_int), buf, size(buf, kind=c_int64_t))
    call FromCString(buf, msg)
  end subroutine DDGetErrorMessage

  ! DDOptionsCheckUnused - an error naming every option given but never used (prefix '' for all)
  subroutine DDOptionsCheckUnused(comm, prefix, ierr)
    MPI_Comm, intent(in) :: comm
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_options_check_unused(int(comm, c_int), prefix, slen(prefix))
  end subroutine DDOptionsCheckUnused

  ! ==========================================================================================
  ! DDPartition

  ! DDPartitionCreate - creates a partition on comm
  subroutine DDPartitionCreate(comm, part, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDPartition), intent(inout) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_create(int(comm, c_int), part%v)
  end subroutine DDPartitionCreate

  ! DDPartitionSetShape - the process grid's shape
  subroutine DDPartitionSetShape(part, order, shape, ierr)
    type(tDDPartition), intent(in) :: part
    PetscInt, intent(in) :: order, shape(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_set_shape(part%v, int(order, c_int64_t), int(shape, c_int64_t))
  end subroutine DDPartitionSetShape

  ! DDPartitionSetFromOptions - configures the partition from the options database
  subroutine DDPartitionSetFromOptions(part, ierr)
    type(tDDPartition), intent(in) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_set_from_options(part%v)
  end subroutine DDPartitionSetFromOptions

  ! DDPartitionSetUp - builds the partition's communicators
  subroutine DDPartitionSetUp(part, ierr)
    type(tDDPartition), intent(in) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_set_up(part%v)
  end subroutine DDPartitionSetUp

  ! DDPartitionCreateCartesian - a partition of the given shape on the ranks given (nranks = PETSC_DECIDE: the first ones)
  subroutine DDPartitionCreateCartesianRanks(comm, order, shape, nranks, ranks, part, ierr)
    MPI_Comm, intent(in) :: comm
    PetscInt, intent(in) :: order, shape(:), nranks
    PetscMPIInt, intent(in) :: ranks(:)
    type(tDDPartition), intent(inout) :: part
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: r(max(size(ranks), int(nranks), 1))
    r = -1 ! entries beyond ranks(:) are invalid ranks, reported by the C function
    r(1:size(ranks)) = ranks
    ierr = ddnn_partition_create_cartesian(int(comm, c_int), int(order, c_int64_t), int(shape, c_int64_t), &
                                           int(nranks, c_int64_t), r, part%v)
  end subroutine DDPartitionCreateCartesianRanks

  ! DDPartitionCreateCartesian - short form: the first ranks of comm
  subroutine DDPartitionCreateCartesianAll(comm, order, shape, part, ierr)
    MPI_Comm, intent(in) :: comm
    PetscInt, intent(in) :: order, shape(:)
    type(tDDPartition), intent(inout) :: part
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: r(1)
    r = 0
    ierr = ddnn_partition_create_cartesian(int(comm, c_int), int(order, c_int64_t), int(shape, c_int64_t), -1_c_int64_t, r, part%v)
  end subroutine DDPartitionCreateCartesianAll

  ! DDPartitionCreateFromDMDA - the partition of a DMDA's process grid, after lead leading dimensions of extent 1
  subroutine DDPartitionCreateFromDMDA(da, lead, part, ierr)
    DM, intent(in) :: da
    PetscInt, intent(in) :: lead
    type(tDDPartition), intent(inout) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_create_from_dmda(int(da%v, c_intptr_t), int(lead, c_int64_t), part%v)
  end subroutine DDPartitionCreateFromDMDA

  ! DDPartitionGetOrder - the number of dimensions of the process grid
  subroutine DDPartitionGetOrder(part, order, ierr)
    type(tDDPartition), intent(in) :: part
    PetscInt, intent(out) :: order
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: o
    ierr = ddnn_partition_get_order(part%v, o)
    order = int(o, kind(order))
  end subroutine DDPartitionGetOrder

  ! DDPartitionGetShape - a copy of the process grid's shape (shape(1:order))
  subroutine DDPartitionGetShape(part, shape, ierr)
    type(tDDPartition), intent(in) :: part
    PetscInt, intent(out) :: shape(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: s(DD_MAX_DIM)
    ierr = ddnn_partition_get_shape(part%v, size(shape, kind=c_int64_t), s)
    if (ierr == 0) shape = int(s(1:size(shape)), kind(shape))
  end subroutine DDPartitionGetShape

  ! DDPartitionGetSize - the number of workers
  subroutine DDPartitionGetSize(part, n, ierr)
    type(tDDPartition), intent(in) :: part
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: m
    ierr = ddnn_partition_get_size(part%v, m)
    n = int(m, kind(n))
  end subroutine DDPartitionGetSize

  ! DDPartitionGetIndex - this rank's worker index (-1 on idle ranks)
  subroutine DDPartitionGetIndex(part, idx, ierr)
    type(tDDPartition), intent(in) :: part
    PetscInt, intent(out) :: idx
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: i
    ierr = ddnn_partition_get_index(part%v, i)
    idx = int(i, kind(idx))
  end subroutine DDPartitionGetIndex

  ! DDPartitionGetCoordinates - this rank's coordinates in the process grid
  subroutine DDPartitionGetCoordinates(part, coords, ierr)
    type(tDDPartition), intent(in) :: part
    PetscInt, intent(out) :: coords(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: c(DD_MAX_DIM)
    ierr = ddnn_partition_get_coordinates(part%v, size(coords, kind=c_int64_t), c)
    if (ierr == 0) coords = int(c(1:size(coords)), kind(coords))
  end subroutine DDPartitionGetCoordinates

  ! DDPartitionIsActive - whether this rank is a worker of the partition
  subroutine DDPartitionIsActive(part, flg, ierr)
    type(tDDPartition), intent(in) :: part
    PetscBool, intent(out) :: flg
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: i
    ierr = ddnn_partition_is_active(part%v, i)
    flg = i /= 0
  end subroutine DDPartitionIsActive

  ! DDPartitionView - prints the partition
  subroutine DDPartitionView(part, viewer, ierr)
    type(tDDPartition), intent(in) :: part
    PetscViewer, intent(in) :: viewer
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_view(part%v, int(viewer%v, c_intptr_t))
  end subroutine DDPartitionView

  ! DDPartitionDestroy - destroys the partition; part becomes null
  subroutine DDPartitionDestroy(part, ierr)
    type(tDDPartition), intent(inout) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_partition_destroy(part%v)
  end subroutine DDPartitionDestroy

  ! ==========================================================================================
  ! DDTensor

  ! DDTensorCreate - creates a tensor on comm
  subroutine DDTensorCreate(comm, t, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDTensor), intent(inout) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_create(int(comm, c_int), t%v)
  end subroutine DDTensorCreate

  ! DDTensorSetPartition - the partition the tensor is split over
  subroutine DDTensorSetPartition(t, part, ierr)
    type(tDDTensor), intent(in) :: t
    type(tDDPartition), intent(in) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_partition(t%v, part%v)
  end subroutine DDTensorSetPartition

  ! DDTensorSetShape - the global shape, C order (N, C, [D,] H, W)
  subroutine DDTensorSetShape(t, order, shape, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(in) :: order, shape(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_shape(t%v, int(order, c_int64_t), int(shape, c_int64_t))
  end subroutine DDTensorSetShape

  ! DDTensorSetDataType - DD_FLOAT32 or DD_FLOAT64
  subroutine DDTensorSetDataType(t, dtype, ierr)
    type(tDDTensor), intent(in) :: t
    PetscEnum, intent(in) :: dtype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_data_type(t%v, int(dtype, c_int))
  end subroutine DDTensorSetDataType

  ! DDTensorSetOwnershipRanges - the sizes of the pieces along dimension dim (0-based), like DMDA's lx
  subroutine DDTensorSetOwnershipRanges(t, dim, lx, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(in) :: dim, lx(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_ownership_ranges(t%v, int(dim, c_int64_t), size(lx, kind=c_int64_t), int(lx, c_int64_t))
  end subroutine DDTensorSetOwnershipRanges

  ! DDTensorSetFormat - DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST or DD_FORMAT_BLOCKED
  subroutine DDTensorSetFormat(t, fmt, ierr)
    type(tDDTensor), intent(in) :: t
    PetscEnum, intent(in) :: fmt
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_format(t%v, int(fmt, c_int))
  end subroutine DDTensorSetFormat

  ! DDTensorSetHalo - this rank's halo widths before (lo) and after (hi) its piece, one per dimension
  subroutine DDTensorSetHalo(t, lo, hi, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(in) :: lo(:), hi(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_halo(t%v, size(lo, kind=c_int64_t), int(lo, c_int64_t), int(hi, c_int64_t))
  end subroutine DDTensorSetHalo

  ! DDTensorSetFromOptions - configures the tensor from the options database
  subroutine DDTensorSetFromOptions(t, ierr)
    type(tDDTensor), intent(in) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_from_options(t%v)
  end subroutine DDTensorSetFromOptions

  ! DDTensorSetUp - allocates the tensor's local storage
  subroutine DDTensorSetUp(t, ierr)
    type(tDDTensor), intent(in) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_up(t%v)
  end subroutine DDTensorSetUp

  ! DDTensorCreateFromPartition - a set-up tensor of the given shape, balanced over part
  subroutine DDTensorCreateFromPartition(part, dtype, order, shape, t, ierr)
    type(tDDPartition), intent(in) :: part
    PetscEnum, intent(in) :: dtype
    PetscInt, intent(in) :: order, shape(:)
    type(tDDTensor), intent(inout) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_create_from_partition(part%v, int(dtype, c_int), int(order, c_int64_t), int(shape, c_int64_t), t%v)
  end subroutine DDTensorCreateFromPartition

  ! DDTensorCreateFromDMDA - a tensor (1, dof, [Mz,] My, Mx), channels last, with the DMDA's decomposition
  subroutine DDTensorCreateFromDMDA(da, dtype, t, ierr)
    DM, intent(in) :: da
    PetscEnum, intent(in) :: dtype
    type(tDDTensor), intent(inout) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_create_from_dmda(int(da%v, c_intptr_t), int(dtype, c_int), t%v)
  end subroutine DDTensorCreateFromDMDA

  ! DDTensorDuplicate - a new tensor with t's layout
  subroutine DDTensorDuplicate(t, dup, ierr)
    type(tDDTensor), intent(in) :: t
    type(tDDTensor), intent(inout) :: dup
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_duplicate(t%v, dup%v)
  end subroutine DDTensorDuplicate

  ! DDTensorGetOrder - the number of dimensions
  subroutine DDTensorGetOrder(t, order, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(out) :: order
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: o
    ierr = ddnn_tensor_get_order(t%v, o)
    order = int(o, kind(order))
  end subroutine DDTensorGetOrder

  ! DDTensorGetShape - a copy of the global shape, C order (shape(1:order))
  subroutine DDTensorGetShape(t, shape, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(out) :: shape(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: s(DD_MAX_DIM)
    ierr = ddnn_tensor_get_shape(t%v, size(shape, kind=c_int64_t), s)
    if (ierr == 0) shape = int(s(1:size(shape)), kind(shape))
  end subroutine DDTensorGetShape

  ! DDTensorGetSize - the global number of entries
  subroutine DDTensorGetSize(t, n, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: m
    ierr = ddnn_tensor_get_size(t%v, m)
    n = int(m, kind(n))
  end subroutine DDTensorGetSize

  ! DDTensorGetLocalSize - the number of entries of this rank's piece
  subroutine DDTensorGetLocalSize(t, n, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: m
    ierr = ddnn_tensor_get_local_size(t%v, m)
    n = int(m, kind(n))
  end subroutine DDTensorGetLocalSize

  ! DDTensorGetDataType - DD_FLOAT32 or DD_FLOAT64
  subroutine DDTensorGetDataType(t, dtype, ierr)
    type(tDDTensor), intent(in) :: t
    PetscEnum, intent(out) :: dtype
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: d
    ierr = ddnn_tensor_get_data_type(t%v, d)
    dtype = d
  end subroutine DDTensorGetDataType

  ! DDTensorGetFormat - the local storage format
  subroutine DDTensorGetFormat(t, fmt, ierr)
    type(tDDTensor), intent(in) :: t
    PetscEnum, intent(out) :: fmt
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: f
    ierr = ddnn_tensor_get_format(t%v, f)
    fmt = f
  end subroutine DDTensorGetFormat

  ! DDTensorGetPartition - the tensor's partition (borrowed: do not destroy it)
  subroutine DDTensorGetPartition(t, part, ierr)
    type(tDDTensor), intent(in) :: t
    type(tDDPartition), intent(inout) :: part
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_get_partition(t%v, part%v)
  end subroutine DDTensorGetPartition

  ! DDTensorGetCorners - global start (0-based) and size of this rank's piece, C order, like DMDAGetCorners()
  subroutine DDTensorGetCorners(t, start, n, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(out) :: start(:), n(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: s(DD_MAX_DIM), m(DD_MAX_DIM)
    ierr = ddnn_tensor_get_corners(t%v, int(min(size(start), size(n)), c_int64_t), s, m)
    if (ierr /= 0) return
    start = int(s(1:size(start)), kind(start))
    n = int(m(1:size(n)), kind(n))
  end subroutine DDTensorGetCorners

  ! DDTensorGetHalo - this rank's halo widths
  subroutine DDTensorGetHalo(t, lo, hi, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(out) :: lo(:), hi(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: l(DD_MAX_DIM), h(DD_MAX_DIM)
    ierr = ddnn_tensor_get_halo(t%v, int(min(size(lo), size(hi)), c_int64_t), l, h)
    if (ierr /= 0) return
    lo = int(l(1:size(lo)), kind(lo))
    hi = int(h(1:size(hi)), kind(hi))
  end subroutine DDTensorGetHalo

  ! DDTensorGetOwnershipRanges - the P+1 offsets of the pieces along dimension dim (0-based): ranges(1:P+1)
  subroutine DDTensorGetOwnershipRanges(t, dim, ranges, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(in) :: dim
    PetscInt, intent(out) :: ranges(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: r(max(size(ranges), 1)), n
    ierr = ddnn_tensor_get_ownership_ranges(t%v, int(dim, c_int64_t), size(ranges, kind=c_int64_t), r, n)
    if (ierr == 0) ranges(1:n) = int(r(1:n), kind(ranges))
  end subroutine DDTensorGetOwnershipRanges

  ! DDTensorIsActive - whether this rank holds a piece
  subroutine DDTensorIsActive(t, flg, ierr)
    type(tDDTensor), intent(in) :: t
    PetscBool, intent(out) :: flg
    PetscErrorCode, intent(out) :: ierr
    integer(c_int) :: i
    ierr = ddnn_tensor_is_active(t%v, i)
    flg = i /= 0
  end subroutine DDTensorIsActive

  ! DDTensorZeroEntries - t = 0
  subroutine DDTensorZeroEntries(t, ierr)
    type(tDDTensor), intent(in) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_zero_entries(t%v)
  end subroutine DDTensorZeroEntries

  ! DDTensorSet - t = alpha
  subroutine DDTensorSet(t, alpha, ierr)
    type(tDDTensor), intent(in) :: t
    PetscReal, intent(in) :: alpha
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set(t%v, real(alpha, c_double))
  end subroutine DDTensorSet

  ! DDTensorScale - t = alpha t
  subroutine DDTensorScale(t, alpha, ierr)
    type(tDDTensor), intent(in) :: t
    PetscReal, intent(in) :: alpha
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_scale(t%v, real(alpha, c_double))
  end subroutine DDTensorScale

  ! DDTensorCopy - y = x
  subroutine DDTensorCopy(x, y, ierr)
    type(tDDTensor), intent(in) :: x, y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_copy(x%v, y%v)
  end subroutine DDTensorCopy

  ! DDTensorAXPY - y = y + alpha x
  subroutine DDTensorAXPY(y, alpha, x, ierr)
    type(tDDTensor), intent(in) :: y, x
    PetscReal, intent(in) :: alpha
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_axpy(y%v, real(alpha, c_double), x%v)
  end subroutine DDTensorAXPY

  ! DDTensorAXPBY - y = alpha x + beta y
  subroutine DDTensorAXPBY(y, alpha, beta, x, ierr)
    type(tDDTensor), intent(in) :: y, x
    PetscReal, intent(in) :: alpha, beta
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_axpby(y%v, real(alpha, c_double), real(beta, c_double), x%v)
  end subroutine DDTensorAXPBY

  ! DDTensorDot - the inner product of x and y
  subroutine DDTensorDot(x, y, dot, ierr)
    type(tDDTensor), intent(in) :: x, y
    PetscReal, intent(out) :: dot
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: d
    ierr = ddnn_tensor_dot(x%v, y%v, d)
    dot = d
  end subroutine DDTensorDot

  ! DDTensorNorm - a norm of t: NORM_1, NORM_2, NORM_FROBENIUS or NORM_INFINITY
  subroutine DDTensorNorm(t, ntype, nrm, ierr)
    type(tDDTensor), intent(in) :: t
    NormType, intent(in) :: ntype
    PetscReal, intent(out) :: nrm
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: r
    ierr = ddnn_tensor_norm(t%v, int(ntype, c_int), r)
    nrm = r
  end subroutine DDTensorNorm

  ! DDTensorSum - the sum of the entries
  subroutine DDTensorSum(t, s, ierr)
    type(tDDTensor), intent(in) :: t
    PetscReal, intent(out) :: s
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: r
    ierr = ddnn_tensor_sum(t%v, r)
    s = r
  end subroutine DDTensorSum

  ! DDTensorMaxAbsDiff - max |x - y|
  subroutine DDTensorMaxAbsDiff(x, y, diff, ierr)
    type(tDDTensor), intent(in) :: x, y
    PetscReal, intent(out) :: diff
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: r
    ierr = ddnn_tensor_max_abs_diff(x%v, y%v, r)
    diff = r
  end subroutine DDTensorMaxAbsDiff

  ! DDTensorSetRandomGlobal - uniform values in [lo, hi), the same global tensor on any partition for a seed
  subroutine DDTensorSetRandomGlobal(t, seed, lo, hi, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt64, intent(in) :: seed
    PetscReal, intent(in) :: lo, hi
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_random_global(t%v, int(seed, c_int64_t), real(lo, c_double), real(hi, c_double))
  end subroutine DDTensorSetRandomGlobal

  ! DDTensorSetValuesGlobal - the piece from the whole tensor (C order) that every rank holds; real(4) for float32
  subroutine DDTensorSetValuesGlobal4(t, values, ierr)
    type(tDDTensor), intent(in) :: t
    real(c_float), intent(in) :: values(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_values_global(t%v, int(DD_FLOAT32, c_int), values, size(values, kind=c_int64_t))
  end subroutine DDTensorSetValuesGlobal4

  ! DDTensorSetValuesGlobal - real(8) values for a float64 tensor
  subroutine DDTensorSetValuesGlobal8(t, values, ierr)
    type(tDDTensor), intent(in) :: t
    real(c_double), intent(in) :: values(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_values_global(t%v, int(DD_FLOAT64, c_int), values, size(values, kind=c_int64_t))
  end subroutine DDTensorSetValuesGlobal8

  ! DDTensorScatterFromRoot - the pieces from the whole tensor (C order) on rank root (elsewhere values may be empty)
  subroutine DDTensorScatterFromRoot4(t, root, values, ierr)
    type(tDDTensor), intent(in) :: t
    PetscMPIInt, intent(in) :: root
    real(c_float), intent(in) :: values(:)
    PetscErrorCode, intent(out) :: ierr
    real(c_float) :: dummy(1)
    if (size(values) > 0) then
      ierr = ddnn_tensor_scatter_from_root(t%v, int(root, c_int), int(DD_FLOAT32, c_int), values, size(values, kind=c_int64_t))
    else
      ierr = ddnn_tensor_scatter_from_root(t%v, int(root, c_int), int(DD_FLOAT32, c_int), dummy, 0_c_int64_t)
    end if
  end subroutine DDTensorScatterFromRoot4

  ! DDTensorScatterFromRoot - real(8) values for a float64 tensor
  subroutine DDTensorScatterFromRoot8(t, root, values, ierr)
    type(tDDTensor), intent(in) :: t
    PetscMPIInt, intent(in) :: root
    real(c_double), intent(in) :: values(:)
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: dummy(1)
    if (size(values) > 0) then
      ierr = ddnn_tensor_scatter_from_root(t%v, int(root, c_int), int(DD_FLOAT64, c_int), values, size(values, kind=c_int64_t))
    else
      ierr = ddnn_tensor_scatter_from_root(t%v, int(root, c_int), int(DD_FLOAT64, c_int), dummy, 0_c_int64_t)
    end if
  end subroutine DDTensorScatterFromRoot8

  ! DDTensorGatherToRoot - the whole tensor (C order) into values on rank root (elsewhere values may be empty)
  subroutine DDTensorGatherToRoot4(t, root, values, ierr)
    type(tDDTensor), intent(in) :: t
    PetscMPIInt, intent(in) :: root
    real(c_float), intent(inout) :: values(:)
    PetscErrorCode, intent(out) :: ierr
    real(c_float) :: dummy(1)
    if (size(values) > 0) then
      ierr = ddnn_tensor_gather_to_root(t%v, int(root, c_int), int(DD_FLOAT32, c_int), values, size(values, kind=c_int64_t))
    else
      ierr = ddnn_tensor_gather_to_root(t%v, int(root, c_int), int(DD_FLOAT32, c_int), dummy, 0_c_int64_t)
    end if
  end subroutine DDTensorGatherToRoot4

  ! DDTensorGatherToRoot - real(8) values of a float64 tensor
  subroutine DDTensorGatherToRoot8(t, root, values, ierr)
    type(tDDTensor), intent(in) :: t
    PetscMPIInt, intent(in) :: root
    real(c_double), intent(inout) :: values(:)
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: dummy(1)
    if (size(values) > 0) then
      ierr = ddnn_tensor_gather_to_root(t%v, int(root, c_int), int(DD_FLOAT64, c_int), values, size(values, kind=c_int64_t))
    else
      ierr = ddnn_tensor_gather_to_root(t%v, int(root, c_int), int(DD_FLOAT64, c_int), dummy, 0_c_int64_t)
    end if
  end subroutine DDTensorGatherToRoot8

  ! DDTensorPlaceVec - the tensor uses the Vec's local array as its storage, without a copy
  subroutine DDTensorPlaceVec(t, x, ierr)
    type(tDDTensor), intent(in) :: t
    Vec, intent(in) :: x
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_place_vec(t%v, int(x%v, c_intptr_t))
  end subroutine DDTensorPlaceVec

  ! DDTensorResetVec - ends DDTensorPlaceVec()
  subroutine DDTensorResetVec(t, x, ierr)
    type(tDDTensor), intent(in) :: t
    Vec, intent(in) :: x
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_reset_vec(t%v, int(x%v, c_intptr_t))
  end subroutine DDTensorResetVec

  ! DDTensorCopyFromVec - t = x (any format and data type)
  subroutine DDTensorCopyFromVec(t, x, ierr)
    type(tDDTensor), intent(in) :: t
    Vec, intent(in) :: x
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_copy_from_vec(t%v, int(x%v, c_intptr_t))
  end subroutine DDTensorCopyFromVec

  ! DDTensorCopyToVec - x = t
  subroutine DDTensorCopyToVec(t, x, ierr)
    type(tDDTensor), intent(in) :: t
    Vec, intent(in) :: x
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_copy_to_vec(t%v, int(x%v, c_intptr_t))
  end subroutine DDTensorCopyToVec

  ! DDTensorCreateVec - a Vec sharing the tensor's storage (destroy it with VecDestroy())
  subroutine DDTensorCreateVec(t, x, ierr)
    type(tDDTensor), intent(in) :: t
    Vec, intent(inout) :: x
    PetscErrorCode, intent(out) :: ierr
    integer(c_intptr_t) :: h
    ierr = ddnn_tensor_create_vec(t%v, h)
    if (ierr == 0) x%v = h
  end subroutine DDTensorCreateVec

  ! DDTensorWriteHDF5 - writes the tensor to a dataset of an HDF5 file (collective, parallel HDF5)
  subroutine DDTensorWriteHDF5(t, file, dset, append, ierr)
    type(tDDTensor), intent(in) :: t
    character(len=*), intent(in) :: file, dset
    PetscBool, intent(in) :: append
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_write_hdf5(t%v, file, slen(file), dset, slen(dset), cbool(append))
  end subroutine DDTensorWriteHDF5

  ! DDTensorReadHDF5 - reads the tensor from a dataset of an HDF5 file
  subroutine DDTensorReadHDF5(t, file, dset, ierr)
    type(tDDTensor), intent(in) :: t
    character(len=*), intent(in) :: file, dset
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_read_hdf5(t%v, file, slen(file), dset, slen(dset))
  end subroutine DDTensorReadHDF5

  ! DDTensorView - prints the tensor
  subroutine DDTensorView(t, viewer, ierr)
    type(tDDTensor), intent(in) :: t
    PetscViewer, intent(in) :: viewer
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_view(t%v, int(viewer%v, c_intptr_t))
  end subroutine DDTensorView

  ! DDTensorDestroy - destroys the tensor; t becomes null
  subroutine DDTensorDestroy(t, ierr)
    type(tDDTensor), intent(inout) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_destroy(t%v)
  end subroutine DDTensorDestroy

  ! DDTensorCreateBroadcast - the output tensor of a broadcast of x onto part
  subroutine DDTensorCreateBroadcast(x, part, y, ierr)
    type(tDDTensor), intent(in) :: x
    type(tDDPartition), intent(in) :: part
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_create_broadcast(x%v, part%v, y%v)
  end subroutine DDTensorCreateBroadcast

  ! DDTensorCreateSumReduce - the output tensor of a sum-reduction of x onto part
  subroutine DDTensorCreateSumReduce(x, part, y, ierr)
    type(tDDTensor), intent(in) :: x
    type(tDDPartition), intent(in) :: part
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_create_sum_reduce(x%v, part%v, y%v)
  end subroutine DDTensorCreateSumReduce

  ! DDTensorCreateRepartition - the output tensor of a repartition of x onto part
  subroutine DDTensorCreateRepartition(x, part, y, ierr)
    type(tDDTensor), intent(in) :: x
    type(tDDPartition), intent(in) :: part
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_create_repartition(x%v, part%v, y%v)
  end subroutine DDTensorCreateRepartition

  ! ==========================================================================================
  ! DDPrimitive

  ! DDPrimitiveCreate - creates a data-movement primitive on comm
  subroutine DDPrimitiveCreate(comm, p, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDPrimitive), intent(inout) :: p
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_create(int(comm, c_int), p%v)
  end subroutine DDPrimitiveCreate

  ! DDPrimitiveSetType - DDPRIMITIVEHALO, DDPRIMITIVEBROADCAST, ...
  subroutine DDPrimitiveSetType(p, ptype, ierr)
    type(tDDPrimitive), intent(in) :: p
    character(len=*), intent(in) :: ptype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_set_type(p%v, ptype, slen(ptype))
  end subroutine DDPrimitiveSetType

  ! DDPrimitiveGetType - the primitive's type name (blank when unset)
  subroutine DDPrimitiveGetType(p, ptype, ierr)
    type(tDDPrimitive), intent(in) :: p
    character(len=*), intent(out) :: ptype
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char) :: buf(256)
    ierr = ddnn_primitive_get_type(p%v, buf, size(buf, kind=c_int64_t))
    call FromCString(buf, ptype)
  end subroutine DDPrimitiveGetType

  ! DDPrimitiveSetOptionsPrefix - the prefix of the primitive's options
  subroutine DDPrimitiveSetOptionsPrefix(p, prefix, ierr)
    type(tDDPrimitive), intent(in) :: p
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_set_options_prefix(p%v, prefix, slen(prefix))
  end subroutine DDPrimitiveSetOptionsPrefix

  ! DDPrimitiveSetFromOptions - configures the primitive from the options database
  subroutine DDPrimitiveSetFromOptions(p, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_set_from_options(p%v)
  end subroutine DDPrimitiveSetFromOptions

  ! DDPrimitiveSetUp - builds the communication between x's and y's layouts (y = DD_NULL_TENSOR: in-place halo)
  subroutine DDPrimitiveSetUp(p, x, y, ierr)
    type(tDDPrimitive), intent(in) :: p
    type(tDDTensor), intent(in) :: x, y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_set_up(p%v, x%v, y%v)
  end subroutine DDPrimitiveSetUp

  ! DDPrimitiveApply - y = F x
  subroutine DDPrimitiveApply(p, x, y, ierr)
    type(tDDPrimitive), intent(in) :: p
    type(tDDTensor), intent(in) :: x, y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_apply(p%v, x%v, y%v)
  end subroutine DDPrimitiveApply

  ! DDPrimitiveApplyAdjoint - x = F* y
  subroutine DDPrimitiveApplyAdjoint(p, y, x, ierr)
    type(tDDPrimitive), intent(in) :: p
    type(tDDTensor), intent(in) :: y, x
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_apply_adjoint(p%v, y%v, x%v)
  end subroutine DDPrimitiveApplyAdjoint

  ! DDPrimitiveAdjointTest - |<F x, y> - <x, F* y>| relative, for random x, y (work tensors or DD_NULL_TENSOR)
  subroutine DDPrimitiveAdjointTest(p, x, y, seed, err, ierr)
    type(tDDPrimitive), intent(in) :: p
    type(tDDTensor), intent(in) :: x, y
    PetscInt64, intent(in) :: seed
    PetscReal, intent(out) :: err
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: e
    ierr = ddnn_primitive_adjoint_test(p%v, x%v, y%v, int(seed, c_int64_t), e)
    err = e
  end subroutine DDPrimitiveAdjointTest

  ! DDPrimitiveHaloSetKernel - the halo a kernel (size k, stride s, dilation d, padding pad) needs along dim; nout outputs
  subroutine DDPrimitiveHaloSetKernel(p, dim, k, s, d, pad, nout, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscInt, intent(in) :: dim, k, s, d, pad, nout
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_halo_set_kernel(p%v, int(dim, c_int64_t), int(k, c_int64_t), int(s, c_int64_t), &
                                          int(d, c_int64_t), int(pad, c_int64_t), int(nout, c_int64_t))
  end subroutine DDPrimitiveHaloSetKernel

  ! DDPrimitiveHaloSetPadding - how entries outside the tensor are filled along dim (DD_PADDING_ZEROS, ...)
  subroutine DDPrimitiveHaloSetPadding(p, dim, mode, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscInt, intent(in) :: dim
    PetscEnum, intent(in) :: mode
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_halo_set_padding(p%v, int(dim, c_int64_t), int(mode, c_int))
  end subroutine DDPrimitiveHaloSetPadding

  ! DDPrimitiveHaloSetPadValue - the constant of DD_PADDING_ZEROS
  subroutine DDPrimitiveHaloSetPadValue(p, value, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscReal, intent(in) :: value
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_halo_set_pad_value(p%v, real(value, c_double))
  end subroutine DDPrimitiveHaloSetPadValue

  ! DDPrimitiveHaloSetWindow - this rank's input window [a, b) along dim, directly
  subroutine DDPrimitiveHaloSetWindow(p, dim, a, b, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscInt, intent(in) :: dim, a, b
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_halo_set_window(p%v, int(dim, c_int64_t), int(a, c_int64_t), int(b, c_int64_t))
  end subroutine DDPrimitiveHaloSetWindow

  ! DDPrimitiveAllSumReduceSetDimensions - the partition dimensions an allsumreduce sums over
  subroutine DDPrimitiveAllSumReduceSetDimensionsA(p, n, dims, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscInt, intent(in) :: n, dims(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: b(max(size(dims), 1))
    b(1:size(dims)) = dims
    ierr = ddnn_primitive_allsumreduce_set_dimensions(p%v, int(n, c_int64_t), b)
  end subroutine DDPrimitiveAllSumReduceSetDimensionsA

  ! DDPrimitiveAllSumReduceSetDimensions - a single dimension
  subroutine DDPrimitiveAllSumReduceSetDimensionsS(p, n, dim, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscInt, intent(in) :: n, dim
    PetscErrorCode, intent(out) :: ierr
    call DDPrimitiveAllSumReduceSetDimensionsA(p, n, [dim], ierr)
  end subroutine DDPrimitiveAllSumReduceSetDimensionsS

  ! DDPrimitiveView - prints the primitive
  subroutine DDPrimitiveView(p, viewer, ierr)
    type(tDDPrimitive), intent(in) :: p
    PetscViewer, intent(in) :: viewer
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_view(p%v, int(viewer%v, c_intptr_t))
  end subroutine DDPrimitiveView

  ! DDPrimitiveDestroy - destroys the primitive; p becomes null
  subroutine DDPrimitiveDestroy(p, ierr)
    type(tDDPrimitive), intent(inout) :: p
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_primitive_destroy(p%v)
  end subroutine DDPrimitiveDestroy

  ! ==========================================================================================
  ! DDLayer

  ! DDLayerCreate - creates a layer on comm
  subroutine DDLayerCreate(comm, l, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDLayer), intent(inout) :: l
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_create(int(comm, c_int), l%v)
  end subroutine DDLayerCreate

  ! DDLayerSetType - DDLAYERCONV, DDLAYERPOOL, ...
  subroutine DDLayerSetType(l, ltype, ierr)
    type(tDDLayer), intent(in) :: l
    character(len=*), intent(in) :: ltype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_type(l%v, ltype, slen(ltype))
  end subroutine DDLayerSetType

  ! DDLayerGetType - the layer's type name (blank when unset)
  subroutine DDLayerGetType(l, ltype, ierr)
    type(tDDLayer), intent(in) :: l
    character(len=*), intent(out) :: ltype
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char) :: buf(256)
    ierr = ddnn_layer_get_type(l%v, buf, size(buf, kind=c_int64_t))
    call FromCString(buf, ltype)
  end subroutine DDLayerGetType

  ! DDLayerSetOptionsPrefix - the prefix of the layer's options ('enc1_' for -enc1_layer_conv_kernel)
  subroutine DDLayerSetOptionsPrefix(l, prefix, ierr)
    type(tDDLayer), intent(in) :: l
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_options_prefix(l%v, prefix, slen(prefix))
  end subroutine DDLayerSetOptionsPrefix

  ! DDLayerAppendOptionsPrefix - appends to the prefix of the layer's options
  subroutine DDLayerAppendOptionsPrefix(l, prefix, ierr)
    type(tDDLayer), intent(in) :: l
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_append_options_prefix(l%v, prefix, slen(prefix))
  end subroutine DDLayerAppendOptionsPrefix

  ! DDLayerSetFromOptions - configures the layer from the options database
  subroutine DDLayerSetFromOptions(l, ierr)
    type(tDDLayer), intent(in) :: l
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_from_options(l%v)
  end subroutine DDLayerSetFromOptions

  ! DDLayerSetUp - sets the layer up for inputs laid out like x (halos, output layout, parameters)
  subroutine DDLayerSetUp(l, x, ierr)
    type(tDDLayer), intent(in) :: l
    type(tDDTensor), intent(in) :: x
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_up(l%v, x%v)
  end subroutine DDLayerSetUp

  ! DDLayerSetUpMulti - sets a layer of n inputs up
  subroutine DDLayerSetUpMulti(l, n, xs, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n
    type(tDDTensor), intent(in) :: xs(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_up_multi(l%v, int(n, c_int64_t), handles(xs, n))
  end subroutine DDLayerSetUpMulti

  ! DDLayerGetOutput - the layer's own output tensor (borrowed: do not destroy it)
  subroutine DDLayerGetOutput(l, y, ierr)
    type(tDDLayer), intent(in) :: l
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_get_output(l%v, y%v)
  end subroutine DDLayerGetOutput

  ! DDLayerCreateOutput - a new tensor laid out as the layer's output
  subroutine DDLayerCreateOutput(l, y, ierr)
    type(tDDLayer), intent(in) :: l
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_create_output(l%v, y%v)
  end subroutine DDLayerCreateOutput

  ! DDLayerForward - y = F(x)
  subroutine DDLayerForward(l, x, y, ierr)
    type(tDDLayer), intent(in) :: l
    type(tDDTensor), intent(in) :: x, y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_forward(l%v, x%v, y%v)
  end subroutine DDLayerForward

  ! DDLayerForwardMulti - y = F(x_1, ..., x_n)
  subroutine DDLayerForwardMulti(l, n, xs, y, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n
    type(tDDTensor), intent(in) :: xs(:), y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_forward_multi(l%v, int(n, c_int64_t), handles(xs, n), y%v)
  end subroutine DDLayerForwardMulti

  ! DDLayerBackward - dx = J^* dy at the last forward state; parameter gradients accumulate
  subroutine DDLayerBackward(l, dy, dx, ierr)
    type(tDDLayer), intent(in) :: l
    type(tDDTensor), intent(in) :: dy, dx
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_backward(l%v, dy%v, dx%v)
  end subroutine DDLayerBackward

  ! DDLayerBackwardMulti - dx_i = J_i^* dy (entries may be DD_NULL_TENSOR)
  subroutine DDLayerBackwardMulti(l, dy, n, dxs, ierr)
    type(tDDLayer), intent(in) :: l
    type(tDDTensor), intent(in) :: dy, dxs(:)
    PetscInt, intent(in) :: n
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_backward_multi(l%v, dy%v, int(n, c_int64_t), handles(dxs, n))
  end subroutine DDLayerBackwardMulti

  ! DDLayerGetParameters - the layer's n parameter tensors (borrowed) into params(1:n)
  subroutine DDLayerGetParametersA(l, n, params, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(out) :: n
    type(tDDTensor), intent(inout) :: params(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_intptr_t) :: p(max(size(params), 1)), g(max(size(params), 1))
    integer(c_int64_t) :: m
    ierr = ddnn_layer_get_parameters(l%v, size(params, kind=c_int64_t), p, g, m)
    if (ierr /= 0) return
    n = int(m, kind(n))
    params(1:n)%v = p(1:n)
  end subroutine DDLayerGetParametersA

  ! DDLayerGetParameters - short form: the number n of parameter tensors only
  subroutine DDLayerGetParametersN(l, n, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_intptr_t) :: p(1), g(1)
    integer(c_int64_t) :: m
    ierr = ddnn_layer_get_parameters(l%v, 0_c_int64_t, p, g, m)
    n = int(m, kind(n))
  end subroutine DDLayerGetParametersN

  ! DDLayerGetGradients - the gradients of the layer's parameters (borrowed) into grads(1:n)
  subroutine DDLayerGetGradientsA(l, n, grads, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(out) :: n
    type(tDDTensor), intent(inout) :: grads(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_intptr_t) :: p(max(size(grads), 1)), g(max(size(grads), 1))
    integer(c_int64_t) :: m
    ierr = ddnn_layer_get_parameters(l%v, size(grads, kind=c_int64_t), p, g, m)
    if (ierr /= 0) return
    n = int(m, kind(n))
    grads(1:n)%v = g(1:n)
  end subroutine DDLayerGetGradientsA

  ! DDLayerGetGradients - short form: the number n of gradient tensors only
  subroutine DDLayerGetGradientsN(l, n, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    call DDLayerGetParametersN(l, n, ierr)
  end subroutine DDLayerGetGradientsN

  ! DDLayerGetNumParameters - the global number of scalar parameters
  subroutine DDLayerGetNumParameters(l, count, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt64, intent(out) :: count
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: c
    ierr = ddnn_layer_get_num_parameters(l%v, c)
    count = c
  end subroutine DDLayerGetNumParameters

  ! DDLayerZeroGradients - sets the parameters' gradients to zero
  subroutine DDLayerZeroGradients(l, ierr)
    type(tDDLayer), intent(in) :: l
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_zero_gradients(l%v)
  end subroutine DDLayerZeroGradients

  ! DDLayerInitializeParameters - draws the parameters, identically on any partition for a seed
  subroutine DDLayerInitializeParameters(l, seed, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt64, intent(in) :: seed
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_initialize_parameters(l%v, int(seed, c_int64_t))
  end subroutine DDLayerInitializeParameters

  ! DDLayerSetInitType - how the parameters are drawn (DD_INIT_DEFAULT, DD_INIT_ZEROS, ...)
  subroutine DDLayerSetInitType(l, itype, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: itype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_init_type(l%v, int(itype, c_int))
  end subroutine DDLayerSetInitType

  ! DDLayerSetInitScale - the scale of DD_INIT_UNIFORM
  subroutine DDLayerSetInitScale(l, scale, ierr)
    type(tDDLayer), intent(in) :: l
    PetscReal, intent(in) :: scale
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_init_scale(l%v, real(scale, c_double))
  end subroutine DDLayerSetInitScale

  ! DDLayerSetTraining - training or evaluation mode
  subroutine DDLayerSetTraining(l, flg, ierr)
    type(tDDLayer), intent(in) :: l
    PetscBool, intent(in) :: flg
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_set_training(l%v, cbool(flg))
  end subroutine DDLayerSetTraining

  ! DDLayerAdjointTest - checks Backward against Forward on the layer's linear part
  subroutine DDLayerAdjointTest(l, wrtparams, seed, err, ierr)
    type(tDDLayer), intent(in) :: l
    PetscBool, intent(in) :: wrtparams
    PetscInt64, intent(in) :: seed
    PetscReal, intent(out) :: err
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: e
    ierr = ddnn_layer_adjoint_test(l%v, cbool(wrtparams), int(seed, c_int64_t), e)
    err = e
  end subroutine DDLayerAdjointTest

  ! DDLayerView - prints the layer
  subroutine DDLayerView(l, viewer, ierr)
    type(tDDLayer), intent(in) :: l
    PetscViewer, intent(in) :: viewer
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_view(l%v, int(viewer%v, c_intptr_t))
  end subroutine DDLayerView

  ! DDLayerDestroy - destroys the layer; l becomes null
  subroutine DDLayerDestroy(l, ierr)
    type(tDDLayer), intent(inout) :: l
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_destroy(l%v)
  end subroutine DDLayerDestroy

  ! DDLayerConvSetOutputChannels - the number of output channels of a convolution
  subroutine DDLayerConvSetOutputChannels(l, co, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: co
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_conv_set_output_channels(l%v, int(co, c_int64_t))
  end subroutine DDLayerConvSetOutputChannels

  ! DDLayerConvSetKernel - kernel sizes (n = 1: the same along every spatial dimension)
  subroutine DDLayerConvSetKernelA(l, n, k, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, k(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_kernel, l, n, k, ierr)
  end subroutine DDLayerConvSetKernelA
  subroutine DDLayerConvSetKernelS(l, n, k, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, k
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_kernel, l, n, [k], ierr)
  end subroutine DDLayerConvSetKernelS

  ! DDLayerConvSetStride - strides
  subroutine DDLayerConvSetStrideA(l, n, s, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, s(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_stride, l, n, s, ierr)
  end subroutine DDLayerConvSetStrideA
  subroutine DDLayerConvSetStrideS(l, n, s, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, s
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_stride, l, n, [s], ierr)
  end subroutine DDLayerConvSetStrideS

  ! DDLayerConvSetPadding - padding widths
  subroutine DDLayerConvSetPaddingA(l, n, p, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, p(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_padding, l, n, p, ierr)
  end subroutine DDLayerConvSetPaddingA
  subroutine DDLayerConvSetPaddingS(l, n, p, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, p
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_padding, l, n, [p], ierr)
  end subroutine DDLayerConvSetPaddingS

  ! DDLayerConvSetDilation - dilations
  subroutine DDLayerConvSetDilationA(l, n, d, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, d(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_dilation, l, n, d, ierr)
  end subroutine DDLayerConvSetDilationA
  subroutine DDLayerConvSetDilationS(l, n, d, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, d
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_conv_set_dilation, l, n, [d], ierr)
  end subroutine DDLayerConvSetDilationS

  ! DDLayerConvSetBias - whether the convolution has a bias
  subroutine DDLayerConvSetBias(l, flg, ierr)
    type(tDDLayer), intent(in) :: l
    PetscBool, intent(in) :: flg
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_conv_set_bias(l%v, cbool(flg))
  end subroutine DDLayerConvSetBias

  ! DDLayerConvSetPaddingMode - DD_PADDING_ZEROS, _REFLECT, _REPLICATE or _CIRCULAR
  subroutine DDLayerConvSetPaddingMode(l, mode, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: mode
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_conv_set_padding_mode(l%v, int(mode, c_int))
  end subroutine DDLayerConvSetPaddingMode

  ! DDLayerPoolSetType - DD_POOL_MAX or DD_POOL_AVG
  subroutine DDLayerPoolSetType(l, ptype, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: ptype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_pool_set_type(l%v, int(ptype, c_int))
  end subroutine DDLayerPoolSetType

  ! DDLayerPoolSetKernel - pooling window sizes
  subroutine DDLayerPoolSetKernelA(l, n, k, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, k(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_pool_set_kernel, l, n, k, ierr)
  end subroutine DDLayerPoolSetKernelA
  subroutine DDLayerPoolSetKernelS(l, n, k, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, k
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_pool_set_kernel, l, n, [k], ierr)
  end subroutine DDLayerPoolSetKernelS

  ! DDLayerPoolSetStride - pooling strides (default: the kernel)
  subroutine DDLayerPoolSetStrideA(l, n, s, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, s(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_pool_set_stride, l, n, s, ierr)
  end subroutine DDLayerPoolSetStrideA
  subroutine DDLayerPoolSetStrideS(l, n, s, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, s
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_pool_set_stride, l, n, [s], ierr)
  end subroutine DDLayerPoolSetStrideS

  ! DDLayerPoolSetPadding - pooling padding
  subroutine DDLayerPoolSetPaddingA(l, n, p, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, p(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_pool_set_padding, l, n, p, ierr)
  end subroutine DDLayerPoolSetPaddingA
  subroutine DDLayerPoolSetPaddingS(l, n, p, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, p
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_pool_set_padding, l, n, [p], ierr)
  end subroutine DDLayerPoolSetPaddingS

  ! DDLayerAffineSetOutputFeatures - the number of output features of a dense layer
  subroutine DDLayerAffineSetOutputFeatures(l, n, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_affine_set_output_features(l%v, int(n, c_int64_t))
  end subroutine DDLayerAffineSetOutputFeatures

  ! DDLayerAffineSetBias - whether the dense layer has a bias
  subroutine DDLayerAffineSetBias(l, flg, ierr)
    type(tDDLayer), intent(in) :: l
    PetscBool, intent(in) :: flg
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_affine_set_bias(l%v, cbool(flg))
  end subroutine DDLayerAffineSetBias

  ! DDLayerActivationSetType - DD_ACT_RELU, DD_ACT_TANH, ...
  subroutine DDLayerActivationSetType(l, atype, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: atype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_activation_set_type(l%v, int(atype, c_int))
  end subroutine DDLayerActivationSetType

  ! DDLayerActivationSetNegativeSlope - the slope of DD_ACT_LEAKYRELU
  subroutine DDLayerActivationSetNegativeSlope(l, slope, ierr)
    type(tDDLayer), intent(in) :: l
    PetscReal, intent(in) :: slope
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_activation_set_negative_slope(l%v, real(slope, c_double))
  end subroutine DDLayerActivationSetNegativeSlope

  ! DDLayerUpsampleSetMode - DD_UPSAMPLE_NEAREST or DD_UPSAMPLE_LINEAR
  subroutine DDLayerUpsampleSetMode(l, mode, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: mode
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_upsample_set_mode(l%v, int(mode, c_int))
  end subroutine DDLayerUpsampleSetMode

  ! DDLayerUpsampleSetScale - integer scale factors
  subroutine DDLayerUpsampleSetScaleA(l, n, s, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, s(:)
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_upsample_set_scale, l, n, s, ierr)
  end subroutine DDLayerUpsampleSetScaleA
  subroutine DDLayerUpsampleSetScaleS(l, n, s, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: n, s
    PetscErrorCode, intent(out) :: ierr
    call LayerInts(ddnn_layer_upsample_set_scale, l, n, [s], ierr)
  end subroutine DDLayerUpsampleSetScaleS

  ! DDLayerConcatSetDimension - the dimension a concat layer joins along (default 1, channels)
  subroutine DDLayerConcatSetDimension(l, dim, ierr)
    type(tDDLayer), intent(in) :: l
    PetscInt, intent(in) :: dim
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_concat_set_dimension(l%v, int(dim, c_int64_t))
  end subroutine DDLayerConcatSetDimension

  ! DDLayerLossSetType - DD_LOSS_MSE, DD_LOSS_L1 or DD_LOSS_CROSSENTROPY
  subroutine DDLayerLossSetType(l, ltype, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: ltype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_loss_set_type(l%v, int(ltype, c_int))
  end subroutine DDLayerLossSetType

  ! DDLayerLossSetReduction - DD_REDUCTION_MEAN or DD_REDUCTION_SUM
  subroutine DDLayerLossSetReduction(l, red, ierr)
    type(tDDLayer), intent(in) :: l
    PetscEnum, intent(in) :: red
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_layer_loss_set_reduction(l%v, int(red, c_int))
  end subroutine DDLayerLossSetReduction

  ! DDLayerLossGetValue - the loss of the last forward
  subroutine DDLayerLossGetValue(l, value, ierr)
    type(tDDLayer), intent(in) :: l
    PetscReal, intent(out) :: value
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: v
    ierr = ddnn_layer_loss_get_value(l%v, v)
    value = v
  end subroutine DDLayerLossGetValue

  ! ==========================================================================================
  ! DDNet

  ! DDNetCreate - creates a network on comm
  subroutine DDNetCreate(comm, net, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDNet), intent(inout) :: net
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_create(int(comm, c_int), net%v)
  end subroutine DDNetCreate

  ! DDNetSetOptionsPrefix - the prefix of the network's options (and of its layers')
  subroutine DDNetSetOptionsPrefix(net, prefix, ierr)
    type(tDDNet), intent(in) :: net
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_set_options_prefix(net%v, prefix, slen(prefix))
  end subroutine DDNetSetOptionsPrefix

  ! DDNetSetInputNames - the names of the network's n inputs
  subroutine DDNetSetInputNames(net, n, names, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt, intent(in) :: n
    character(len=*), intent(in) :: names(:)
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char), allocatable, target :: chars(:, :)
    type(c_ptr), allocatable :: ptrs(:)
    call ToCStrings(names, int(n), chars, ptrs)
    ierr = ddnn_net_set_input_names(net%v, int(n, c_int64_t), ptrs)
  end subroutine DDNetSetInputNames

  ! DDNetAddLayer - adds a layer named name taking the n named inputs
  subroutine DDNetAddLayerInputs(net, l, name, n, inputs, ierr)
    type(tDDNet), intent(in) :: net
    type(tDDLayer), intent(in) :: l
    character(len=*), intent(in) :: name
    PetscInt, intent(in) :: n
    character(len=*), intent(in) :: inputs(:)
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char), allocatable, target :: chars(:, :)
    type(c_ptr), allocatable :: ptrs(:)
    call ToCStrings(inputs, int(n), chars, ptrs)
    ierr = ddnn_net_add_layer(net%v, l%v, name, slen(name), int(n, c_int64_t), ptrs)
  end subroutine DDNetAddLayerInputs

  ! DDNetAddLayer - short form: the layer takes the previous layer's output (n = 0 in C)
  subroutine DDNetAddLayerChained(net, l, name, ierr)
    type(tDDNet), intent(in) :: net
    type(tDDLayer), intent(in) :: l
    character(len=*), intent(in) :: name
    PetscErrorCode, intent(out) :: ierr
    type(c_ptr) :: ptrs(1)
    ptrs = c_null_ptr
    ierr = ddnn_net_add_layer(net%v, l%v, name, slen(name), 0_c_int64_t, ptrs)
  end subroutine DDNetAddLayerChained

  ! DDNetSetOutput - the layer whose output is the network's output
  subroutine DDNetSetOutput(net, name, ierr)
    type(tDDNet), intent(in) :: net
    character(len=*), intent(in) :: name
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_set_output(net%v, name, slen(name))
  end subroutine DDNetSetOutput

  ! DDNetSetFromOptions - builds the network from the options database (-net_inputs, -net_layers, ...)
  subroutine DDNetSetFromOptions(net, ierr)
    type(tDDNet), intent(in) :: net
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_set_from_options(net%v)
  end subroutine DDNetSetFromOptions

  ! DDNetSetUp - sets every layer up for inputs laid out like xs(1:n)
  subroutine DDNetSetUp(net, n, xs, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt, intent(in) :: n
    type(tDDTensor), intent(in) :: xs(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_set_up(net%v, int(n, c_int64_t), handles(xs, n))
  end subroutine DDNetSetUp

  ! DDNetForward - evaluates the network on xs(1:n)
  subroutine DDNetForward(net, n, xs, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt, intent(in) :: n
    type(tDDTensor), intent(in) :: xs(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_forward(net%v, int(n, c_int64_t), handles(xs, n))
  end subroutine DDNetForward

  ! DDNetBackward - the backward sweep; dy = DD_NULL_TENSOR when the output layer is a loss
  subroutine DDNetBackward(net, dy, ierr)
    type(tDDNet), intent(in) :: net
    type(tDDTensor), intent(in) :: dy
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_backward(net%v, dy%v)
  end subroutine DDNetBackward

  ! DDNetGetOutput - the network's output tensor (borrowed)
  subroutine DDNetGetOutput(net, y, ierr)
    type(tDDNet), intent(in) :: net
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_get_output(net%v, y%v)
  end subroutine DDNetGetOutput

  ! DDNetGetLayer - the layer of the given name (borrowed)
  subroutine DDNetGetLayer(net, name, l, ierr)
    type(tDDNet), intent(in) :: net
    character(len=*), intent(in) :: name
    type(tDDLayer), intent(inout) :: l
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_get_layer(net%v, name, slen(name), l%v)
  end subroutine DDNetGetLayer

  ! DDNetGetNumLayers - the number of layers
  subroutine DDNetGetNumLayers(net, n, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: m
    ierr = ddnn_net_get_num_layers(net%v, m)
    n = int(m, kind(n))
  end subroutine DDNetGetNumLayers

  ! DDNetGetLayerOutput - the output tensor of the named layer (borrowed)
  subroutine DDNetGetLayerOutput(net, name, y, ierr)
    type(tDDNet), intent(in) :: net
    character(len=*), intent(in) :: name
    type(tDDTensor), intent(inout) :: y
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_get_layer_output(net%v, name, slen(name), y%v)
  end subroutine DDNetGetLayerOutput

  ! DDNetGetParameters - the n parameter tensors of every layer and their gradients (borrowed)
  subroutine DDNetGetParametersA(net, n, params, grads, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt, intent(out) :: n
    type(tDDTensor), intent(inout) :: params(:), grads(:)
    PetscErrorCode, intent(out) :: ierr
    integer(c_intptr_t) :: p(max(size(params), 1)), g(max(size(params), 1))
    integer(c_int64_t) :: m
    ierr = ddnn_net_get_parameters(net%v, int(min(size(params), size(grads)), c_int64_t), p, g, m)
    if (ierr /= 0) return
    n = int(m, kind(n))
    params(1:n)%v = p(1:n)
    grads(1:n)%v = g(1:n)
  end subroutine DDNetGetParametersA

  ! DDNetGetParameters - short form: the number n of parameter tensors only
  subroutine DDNetGetParametersN(net, n, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_intptr_t) :: p(1), g(1)
    integer(c_int64_t) :: m
    ierr = ddnn_net_get_parameters(net%v, 0_c_int64_t, p, g, m)
    n = int(m, kind(n))
  end subroutine DDNetGetParametersN

  ! DDNetGetNumParameters - the global number of scalar parameters
  subroutine DDNetGetNumParameters(net, count, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt64, intent(out) :: count
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: c
    ierr = ddnn_net_get_num_parameters(net%v, c)
    count = c
  end subroutine DDNetGetNumParameters

  ! DDNetZeroGradients - zeroes every parameter gradient
  subroutine DDNetZeroGradients(net, ierr)
    type(tDDNet), intent(in) :: net
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_zero_gradients(net%v)
  end subroutine DDNetZeroGradients

  ! DDNetInitializeParameters - initializes every layer's parameters from one seed
  subroutine DDNetInitializeParameters(net, seed, ierr)
    type(tDDNet), intent(in) :: net
    PetscInt64, intent(in) :: seed
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_initialize_parameters(net%v, int(seed, c_int64_t))
  end subroutine DDNetInitializeParameters

  ! DDNetSetTraining - training or evaluation mode of every layer
  subroutine DDNetSetTraining(net, flg, ierr)
    type(tDDNet), intent(in) :: net
    PetscBool, intent(in) :: flg
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_set_training(net%v, cbool(flg))
  end subroutine DDNetSetTraining

  ! DDNetGetLoss - the value of the output loss layer after DDNetForward()
  subroutine DDNetGetLoss(net, loss, ierr)
    type(tDDNet), intent(in) :: net
    PetscReal, intent(out) :: loss
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: v
    ierr = ddnn_net_get_loss(net%v, v)
    loss = v
  end subroutine DDNetGetLoss

  ! DDNetView - prints the network
  subroutine DDNetView(net, viewer, ierr)
    type(tDDNet), intent(in) :: net
    PetscViewer, intent(in) :: viewer
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_view(net%v, int(viewer%v, c_intptr_t))
  end subroutine DDNetView

  ! DDNetDestroy - destroys the network; net becomes null
  subroutine DDNetDestroy(net, ierr)
    type(tDDNet), intent(inout) :: net
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_net_destroy(net%v)
  end subroutine DDNetDestroy

  ! ==========================================================================================
  ! DDOptimizer

  ! DDOptimizerCreate - creates an optimizer on comm
  subroutine DDOptimizerCreate(comm, opt, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDOptimizer), intent(inout) :: opt
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_create(int(comm, c_int), opt%v)
  end subroutine DDOptimizerCreate

  ! DDOptimizerSetType - DDOPTIMIZERSGD, DDOPTIMIZERADAM or DDOPTIMIZERADAMW
  subroutine DDOptimizerSetType(opt, otype, ierr)
    type(tDDOptimizer), intent(in) :: opt
    character(len=*), intent(in) :: otype
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_type(opt%v, otype, slen(otype))
  end subroutine DDOptimizerSetType

  ! DDOptimizerSetOptionsPrefix - the prefix of the optimizer's options
  subroutine DDOptimizerSetOptionsPrefix(opt, prefix, ierr)
    type(tDDOptimizer), intent(in) :: opt
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_options_prefix(opt%v, prefix, slen(prefix))
  end subroutine DDOptimizerSetOptionsPrefix

  ! DDOptimizerSetFromOptions - configures the optimizer from the options database (-optimizer_type adam ...)
  subroutine DDOptimizerSetFromOptions(opt, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_from_options(opt%v)
  end subroutine DDOptimizerSetFromOptions

  ! DDOptimizerSetLearningRate - the (initial) learning rate
  subroutine DDOptimizerSetLearningRate(opt, lr, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscReal, intent(in) :: lr
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_learning_rate(opt%v, real(lr, c_double))
  end subroutine DDOptimizerSetLearningRate

  ! DDOptimizerGetLearningRate - the current learning rate
  subroutine DDOptimizerGetLearningRate(opt, lr, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscReal, intent(out) :: lr
    PetscErrorCode, intent(out) :: ierr
    real(c_double) :: v
    ierr = ddnn_optimizer_get_learning_rate(opt%v, v)
    lr = v
  end subroutine DDOptimizerGetLearningRate

  ! DDOptimizerSetMomentum - SGD momentum and Nesterov
  subroutine DDOptimizerSetMomentum(opt, m, nesterov, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscReal, intent(in) :: m
    PetscBool, intent(in) :: nesterov
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_momentum(opt%v, real(m, c_double), cbool(nesterov))
  end subroutine DDOptimizerSetMomentum

  ! DDOptimizerSetWeightDecay - weight decay
  subroutine DDOptimizerSetWeightDecay(opt, wd, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscReal, intent(in) :: wd
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_weight_decay(opt%v, real(wd, c_double))
  end subroutine DDOptimizerSetWeightDecay

  ! DDOptimizerSetClipNorm - clips the gradients' global norm
  subroutine DDOptimizerSetClipNorm(opt, clip, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscReal, intent(in) :: clip
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_clip_norm(opt%v, real(clip, c_double))
  end subroutine DDOptimizerSetClipNorm

  ! DDOptimizerSetUp - the n parameter tensors the optimizer updates and their gradients
  subroutine DDOptimizerSetUpArrays(opt, n, params, grads, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscInt, intent(in) :: n
    type(tDDTensor), intent(in) :: params(:), grads(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_up(opt%v, int(n, c_int64_t), handles(params, n), handles(grads, n))
  end subroutine DDOptimizerSetUpArrays

  ! DDOptimizerSetUp - short form: the parameters of a network (DDNetGetParameters())
  subroutine DDOptimizerSetUpNet(opt, net, ierr)
    type(tDDOptimizer), intent(in) :: opt
    type(tDDNet), intent(in) :: net
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_up_from_net(opt%v, net%v)
  end subroutine DDOptimizerSetUpNet

  ! DDOptimizerSetUp - short form: the parameters of a layer (DDLayerGetParameters())
  subroutine DDOptimizerSetUpLayer(opt, l, ierr)
    type(tDDOptimizer), intent(in) :: opt
    type(tDDLayer), intent(in) :: l
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_set_up_from_layer(opt%v, l%v)
  end subroutine DDOptimizerSetUpLayer

  ! DDOptimizerStep - one update of the parameters from their gradients
  subroutine DDOptimizerStep(opt, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_step(opt%v)
  end subroutine DDOptimizerStep

  ! DDOptimizerEndEpoch - advances the learning-rate schedule by an epoch
  subroutine DDOptimizerEndEpoch(opt, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_end_epoch(opt%v)
  end subroutine DDOptimizerEndEpoch

  ! DDOptimizerGetStepCount - steps and epochs done
  subroutine DDOptimizerGetStepCount(opt, step, epoch, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscInt, intent(out) :: step, epoch
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: s, e
    ierr = ddnn_optimizer_get_step_count(opt%v, s, e)
    step = int(s, kind(step))
    epoch = int(e, kind(epoch))
  end subroutine DDOptimizerGetStepCount

  ! DDOptimizerView - prints the optimizer
  subroutine DDOptimizerView(opt, viewer, ierr)
    type(tDDOptimizer), intent(in) :: opt
    PetscViewer, intent(in) :: viewer
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_view(opt%v, int(viewer%v, c_intptr_t))
  end subroutine DDOptimizerView

  ! DDOptimizerDestroy - destroys the optimizer; opt becomes null
  subroutine DDOptimizerDestroy(opt, ierr)
    type(tDDOptimizer), intent(inout) :: opt
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_optimizer_destroy(opt%v)
  end subroutine DDOptimizerDestroy

  ! ==========================================================================================
  ! DDDataset and checkpoints

  ! DDDatasetCreate - creates a dataset reader on comm
  subroutine DDDatasetCreate(comm, ds, ierr)
    MPI_Comm, intent(in) :: comm
    type(tDDDataset), intent(inout) :: ds
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_create(int(comm, c_int), ds%v)
  end subroutine DDDatasetCreate

  ! DDDatasetSetFile - the HDF5 file
  subroutine DDDatasetSetFile(ds, file, ierr)
    type(tDDDataset), intent(in) :: ds
    character(len=*), intent(in) :: file
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_set_file(ds%v, file, slen(file))
  end subroutine DDDatasetSetFile

  ! DDDatasetSetFields - the names of the n datasets (fields) of the file
  subroutine DDDatasetSetFields(ds, n, fields, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscInt, intent(in) :: n
    character(len=*), intent(in) :: fields(:)
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char), allocatable, target :: chars(:, :)
    type(c_ptr), allocatable :: ptrs(:)
    call ToCStrings(fields, int(n), chars, ptrs)
    ierr = ddnn_dataset_set_fields(ds%v, int(n, c_int64_t), ptrs)
  end subroutine DDDatasetSetFields

  ! DDDatasetSetRange - the samples [start, start + count) of the file
  subroutine DDDatasetSetRange(ds, start, count, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscInt, intent(in) :: start, count
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_set_range(ds%v, int(start, c_int64_t), int(count, c_int64_t))
  end subroutine DDDatasetSetRange

  ! DDDatasetSetOptionsPrefix - the prefix of the dataset's options
  subroutine DDDatasetSetOptionsPrefix(ds, prefix, ierr)
    type(tDDDataset), intent(in) :: ds
    character(len=*), intent(in) :: prefix
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_set_options_prefix(ds%v, prefix, slen(prefix))
  end subroutine DDDatasetSetOptionsPrefix

  ! DDDatasetSetFromOptions - configures the dataset from the options database
  subroutine DDDatasetSetFromOptions(ds, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_set_from_options(ds%v)
  end subroutine DDDatasetSetFromOptions

  ! DDDatasetSetUp - opens the file and reads the sample shapes
  subroutine DDDatasetSetUp(ds, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_set_up(ds%v)
  end subroutine DDDatasetSetUp

  ! DDDatasetGetNumSamples - the number of samples in the range
  subroutine DDDatasetGetNumSamples(ds, n, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscInt, intent(out) :: n
    PetscErrorCode, intent(out) :: ierr
    integer(c_int64_t) :: m
    ierr = ddnn_dataset_get_num_samples(ds%v, m)
    n = int(m, kind(n))
  end subroutine DDDatasetGetNumSamples

  ! DDDatasetShuffle - a new sample order from a seed (0: the file's order)
  subroutine DDDatasetShuffle(ds, seed, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscInt64, intent(in) :: seed
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_shuffle(ds%v, int(seed, c_int64_t))
  end subroutine DDDatasetShuffle

  ! DDDatasetReadBatch - reads the samples start..start+n-1 (0-based, in the shuffled order) of a field into t
  subroutine DDDatasetReadBatch(ds, field, start, n, t, ierr)
    type(tDDDataset), intent(in) :: ds
    PetscInt, intent(in) :: field, start, n
    type(tDDTensor), intent(in) :: t
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_read_batch(ds%v, int(field, c_int64_t), int(start, c_int64_t), int(n, c_int64_t), t%v)
  end subroutine DDDatasetReadBatch

  ! DDDatasetDestroy - destroys the dataset; ds becomes null
  subroutine DDDatasetDestroy(ds, ierr)
    type(tDDDataset), intent(inout) :: ds
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_dataset_destroy(ds%v)
  end subroutine DDDatasetDestroy

  ! DDCheckpointSave - writes the network's parameters and the optimizer's state (opt may be DD_NULL_OPTIMIZER)
  subroutine DDCheckpointSave(net, opt, file, ierr)
    type(tDDNet), intent(in) :: net
    type(tDDOptimizer), intent(in) :: opt
    character(len=*), intent(in) :: file
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_checkpoint_save(net%v, opt%v, file, slen(file))
  end subroutine DDCheckpointSave

  ! DDCheckpointLoad - reads them back, on any partition
  subroutine DDCheckpointLoad(net, opt, file, ierr)
    type(tDDNet), intent(in) :: net
    type(tDDOptimizer), intent(in) :: opt
    character(len=*), intent(in) :: file
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_checkpoint_load(net%v, opt%v, file, slen(file))
  end subroutine DDCheckpointLoad

end module ddnn
