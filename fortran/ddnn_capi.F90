!
!  ddnn_capi.F90 - module ddnn_capi: Fortran interfaces (ISO_C_BINDING) to the binding ABI of
!  ddnn, c_api/ddnn_capi.h, one for each entry point, with the header's argument names.
!
!  Most programs use module ddnn, whose subroutines have the names and arguments of the C API
!  (DDLayerForward(layer, x, y, ierr)); this module is the layer under it, for who wants the
!  raw ABI: every function returns the PetscErrorCode; handles are integer(c_intptr_t)
!  (the component v of type(tDDTensor) & co. and of PETSc's type(tVec), type(tDM)); integers
!  are integer(c_int64_t); strings are (characters, length) pairs; see the header for the
!  conventions.
!
module ddnn_capi
  use, intrinsic :: iso_c_binding
  implicit none
  public

  ! the DDNN_CAPI_VERSION of c_api/ddnn_capi.h these interfaces follow (ddnn_capi_version() gives the library's)
  integer(c_int), parameter :: DDNN_CAPI_INTERFACE_VERSION = 1

  interface
    function ddnn_capi_version(version) bind(C, name='ddnn_capi_version') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int) :: version
    end function
    function ddnn_initialize(file, flen, help, hlen) bind(C, name='ddnn_initialize') result(ierr)
      import
      integer(c_int) :: ierr
      character(kind=c_char) :: file(*)
      integer(c_int64_t), value :: flen
      character(kind=c_char) :: help(*)
      integer(c_int64_t), value :: hlen
    end function
    function ddnn_finalize() bind(C, name='ddnn_finalize') result(ierr)
      import
      integer(c_int) :: ierr
    end function
    function ddnn_initialized(flg) bind(C, name='ddnn_initialized') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int) :: flg
    end function
    function ddnn_petsc_initialized(flg) bind(C, name='ddnn_petsc_initialized') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int) :: flg
    end function
    function ddnn_push_error_handler_return() bind(C, name='ddnn_push_error_handler_return') result(ierr)
      import
      integer(c_int) :: ierr
    end function
    function ddnn_pop_error_handler() bind(C, name='ddnn_pop_error_handler') result(ierr)
      import
      integer(c_int) :: ierr
    end function
    function ddnn_error_message(code, buf, buflen) bind(C, name='ddnn_error_message') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: code
      character(kind=c_char) :: buf(*)
      integer(c_int64_t), value :: buflen
    end function
    function ddnn_options_check_unused(comm, prefix, len) bind(C, name='ddnn_options_check_unused') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_partition_create(comm, part) bind(C, name='ddnn_partition_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: part
    end function
    function ddnn_partition_set_shape(part, order, shape) bind(C, name='ddnn_partition_set_shape') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int64_t), value :: order
      integer(c_int64_t) :: shape(*)
    end function
    function ddnn_partition_set_from_options(part) bind(C, name='ddnn_partition_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
    end function
    function ddnn_partition_set_up(part) bind(C, name='ddnn_partition_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
    end function
    function ddnn_partition_create_cartesian(comm, order, shape, nranks, ranks, part) bind(C, name='ddnn_partition_create_cartesian') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_int64_t), value :: order
      integer(c_int64_t) :: shape(*)
      integer(c_int64_t), value :: nranks
      integer(c_int) :: ranks(*)
      integer(c_intptr_t) :: part
    end function
    function ddnn_partition_create_from_dmda(da, nlead, part) bind(C, name='ddnn_partition_create_from_dmda') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: da
      integer(c_int64_t), value :: nlead
      integer(c_intptr_t) :: part
    end function
    function ddnn_partition_get_order(part, order) bind(C, name='ddnn_partition_get_order') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int64_t) :: order
    end function
    function ddnn_partition_get_shape(part, cap, shape) bind(C, name='ddnn_partition_get_shape') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int64_t), value :: cap
      integer(c_int64_t) :: shape(*)
    end function
    function ddnn_partition_get_size(part, size) bind(C, name='ddnn_partition_get_size') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int64_t) :: size
    end function
    function ddnn_partition_get_index(part, index) bind(C, name='ddnn_partition_get_index') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int64_t) :: index
    end function
    function ddnn_partition_get_coordinates(part, cap, coords) bind(C, name='ddnn_partition_get_coordinates') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int64_t), value :: cap
      integer(c_int64_t) :: coords(*)
    end function
    function ddnn_partition_is_active(part, active) bind(C, name='ddnn_partition_is_active') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int) :: active
    end function
    function ddnn_partition_view(part, viewer) bind(C, name='ddnn_partition_view') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_intptr_t), value :: viewer
    end function
    function ddnn_partition_destroy(part) bind(C, name='ddnn_partition_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: part
    end function
    function ddnn_tensor_create(comm, t) bind(C, name='ddnn_tensor_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: t
    end function
    function ddnn_tensor_set_partition(t, part) bind(C, name='ddnn_tensor_set_partition') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t), value :: part
    end function
    function ddnn_tensor_set_shape(t, order, shape) bind(C, name='ddnn_tensor_set_shape') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: order
      integer(c_int64_t) :: shape(*)
    end function
    function ddnn_tensor_set_data_type(t, dtype) bind(C, name='ddnn_tensor_set_data_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int), value :: dtype
    end function
    function ddnn_tensor_set_ownership_ranges(t, dim, n, lx) bind(C, name='ddnn_tensor_set_ownership_ranges') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: dim
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: lx(*)
    end function
    function ddnn_tensor_set_format(t, format) bind(C, name='ddnn_tensor_set_format') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int), value :: format
    end function
    function ddnn_tensor_set_halo(t, order, lo, hi) bind(C, name='ddnn_tensor_set_halo') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: order
      integer(c_int64_t) :: lo(*)
      integer(c_int64_t) :: hi(*)
    end function
    function ddnn_tensor_set_from_options(t) bind(C, name='ddnn_tensor_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
    end function
    function ddnn_tensor_set_up(t) bind(C, name='ddnn_tensor_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
    end function
    function ddnn_tensor_create_from_partition(part, dtype, order, shape, t) bind(C, name='ddnn_tensor_create_from_partition') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: part
      integer(c_int), value :: dtype
      integer(c_int64_t), value :: order
      integer(c_int64_t) :: shape(*)
      integer(c_intptr_t) :: t
    end function
    function ddnn_tensor_create_from_dmda(da, dtype, t) bind(C, name='ddnn_tensor_create_from_dmda') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: da
      integer(c_int), value :: dtype
      integer(c_intptr_t) :: t
    end function
    function ddnn_tensor_duplicate(t, dup) bind(C, name='ddnn_tensor_duplicate') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t) :: dup
    end function
    function ddnn_tensor_get_order(t, order) bind(C, name='ddnn_tensor_get_order') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t) :: order
    end function
    function ddnn_tensor_get_shape(t, cap, shape) bind(C, name='ddnn_tensor_get_shape') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: cap
      integer(c_int64_t) :: shape(*)
    end function
    function ddnn_tensor_get_size(t, size) bind(C, name='ddnn_tensor_get_size') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t) :: size
    end function
    function ddnn_tensor_get_local_size(t, size) bind(C, name='ddnn_tensor_get_local_size') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t) :: size
    end function
    function ddnn_tensor_get_data_type(t, dtype) bind(C, name='ddnn_tensor_get_data_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int) :: dtype
    end function
    function ddnn_tensor_get_format(t, format) bind(C, name='ddnn_tensor_get_format') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int) :: format
    end function
    function ddnn_tensor_get_partition(t, part) bind(C, name='ddnn_tensor_get_partition') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t) :: part
    end function
    function ddnn_tensor_get_corners(t, cap, start, n) bind(C, name='ddnn_tensor_get_corners') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: cap
      integer(c_int64_t) :: start(*)
      integer(c_int64_t) :: n(*)
    end function
    function ddnn_tensor_get_halo(t, cap, lo, hi) bind(C, name='ddnn_tensor_get_halo') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: cap
      integer(c_int64_t) :: lo(*)
      integer(c_int64_t) :: hi(*)
    end function
    function ddnn_tensor_get_ownership_ranges(t, dim, cap, ranges, n) bind(C, name='ddnn_tensor_get_ownership_ranges') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: dim
      integer(c_int64_t), value :: cap
      integer(c_int64_t) :: ranges(*)
      integer(c_int64_t) :: n
    end function
    function ddnn_tensor_is_active(t, active) bind(C, name='ddnn_tensor_is_active') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int) :: active
    end function
    function ddnn_tensor_zero_entries(t) bind(C, name='ddnn_tensor_zero_entries') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
    end function
    function ddnn_tensor_set(t, alpha) bind(C, name='ddnn_tensor_set') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      real(c_double), value :: alpha
    end function
    function ddnn_tensor_scale(t, alpha) bind(C, name='ddnn_tensor_scale') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      real(c_double), value :: alpha
    end function
    function ddnn_tensor_copy(x, y) bind(C, name='ddnn_tensor_copy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
    end function
    function ddnn_tensor_axpy(y, alpha, x) bind(C, name='ddnn_tensor_axpy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: y
      real(c_double), value :: alpha
      integer(c_intptr_t), value :: x
    end function
    function ddnn_tensor_axpby(y, alpha, beta, x) bind(C, name='ddnn_tensor_axpby') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: y
      real(c_double), value :: alpha
      real(c_double), value :: beta
      integer(c_intptr_t), value :: x
    end function
    function ddnn_tensor_dot(x, y, dot) bind(C, name='ddnn_tensor_dot') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
      real(c_double) :: dot
    end function
    function ddnn_tensor_norm(t, type, nrm) bind(C, name='ddnn_tensor_norm') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int), value :: type
      real(c_double) :: nrm
    end function
    function ddnn_tensor_sum(t, sum) bind(C, name='ddnn_tensor_sum') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      real(c_double) :: sum
    end function
    function ddnn_tensor_max_abs_diff(x, y, diff) bind(C, name='ddnn_tensor_max_abs_diff') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
      real(c_double) :: diff
    end function
    function ddnn_tensor_set_random_global(t, seed, lo, hi) bind(C, name='ddnn_tensor_set_random_global') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int64_t), value :: seed
      real(c_double), value :: lo
      real(c_double), value :: hi
    end function
    function ddnn_tensor_set_values_global(t, dtype, values, count) bind(C, name='ddnn_tensor_set_values_global') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int), value :: dtype
      type(*) :: values(*)
      integer(c_int64_t), value :: count
    end function
    function ddnn_tensor_scatter_from_root(t, root, dtype, values, count) bind(C, name='ddnn_tensor_scatter_from_root') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int), value :: root
      integer(c_int), value :: dtype
      type(*) :: values(*)
      integer(c_int64_t), value :: count
    end function
    function ddnn_tensor_gather_to_root(t, root, dtype, values, count) bind(C, name='ddnn_tensor_gather_to_root') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_int), value :: root
      integer(c_int), value :: dtype
      type(*) :: values(*)
      integer(c_int64_t), value :: count
    end function
    function ddnn_tensor_place_vec(t, v) bind(C, name='ddnn_tensor_place_vec') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t), value :: v
    end function
    function ddnn_tensor_reset_vec(t, v) bind(C, name='ddnn_tensor_reset_vec') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t), value :: v
    end function
    function ddnn_tensor_copy_from_vec(t, v) bind(C, name='ddnn_tensor_copy_from_vec') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t), value :: v
    end function
    function ddnn_tensor_copy_to_vec(t, v) bind(C, name='ddnn_tensor_copy_to_vec') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t), value :: v
    end function
    function ddnn_tensor_create_vec(t, v) bind(C, name='ddnn_tensor_create_vec') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t) :: v
    end function
    function ddnn_tensor_write_hdf5(t, file, flen, name, nlen, append) bind(C, name='ddnn_tensor_write_hdf5') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      character(kind=c_char) :: file(*)
      integer(c_int64_t), value :: flen
      character(kind=c_char) :: name(*)
      integer(c_int64_t), value :: nlen
      integer(c_int), value :: append
    end function
    function ddnn_tensor_read_hdf5(t, file, flen, name, nlen) bind(C, name='ddnn_tensor_read_hdf5') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      character(kind=c_char) :: file(*)
      integer(c_int64_t), value :: flen
      character(kind=c_char) :: name(*)
      integer(c_int64_t), value :: nlen
    end function
    function ddnn_tensor_view(t, viewer) bind(C, name='ddnn_tensor_view') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: t
      integer(c_intptr_t), value :: viewer
    end function
    function ddnn_tensor_destroy(t) bind(C, name='ddnn_tensor_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: t
    end function
    function ddnn_tensor_create_broadcast(x, part, y) bind(C, name='ddnn_tensor_create_broadcast') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: part
      integer(c_intptr_t) :: y
    end function
    function ddnn_tensor_create_sum_reduce(x, part, y) bind(C, name='ddnn_tensor_create_sum_reduce') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: part
      integer(c_intptr_t) :: y
    end function
    function ddnn_tensor_create_repartition(x, part, y) bind(C, name='ddnn_tensor_create_repartition') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: part
      integer(c_intptr_t) :: y
    end function
    function ddnn_primitive_create(comm, p) bind(C, name='ddnn_primitive_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: p
    end function
    function ddnn_primitive_set_type(p, type, len) bind(C, name='ddnn_primitive_set_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      character(kind=c_char) :: type(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_primitive_get_type(p, buf, buflen) bind(C, name='ddnn_primitive_get_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      character(kind=c_char) :: buf(*)
      integer(c_int64_t), value :: buflen
    end function
    function ddnn_primitive_set_options_prefix(p, prefix, len) bind(C, name='ddnn_primitive_set_options_prefix') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_primitive_set_from_options(p) bind(C, name='ddnn_primitive_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
    end function
    function ddnn_primitive_set_up(p, x, y) bind(C, name='ddnn_primitive_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
    end function
    function ddnn_primitive_apply(p, x, y) bind(C, name='ddnn_primitive_apply') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
    end function
    function ddnn_primitive_apply_adjoint(p, y, x) bind(C, name='ddnn_primitive_apply_adjoint') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_intptr_t), value :: y
      integer(c_intptr_t), value :: x
    end function
    function ddnn_primitive_adjoint_test(p, x, y, seed, err) bind(C, name='ddnn_primitive_adjoint_test') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
      integer(c_int64_t), value :: seed
      real(c_double) :: err
    end function
    function ddnn_primitive_halo_set_kernel(p, dim, k, s, d, pad, nout) bind(C, name='ddnn_primitive_halo_set_kernel') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_int64_t), value :: dim
      integer(c_int64_t), value :: k
      integer(c_int64_t), value :: s
      integer(c_int64_t), value :: d
      integer(c_int64_t), value :: pad
      integer(c_int64_t), value :: nout
    end function
    function ddnn_primitive_halo_set_padding(p, dim, mode) bind(C, name='ddnn_primitive_halo_set_padding') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_int64_t), value :: dim
      integer(c_int), value :: mode
    end function
    function ddnn_primitive_halo_set_pad_value(p, value) bind(C, name='ddnn_primitive_halo_set_pad_value') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      real(c_double), value :: value
    end function
    function ddnn_primitive_halo_set_window(p, dim, lo, hi) bind(C, name='ddnn_primitive_halo_set_window') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_int64_t), value :: dim
      integer(c_int64_t), value :: lo
      integer(c_int64_t), value :: hi
    end function
    function ddnn_primitive_allsumreduce_set_dimensions(p, n, dims) bind(C, name='ddnn_primitive_allsumreduce_set_dimensions') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: dims(*)
    end function
    function ddnn_primitive_view(p, viewer) bind(C, name='ddnn_primitive_view') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: p
      integer(c_intptr_t), value :: viewer
    end function
    function ddnn_primitive_destroy(p) bind(C, name='ddnn_primitive_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: p
    end function
    function ddnn_layer_create(comm, l) bind(C, name='ddnn_layer_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: l
    end function
    function ddnn_layer_set_type(l, type, len) bind(C, name='ddnn_layer_set_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      character(kind=c_char) :: type(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_layer_get_type(l, buf, buflen) bind(C, name='ddnn_layer_get_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      character(kind=c_char) :: buf(*)
      integer(c_int64_t), value :: buflen
    end function
    function ddnn_layer_set_options_prefix(l, prefix, len) bind(C, name='ddnn_layer_set_options_prefix') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_layer_append_options_prefix(l, prefix, len) bind(C, name='ddnn_layer_append_options_prefix') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_layer_set_from_options(l) bind(C, name='ddnn_layer_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
    end function
    function ddnn_layer_set_up(l, x) bind(C, name='ddnn_layer_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t), value :: x
    end function
    function ddnn_layer_set_up_multi(l, n, xs) bind(C, name='ddnn_layer_set_up_multi') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_intptr_t) :: xs(*)
    end function
    function ddnn_layer_get_output(l, y) bind(C, name='ddnn_layer_get_output') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t) :: y
    end function
    function ddnn_layer_create_output(l, y) bind(C, name='ddnn_layer_create_output') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t) :: y
    end function
    function ddnn_layer_forward(l, x, y) bind(C, name='ddnn_layer_forward') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t), value :: x
      integer(c_intptr_t), value :: y
    end function
    function ddnn_layer_forward_multi(l, n, xs, y) bind(C, name='ddnn_layer_forward_multi') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_intptr_t) :: xs(*)
      integer(c_intptr_t), value :: y
    end function
    function ddnn_layer_backward(l, dy, dx) bind(C, name='ddnn_layer_backward') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t), value :: dy
      integer(c_intptr_t), value :: dx
    end function
    function ddnn_layer_backward_multi(l, dy, n, dxs) bind(C, name='ddnn_layer_backward_multi') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t), value :: dy
      integer(c_int64_t), value :: n
      integer(c_intptr_t) :: dxs(*)
    end function
    function ddnn_layer_get_parameters(l, cap, params, grads, n) bind(C, name='ddnn_layer_get_parameters') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: cap
      integer(c_intptr_t) :: params(*)
      integer(c_intptr_t) :: grads(*)
      integer(c_int64_t) :: n
    end function
    function ddnn_layer_get_num_parameters(l, count) bind(C, name='ddnn_layer_get_num_parameters') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t) :: count
    end function
    function ddnn_layer_zero_gradients(l) bind(C, name='ddnn_layer_zero_gradients') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
    end function
    function ddnn_layer_initialize_parameters(l, seed) bind(C, name='ddnn_layer_initialize_parameters') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: seed
    end function
    function ddnn_layer_set_init_type(l, type) bind(C, name='ddnn_layer_set_init_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: type
    end function
    function ddnn_layer_set_init_scale(l, scale) bind(C, name='ddnn_layer_set_init_scale') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      real(c_double), value :: scale
    end function
    function ddnn_layer_set_training(l, flg) bind(C, name='ddnn_layer_set_training') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: flg
    end function
    function ddnn_layer_adjoint_test(l, wrtparams, seed, err) bind(C, name='ddnn_layer_adjoint_test') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: wrtparams
      integer(c_int64_t), value :: seed
      real(c_double) :: err
    end function
    function ddnn_layer_view(l, viewer) bind(C, name='ddnn_layer_view') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_intptr_t), value :: viewer
    end function
    function ddnn_layer_destroy(l) bind(C, name='ddnn_layer_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: l
    end function
    function ddnn_layer_conv_set_output_channels(l, co) bind(C, name='ddnn_layer_conv_set_output_channels') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: co
    end function
    function ddnn_layer_conv_set_kernel(l, n, k) bind(C, name='ddnn_layer_conv_set_kernel') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: k(*)
    end function
    function ddnn_layer_conv_set_stride(l, n, s) bind(C, name='ddnn_layer_conv_set_stride') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: s(*)
    end function
    function ddnn_layer_conv_set_padding(l, n, p) bind(C, name='ddnn_layer_conv_set_padding') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: p(*)
    end function
    function ddnn_layer_conv_set_dilation(l, n, d) bind(C, name='ddnn_layer_conv_set_dilation') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: d(*)
    end function
    function ddnn_layer_conv_set_bias(l, flg) bind(C, name='ddnn_layer_conv_set_bias') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: flg
    end function
    function ddnn_layer_conv_set_padding_mode(l, mode) bind(C, name='ddnn_layer_conv_set_padding_mode') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: mode
    end function
    function ddnn_layer_pool_set_type(l, type) bind(C, name='ddnn_layer_pool_set_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: type
    end function
    function ddnn_layer_pool_set_kernel(l, n, k) bind(C, name='ddnn_layer_pool_set_kernel') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: k(*)
    end function
    function ddnn_layer_pool_set_stride(l, n, s) bind(C, name='ddnn_layer_pool_set_stride') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: s(*)
    end function
    function ddnn_layer_pool_set_padding(l, n, p) bind(C, name='ddnn_layer_pool_set_padding') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: p(*)
    end function
    function ddnn_layer_affine_set_output_features(l, n) bind(C, name='ddnn_layer_affine_set_output_features') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
    end function
    function ddnn_layer_affine_set_bias(l, flg) bind(C, name='ddnn_layer_affine_set_bias') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: flg
    end function
    function ddnn_layer_activation_set_type(l, type) bind(C, name='ddnn_layer_activation_set_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: type
    end function
    function ddnn_layer_activation_set_negative_slope(l, slope) bind(C, name='ddnn_layer_activation_set_negative_slope') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      real(c_double), value :: slope
    end function
    function ddnn_layer_upsample_set_mode(l, mode) bind(C, name='ddnn_layer_upsample_set_mode') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: mode
    end function
    function ddnn_layer_upsample_set_scale(l, n, s) bind(C, name='ddnn_layer_upsample_set_scale') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: n
      integer(c_int64_t) :: s(*)
    end function
    function ddnn_layer_concat_set_dimension(l, dim) bind(C, name='ddnn_layer_concat_set_dimension') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int64_t), value :: dim
    end function
    function ddnn_layer_loss_set_type(l, type) bind(C, name='ddnn_layer_loss_set_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: type
    end function
    function ddnn_layer_loss_set_reduction(l, reduction) bind(C, name='ddnn_layer_loss_set_reduction') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      integer(c_int), value :: reduction
    end function
    function ddnn_layer_loss_get_value(l, value) bind(C, name='ddnn_layer_loss_get_value') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: l
      real(c_double) :: value
    end function
    function ddnn_net_create(comm, net) bind(C, name='ddnn_net_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: net
    end function
    function ddnn_net_set_options_prefix(net, prefix, len) bind(C, name='ddnn_net_set_options_prefix') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_net_set_input_names(net, n, names) bind(C, name='ddnn_net_set_input_names') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t), value :: n
      type(c_ptr) :: names(*)
    end function
    function ddnn_net_add_layer(net, l, name, len, n, inputs) bind(C, name='ddnn_net_add_layer') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_intptr_t), value :: l
      character(kind=c_char) :: name(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), value :: n
      type(c_ptr) :: inputs(*)
    end function
    function ddnn_net_set_output(net, name, len) bind(C, name='ddnn_net_set_output') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      character(kind=c_char) :: name(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_net_set_from_options(net) bind(C, name='ddnn_net_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
    end function
    function ddnn_net_set_up(net, n, xs) bind(C, name='ddnn_net_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t), value :: n
      integer(c_intptr_t) :: xs(*)
    end function
    function ddnn_net_forward(net, n, xs) bind(C, name='ddnn_net_forward') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t), value :: n
      integer(c_intptr_t) :: xs(*)
    end function
    function ddnn_net_backward(net, dy) bind(C, name='ddnn_net_backward') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_intptr_t), value :: dy
    end function
    function ddnn_net_get_output(net, y) bind(C, name='ddnn_net_get_output') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_intptr_t) :: y
    end function
    function ddnn_net_get_layer(net, name, len, l) bind(C, name='ddnn_net_get_layer') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      character(kind=c_char) :: name(*)
      integer(c_int64_t), value :: len
      integer(c_intptr_t) :: l
    end function
    function ddnn_net_get_num_layers(net, n) bind(C, name='ddnn_net_get_num_layers') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t) :: n
    end function
    function ddnn_net_get_layer_output(net, name, len, y) bind(C, name='ddnn_net_get_layer_output') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      character(kind=c_char) :: name(*)
      integer(c_int64_t), value :: len
      integer(c_intptr_t) :: y
    end function
    function ddnn_net_get_parameters(net, cap, params, grads, n) bind(C, name='ddnn_net_get_parameters') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t), value :: cap
      integer(c_intptr_t) :: params(*)
      integer(c_intptr_t) :: grads(*)
      integer(c_int64_t) :: n
    end function
    function ddnn_net_get_num_parameters(net, count) bind(C, name='ddnn_net_get_num_parameters') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t) :: count
    end function
    function ddnn_net_zero_gradients(net) bind(C, name='ddnn_net_zero_gradients') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
    end function
    function ddnn_net_initialize_parameters(net, seed) bind(C, name='ddnn_net_initialize_parameters') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int64_t), value :: seed
    end function
    function ddnn_net_set_training(net, flg) bind(C, name='ddnn_net_set_training') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_int), value :: flg
    end function
    function ddnn_net_get_loss(net, loss) bind(C, name='ddnn_net_get_loss') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      real(c_double) :: loss
    end function
    function ddnn_net_view(net, viewer) bind(C, name='ddnn_net_view') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_intptr_t), value :: viewer
    end function
    function ddnn_net_destroy(net) bind(C, name='ddnn_net_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: net
    end function
    function ddnn_optimizer_create(comm, opt) bind(C, name='ddnn_optimizer_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: opt
    end function
    function ddnn_optimizer_set_type(opt, type, len) bind(C, name='ddnn_optimizer_set_type') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      character(kind=c_char) :: type(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_optimizer_set_options_prefix(opt, prefix, len) bind(C, name='ddnn_optimizer_set_options_prefix') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_optimizer_set_from_options(opt) bind(C, name='ddnn_optimizer_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
    end function
    function ddnn_optimizer_set_learning_rate(opt, lr) bind(C, name='ddnn_optimizer_set_learning_rate') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      real(c_double), value :: lr
    end function
    function ddnn_optimizer_get_learning_rate(opt, lr) bind(C, name='ddnn_optimizer_get_learning_rate') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      real(c_double) :: lr
    end function
    function ddnn_optimizer_set_momentum(opt, momentum, nesterov) bind(C, name='ddnn_optimizer_set_momentum') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      real(c_double), value :: momentum
      integer(c_int), value :: nesterov
    end function
    function ddnn_optimizer_set_weight_decay(opt, wd) bind(C, name='ddnn_optimizer_set_weight_decay') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      real(c_double), value :: wd
    end function
    function ddnn_optimizer_set_clip_norm(opt, clip) bind(C, name='ddnn_optimizer_set_clip_norm') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      real(c_double), value :: clip
    end function
    function ddnn_optimizer_set_up(opt, n, params, grads) bind(C, name='ddnn_optimizer_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      integer(c_int64_t), value :: n
      integer(c_intptr_t) :: params(*)
      integer(c_intptr_t) :: grads(*)
    end function
    function ddnn_optimizer_set_up_from_net(opt, net) bind(C, name='ddnn_optimizer_set_up_from_net') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      integer(c_intptr_t), value :: net
    end function
    function ddnn_optimizer_set_up_from_layer(opt, l) bind(C, name='ddnn_optimizer_set_up_from_layer') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      integer(c_intptr_t), value :: l
    end function
    function ddnn_optimizer_step(opt) bind(C, name='ddnn_optimizer_step') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
    end function
    function ddnn_optimizer_end_epoch(opt) bind(C, name='ddnn_optimizer_end_epoch') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
    end function
    function ddnn_optimizer_get_step_count(opt, step, epoch) bind(C, name='ddnn_optimizer_get_step_count') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      integer(c_int64_t) :: step
      integer(c_int64_t) :: epoch
    end function
    function ddnn_optimizer_view(opt, viewer) bind(C, name='ddnn_optimizer_view') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: opt
      integer(c_intptr_t), value :: viewer
    end function
    function ddnn_optimizer_destroy(opt) bind(C, name='ddnn_optimizer_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: opt
    end function
    function ddnn_dataset_create(comm, ds) bind(C, name='ddnn_dataset_create') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm
      integer(c_intptr_t) :: ds
    end function
    function ddnn_dataset_set_file(ds, file, len) bind(C, name='ddnn_dataset_set_file') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      character(kind=c_char) :: file(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_dataset_set_fields(ds, n, fields) bind(C, name='ddnn_dataset_set_fields') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      integer(c_int64_t), value :: n
      type(c_ptr) :: fields(*)
    end function
    function ddnn_dataset_set_range(ds, start, count) bind(C, name='ddnn_dataset_set_range') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      integer(c_int64_t), value :: start
      integer(c_int64_t), value :: count
    end function
    function ddnn_dataset_set_options_prefix(ds, prefix, len) bind(C, name='ddnn_dataset_set_options_prefix') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      character(kind=c_char) :: prefix(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_dataset_set_from_options(ds) bind(C, name='ddnn_dataset_set_from_options') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
    end function
    function ddnn_dataset_set_up(ds) bind(C, name='ddnn_dataset_set_up') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
    end function
    function ddnn_dataset_get_num_samples(ds, n) bind(C, name='ddnn_dataset_get_num_samples') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      integer(c_int64_t) :: n
    end function
    function ddnn_dataset_shuffle(ds, seed) bind(C, name='ddnn_dataset_shuffle') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      integer(c_int64_t), value :: seed
    end function
    function ddnn_dataset_read_batch(ds, field, start, count, t) bind(C, name='ddnn_dataset_read_batch') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: ds
      integer(c_int64_t), value :: field
      integer(c_int64_t), value :: start
      integer(c_int64_t), value :: count
      integer(c_intptr_t), value :: t
    end function
    function ddnn_dataset_destroy(ds) bind(C, name='ddnn_dataset_destroy') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t) :: ds
    end function
    function ddnn_checkpoint_save(net, opt, file, len) bind(C, name='ddnn_checkpoint_save') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_intptr_t), value :: opt
      character(kind=c_char) :: file(*)
      integer(c_int64_t), value :: len
    end function
    function ddnn_checkpoint_load(net, opt, file, len) bind(C, name='ddnn_checkpoint_load') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_intptr_t), value :: net
      integer(c_intptr_t), value :: opt
      character(kind=c_char) :: file(*)
      integer(c_int64_t), value :: len
    end function
  end interface
end module ddnn_capi
