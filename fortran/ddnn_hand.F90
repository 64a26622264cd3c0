!
!  ddnn_hand.F90 - the hand-written part of module ddnn, spliced by c_api/generate.py into the
!  generated fortran/ddnn.F90 (build tree): the helpers of the generated subroutines, and the
!  subroutines whose binding needs judgment (c_api/bindings.txt marks their C functions "hand" or
!  "fortran=hand"; each says why below). Not compiled on its own.
!
!@spec
  public :: DDInitialize
  interface DDInitialize
    module procedure DDInitializeNoArguments, DDInitializeNoHelp, DDInitializeWithHelp
  end interface DDInitialize
  public :: DDPartitionCreateCartesian
  interface DDPartitionCreateCartesian
    module procedure DDPartitionCreateCartesianRanks, DDPartitionCreateCartesianAll
  end interface DDPartitionCreateCartesian
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
  public :: DDFinalize, DDPushReturnErrorHandler, DDPopErrorHandler, DDGetErrorMessage
  public :: DDTensorSetOwnershipRanges, DDTensorGetOwnershipRanges

  logical, save :: dd_began_petsc = .false. ! DDInitialize() initialized PETSc

!@contains
  ! ==========================================================================================
  ! helpers of the generated subroutines

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

  ! ==========================================================================================
  ! bound by hand

  ! hand-written: special semantics: PETSc is initialized by Fortran's PetscInitialize() first (the command line)
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

  ! hand-written: special semantics: finalizes PETSc too when DDInitialize() initialized it
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

  ! hand-written: no C function of ddnn (PETSc's error handler)
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

  ! hand-written: no C function of ddnn: a string from PetscErrorMessage()
  ! DDGetErrorMessage - the message of the most recent error raised with code (PetscErrorMessage())
  subroutine DDGetErrorMessage(code, msg, ierr)
    PetscErrorCode, intent(in) :: code
    character(len=*), intent(out) :: msg
    PetscErrorCode, intent(out) :: ierr
    character(kind=c_char) :: buf(max(len(msg), 1) + 1)
    ierr = ddnn_error_message(int(code, c_int), buf, size(buf, kind=c_int64_t))
    call FromCString(buf, msg)
  end subroutine DDGetErrorMessage

  ! hand-written: special semantics: nranks = PETSC_DECIDE, and a short form without ranks
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

  ! hand-written: the array length is the partition extent along dim
  ! DDTensorSetOwnershipRanges - the sizes of the pieces along dimension dim (0-based), like DMDA's lx
  subroutine DDTensorSetOwnershipRanges(t, dim, lx, ierr)
    type(tDDTensor), intent(in) :: t
    PetscInt, intent(in) :: dim, lx(:)
    PetscErrorCode, intent(out) :: ierr
    ierr = ddnn_tensor_set_ownership_ranges(t%v, int(dim, c_int64_t), size(lx, kind=c_int64_t), int(lx, c_int64_t))
  end subroutine DDTensorSetOwnershipRanges

  ! hand-written: the count depends on dim
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

  ! hand-written: arrays of objects returned (and a short form that only counts)
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

  ! hand-written: a short form of DDNetAddLayer() (no inputs: the previous layer)
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

  ! hand-written: short forms of DDOptimizerSetUp() over the ABI conveniences
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
