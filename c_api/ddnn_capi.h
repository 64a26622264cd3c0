/*
  ddnn_capi.h - the flat binding ABI of ddnn, for Fortran (module ddnn) and other languages.

  This header stands alone (no PETSc or MPI header is needed to use it). Every entry point
  converts its arguments and forwards to the public C API of ddnn (ddnn.h); it adds no
  behaviour of its own beyond checking the handles it is given.

  Conventions
  -----------
  - Return value: every function returns the PetscErrorCode of the call as an int; 0 is
    success. Errors go through PETSc's error handler, as in C (a traceback by default).
  - ddnn objects (DDPartition, DDTensor, DDPrimitive, DDLayer, DDNet, DDOptimizer, DDDataset)
    are opaque handles: the C pointer, held in a ddnn_handle (an intptr_t). A handle of 0 is
    "no object". Every entry point checks the handles it receives: a null handle, a handle of
    another class, or the handle of an object whose memory PETSc has marked freed gives a
    PETSc error (PETSC_ERR_ARG_NULL, PETSC_ERR_ARG_WRONG, PETSC_ERR_ARG_CORRUPT) naming the
    argument and the expected class, instead of a crash. The *_destroy functions take the
    address of the handle and zero it, so that a later use is a null-handle error (the Fortran
    module passes its handle variables, so Fortran handles are nulled on destroy); as in
    PETSc, destroying a null handle does nothing. A copy of a
    handle kept elsewhere is not nulled: do not use it after destroying the object.
  - Handles returned by *_get_* functions (a layer's output, a tensor's partition, a net's
    layer, parameters) are borrowed: do not destroy them. Handles returned by *_create* and
    *_duplicate functions are owned by the caller.
  - PETSc objects (Vec, DM, PetscViewer) are passed as ddnn_petsc_handle (intptr_t) holding
    the C pointer: in Fortran this is the component v of type(tVec), type(tDM),
    type(tPetscViewer) (PETSc 3.18's Fortran types store the C pointer in an integer of the
    pointer's size); in petsc4py it is obj.handle. The value -2, PETSc's Fortran marker of an
    object not yet created or already destroyed, and 0 are reported as errors (a viewer of 0
    means the default viewer, PETSC_VIEWER_STDOUT_ of the object's communicator; the Fortran
    constants PETSC_VIEWER_STDOUT_WORLD etc. are understood).
  - Communicators are Fortran handles (MPI_Fint, converted with MPI_Comm_f2c()): in Fortran
    PETSC_COMM_WORLD, in C MPI_Comm_c2f(comm).
  - Integers (sizes, indices, shapes, seeds) are int64_t and are converted to PetscInt with
    an overflow check; reals are double (PetscReal); booleans and enumerations are int with
    the values of the C enumerations (DDDataType, NormType, DDPaddingMode, ...).
  - Strings in: a pointer and a length. len >= 0 takes exactly len bytes (no NUL needed, as
    Fortran passes character variables; the Fortran module passes len_trim); len < 0 takes a
    NUL-terminated string. Lists of names are arrays of NUL-terminated strings.
  - Strings out: a buffer and its capacity; the result is NUL-terminated, and a buffer too
    small is an error (PETSC_ERR_ARG_SIZ).
  - Arrays out: a buffer and its capacity; the count is returned separately (for parameter
    lists, a capacity of 0 only returns the count).
  - Arrays of tensor values (void *) come with the DDDataType of their elements, which must
    be the tensor's, and their number of entries.
*/
#ifndef DDNN_CAPI_H
#define DDNN_CAPI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef intptr_t ddnn_handle;       /* a ddnn object: the C pointer, 0 for none */
typedef intptr_t ddnn_petsc_handle; /* a PETSc object (Vec, DM, PetscViewer): the C pointer */
typedef int      ddnn_fint;         /* a Fortran MPI communicator (MPI_Fint) */
typedef int64_t  ddnn_int;

#define DDNN_CAPI_VERSION 1

/* package */
int ddnn_capi_version(int *version);
int ddnn_initialize(const char *file, ddnn_int flen, const char *help, ddnn_int hlen);
int ddnn_finalize(void);
int ddnn_initialized(int *flg);
int ddnn_petsc_initialized(int *flg);
int ddnn_push_error_handler_return(void);
int ddnn_pop_error_handler(void);
int ddnn_error_message(int code, char *buf, ddnn_int buflen);
int ddnn_options_check_unused(ddnn_fint comm, const char *prefix, ddnn_int len);

/* partition */
int ddnn_partition_create(ddnn_fint comm, ddnn_handle *part);
int ddnn_partition_set_shape(ddnn_handle part, ddnn_int order, const ddnn_int shape[]);
int ddnn_partition_set_from_options(ddnn_handle part);
int ddnn_partition_set_up(ddnn_handle part);
int ddnn_partition_create_cartesian(ddnn_fint comm, ddnn_int order, const ddnn_int shape[], ddnn_int nranks, const int ranks[], ddnn_handle *part);
int ddnn_partition_create_from_dmda(ddnn_petsc_handle da, ddnn_int nlead, ddnn_handle *part);
int ddnn_partition_get_order(ddnn_handle part, ddnn_int *order);
int ddnn_partition_get_shape(ddnn_handle part, ddnn_int cap, ddnn_int shape[]);
int ddnn_partition_get_size(ddnn_handle part, ddnn_int *size);
int ddnn_partition_get_index(ddnn_handle part, ddnn_int *index);
int ddnn_partition_get_coordinates(ddnn_handle part, ddnn_int cap, ddnn_int coords[]);
int ddnn_partition_is_active(ddnn_handle part, int *active);
int ddnn_partition_view(ddnn_handle part, ddnn_petsc_handle viewer);
int ddnn_partition_destroy(ddnn_handle *part);

/* tensor */
int ddnn_tensor_create(ddnn_fint comm, ddnn_handle *t);
int ddnn_tensor_set_partition(ddnn_handle t, ddnn_handle part);
int ddnn_tensor_set_shape(ddnn_handle t, ddnn_int order, const ddnn_int shape[]);
int ddnn_tensor_set_data_type(ddnn_handle t, int dtype);
int ddnn_tensor_set_ownership_ranges(ddnn_handle t, ddnn_int dim, ddnn_int n, const ddnn_int lx[]);
int ddnn_tensor_set_format(ddnn_handle t, int format);
int ddnn_tensor_set_halo(ddnn_handle t, ddnn_int order, const ddnn_int lo[], const ddnn_int hi[]);
int ddnn_tensor_set_from_options(ddnn_handle t);
int ddnn_tensor_set_up(ddnn_handle t);
int ddnn_tensor_create_from_partition(ddnn_handle part, int dtype, ddnn_int order, const ddnn_int shape[], ddnn_handle *t);
int ddnn_tensor_create_from_dmda(ddnn_petsc_handle da, int dtype, ddnn_handle *t);
int ddnn_tensor_duplicate(ddnn_handle t, ddnn_handle *dup);
int ddnn_tensor_get_order(ddnn_handle t, ddnn_int *order);
int ddnn_tensor_get_shape(ddnn_handle t, ddnn_int cap, ddnn_int shape[]);
int ddnn_tensor_get_size(ddnn_handle t, ddnn_int *size);
int ddnn_tensor_get_local_size(ddnn_handle t, ddnn_int *size);
int ddnn_tensor_get_data_type(ddnn_handle t, int *dtype);
int ddnn_tensor_get_format(ddnn_handle t, int *format);
int ddnn_tensor_get_partition(ddnn_handle t, ddnn_handle *part);
int ddnn_tensor_get_corners(ddnn_handle t, ddnn_int cap, ddnn_int start[], ddnn_int n[]);
int ddnn_tensor_get_halo(ddnn_handle t, ddnn_int cap, ddnn_int lo[], ddnn_int hi[]);
int ddnn_tensor_get_ownership_ranges(ddnn_handle t, ddnn_int dim, ddnn_int cap, ddnn_int ranges[], ddnn_int *n);
int ddnn_tensor_is_active(ddnn_handle t, int *active);
int ddnn_tensor_zero_entries(ddnn_handle t);
int ddnn_tensor_set(ddnn_handle t, double alpha);
int ddnn_tensor_scale(ddnn_handle t, double alpha);
int ddnn_tensor_copy(ddnn_handle x, ddnn_handle y);
int ddnn_tensor_axpy(ddnn_handle y, double alpha, ddnn_handle x);
int ddnn_tensor_axpby(ddnn_handle y, double alpha, double beta, ddnn_handle x);
int ddnn_tensor_dot(ddnn_handle x, ddnn_handle y, double *dot);
int ddnn_tensor_norm(ddnn_handle t, int type, double *nrm);
int ddnn_tensor_sum(ddnn_handle t, double *sum);
int ddnn_tensor_max_abs_diff(ddnn_handle x, ddnn_handle y, double *diff);
int ddnn_tensor_set_random_global(ddnn_handle t, int64_t seed, double lo, double hi);
int ddnn_tensor_set_values_global(ddnn_handle t, int dtype, const void *values, ddnn_int count);
int ddnn_tensor_scatter_from_root(ddnn_handle t, int root, int dtype, const void *values, ddnn_int count);
int ddnn_tensor_gather_to_root(ddnn_handle t, int root, int dtype, void *values, ddnn_int count);
int ddnn_tensor_place_vec(ddnn_handle t, ddnn_petsc_handle v);
int ddnn_tensor_reset_vec(ddnn_handle t, ddnn_petsc_handle v);
int ddnn_tensor_copy_from_vec(ddnn_handle t, ddnn_petsc_handle v);
int ddnn_tensor_copy_to_vec(ddnn_handle t, ddnn_petsc_handle v);
int ddnn_tensor_create_vec(ddnn_handle t, ddnn_petsc_handle *v);
int ddnn_tensor_write_hdf5(ddnn_handle t, const char *file, ddnn_int flen, const char *name, ddnn_int nlen, int append);
int ddnn_tensor_read_hdf5(ddnn_handle t, const char *file, ddnn_int flen, const char *name, ddnn_int nlen);
int ddnn_tensor_view(ddnn_handle t, ddnn_petsc_handle viewer);
int ddnn_tensor_destroy(ddnn_handle *t);
int ddnn_tensor_create_broadcast(ddnn_handle x, ddnn_handle part, ddnn_handle *y);
int ddnn_tensor_create_sum_reduce(ddnn_handle x, ddnn_handle part, ddnn_handle *y);
int ddnn_tensor_create_repartition(ddnn_handle x, ddnn_handle part, ddnn_handle *y);

/* primitive */
int ddnn_primitive_create(ddnn_fint comm, ddnn_handle *p);
int ddnn_primitive_set_type(ddnn_handle p, const char *type, ddnn_int len);
int ddnn_primitive_get_type(ddnn_handle p, char *buf, ddnn_int buflen);
int ddnn_primitive_set_options_prefix(ddnn_handle p, const char *prefix, ddnn_int len);
int ddnn_primitive_set_from_options(ddnn_handle p);
int ddnn_primitive_set_up(ddnn_handle p, ddnn_handle x, ddnn_handle y);
int ddnn_primitive_apply(ddnn_handle p, ddnn_handle x, ddnn_handle y);
int ddnn_primitive_apply_adjoint(ddnn_handle p, ddnn_handle y, ddnn_handle x);
int ddnn_primitive_adjoint_test(ddnn_handle p, ddnn_handle x, ddnn_handle y, int64_t seed, double *err);
int ddnn_primitive_halo_set_kernel(ddnn_handle p, ddnn_int dim, ddnn_int k, ddnn_int s, ddnn_int d, ddnn_int pad, ddnn_int nout);
int ddnn_primitive_halo_set_padding(ddnn_handle p, ddnn_int dim, int mode);
int ddnn_primitive_halo_set_pad_value(ddnn_handle p, double value);
int ddnn_primitive_halo_set_window(ddnn_handle p, ddnn_int dim, ddnn_int lo, ddnn_int hi);
int ddnn_primitive_allsumreduce_set_dimensions(ddnn_handle p, ddnn_int n, const ddnn_int dims[]);
int ddnn_primitive_view(ddnn_handle p, ddnn_petsc_handle viewer);
int ddnn_primitive_destroy(ddnn_handle *p);

/* layer */
int ddnn_layer_create(ddnn_fint comm, ddnn_handle *l);
int ddnn_layer_set_type(ddnn_handle l, const char *type, ddnn_int len);
int ddnn_layer_get_type(ddnn_handle l, char *buf, ddnn_int buflen);
int ddnn_layer_set_options_prefix(ddnn_handle l, const char *prefix, ddnn_int len);
int ddnn_layer_append_options_prefix(ddnn_handle l, const char *prefix, ddnn_int len);
int ddnn_layer_set_from_options(ddnn_handle l);
int ddnn_layer_set_up(ddnn_handle l, ddnn_handle x);
int ddnn_layer_set_up_multi(ddnn_handle l, ddnn_int n, const ddnn_handle xs[]);
int ddnn_layer_get_output(ddnn_handle l, ddnn_handle *y);
int ddnn_layer_create_output(ddnn_handle l, ddnn_handle *y);
int ddnn_layer_forward(ddnn_handle l, ddnn_handle x, ddnn_handle y);
int ddnn_layer_forward_multi(ddnn_handle l, ddnn_int n, const ddnn_handle xs[], ddnn_handle y);
int ddnn_layer_backward(ddnn_handle l, ddnn_handle dy, ddnn_handle dx);
int ddnn_layer_backward_multi(ddnn_handle l, ddnn_handle dy, ddnn_int n, const ddnn_handle dxs[]);
int ddnn_layer_get_parameters(ddnn_handle l, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n);
int ddnn_layer_get_num_parameters(ddnn_handle l, ddnn_int *count);
int ddnn_layer_zero_gradients(ddnn_handle l);
int ddnn_layer_initialize_parameters(ddnn_handle l, int64_t seed);
int ddnn_layer_set_init_type(ddnn_handle l, int type);
int ddnn_layer_set_init_scale(ddnn_handle l, double scale);
int ddnn_layer_set_training(ddnn_handle l, int flg);
int ddnn_layer_adjoint_test(ddnn_handle l, int wrtparams, int64_t seed, double *err);
int ddnn_layer_view(ddnn_handle l, ddnn_petsc_handle viewer);
int ddnn_layer_destroy(ddnn_handle *l);
int ddnn_layer_conv_set_output_channels(ddnn_handle l, ddnn_int co);
int ddnn_layer_conv_set_kernel(ddnn_handle l, ddnn_int n, const ddnn_int k[]);
int ddnn_layer_conv_set_stride(ddnn_handle l, ddnn_int n, const ddnn_int s[]);
int ddnn_layer_conv_set_padding(ddnn_handle l, ddnn_int n, const ddnn_int p[]);
int ddnn_layer_conv_set_dilation(ddnn_handle l, ddnn_int n, const ddnn_int d[]);
int ddnn_layer_conv_set_bias(ddnn_handle l, int flg);
int ddnn_layer_conv_set_padding_mode(ddnn_handle l, int mode);
int ddnn_layer_pool_set_type(ddnn_handle l, int type);
int ddnn_layer_pool_set_kernel(ddnn_handle l, ddnn_int n, const ddnn_int k[]);
int ddnn_layer_pool_set_stride(ddnn_handle l, ddnn_int n, const ddnn_int s[]);
int ddnn_layer_pool_set_padding(ddnn_handle l, ddnn_int n, const ddnn_int p[]);
int ddnn_layer_affine_set_output_features(ddnn_handle l, ddnn_int n);
int ddnn_layer_affine_set_bias(ddnn_handle l, int flg);
int ddnn_layer_activation_set_type(ddnn_handle l, int type);
int ddnn_layer_activation_set_negative_slope(ddnn_handle l, double slope);
int ddnn_layer_upsample_set_mode(ddnn_handle l, int mode);
int ddnn_layer_upsample_set_scale(ddnn_handle l, ddnn_int n, const ddnn_int s[]);
int ddnn_layer_concat_set_dimension(ddnn_handle l, ddnn_int dim);
int ddnn_layer_loss_set_type(ddnn_handle l, int type);
int ddnn_layer_loss_set_reduction(ddnn_handle l, int reduction);
int ddnn_layer_loss_get_value(ddnn_handle l, double *value);

/* net */
int ddnn_net_create(ddnn_fint comm, ddnn_handle *net);
int ddnn_net_set_options_prefix(ddnn_handle net, const char *prefix, ddnn_int len);
int ddnn_net_set_input_names(ddnn_handle net, ddnn_int n, const char *const names[]);
int ddnn_net_add_layer(ddnn_handle net, ddnn_handle l, const char *name, ddnn_int len, ddnn_int n, const char *const inputs[]);
int ddnn_net_set_output(ddnn_handle net, const char *name, ddnn_int len);
int ddnn_net_set_from_options(ddnn_handle net);
int ddnn_net_set_up(ddnn_handle net, ddnn_int n, const ddnn_handle xs[]);
int ddnn_net_forward(ddnn_handle net, ddnn_int n, const ddnn_handle xs[]);
int ddnn_net_backward(ddnn_handle net, ddnn_handle dy);
int ddnn_net_get_output(ddnn_handle net, ddnn_handle *y);
int ddnn_net_get_layer(ddnn_handle net, const char *name, ddnn_int len, ddnn_handle *l);
int ddnn_net_get_num_layers(ddnn_handle net, ddnn_int *n);
int ddnn_net_get_layer_output(ddnn_handle net, const char *name, ddnn_int len, ddnn_handle *y);
int ddnn_net_get_parameters(ddnn_handle net, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n);
int ddnn_net_get_num_parameters(ddnn_handle net, ddnn_int *count);
int ddnn_net_zero_gradients(ddnn_handle net);
int ddnn_net_initialize_parameters(ddnn_handle net, int64_t seed);
int ddnn_net_set_training(ddnn_handle net, int flg);
int ddnn_net_get_loss(ddnn_handle net, double *loss);
int ddnn_net_view(ddnn_handle net, ddnn_petsc_handle viewer);
int ddnn_net_destroy(ddnn_handle *net);

/* optimizer */
int ddnn_optimizer_create(ddnn_fint comm, ddnn_handle *opt);
int ddnn_optimizer_set_type(ddnn_handle opt, const char *type, ddnn_int len);
int ddnn_optimizer_set_options_prefix(ddnn_handle opt, const char *prefix, ddnn_int len);
int ddnn_optimizer_set_from_options(ddnn_handle opt);
int ddnn_optimizer_set_learning_rate(ddnn_handle opt, double lr);
int ddnn_optimizer_get_learning_rate(ddnn_handle opt, double *lr);
int ddnn_optimizer_set_momentum(ddnn_handle opt, double momentum, int nesterov);
int ddnn_optimizer_set_weight_decay(ddnn_handle opt, double wd);
int ddnn_optimizer_set_clip_norm(ddnn_handle opt, double clip);
int ddnn_optimizer_set_up(ddnn_handle opt, ddnn_int n, const ddnn_handle params[], const ddnn_handle grads[]);
int ddnn_optimizer_set_up_from_net(ddnn_handle opt, ddnn_handle net);
int ddnn_optimizer_set_up_from_layer(ddnn_handle opt, ddnn_handle l);
int ddnn_optimizer_step(ddnn_handle opt);
int ddnn_optimizer_end_epoch(ddnn_handle opt);
int ddnn_optimizer_get_step_count(ddnn_handle opt, ddnn_int *step, ddnn_int *epoch);
int ddnn_optimizer_view(ddnn_handle opt, ddnn_petsc_handle viewer);
int ddnn_optimizer_destroy(ddnn_handle *opt);

/* dataset and checkpoints */
int ddnn_dataset_create(ddnn_fint comm, ddnn_handle *ds);
int ddnn_dataset_set_file(ddnn_handle ds, const char *file, ddnn_int len);
int ddnn_dataset_set_fields(ddnn_handle ds, ddnn_int n, const char *const fields[]);
int ddnn_dataset_set_range(ddnn_handle ds, ddnn_int start, ddnn_int count);
int ddnn_dataset_set_options_prefix(ddnn_handle ds, const char *prefix, ddnn_int len);
int ddnn_dataset_set_from_options(ddnn_handle ds);
int ddnn_dataset_set_up(ddnn_handle ds);
int ddnn_dataset_get_num_samples(ddnn_handle ds, ddnn_int *n);
int ddnn_dataset_shuffle(ddnn_handle ds, int64_t seed);
int ddnn_dataset_read_batch(ddnn_handle ds, ddnn_int field, ddnn_int start, ddnn_int count, ddnn_handle t);
int ddnn_dataset_destroy(ddnn_handle *ds);
int ddnn_checkpoint_save(ddnn_handle net, ddnn_handle opt, const char *file, ddnn_int len);
int ddnn_checkpoint_load(ddnn_handle net, ddnn_handle opt, const char *file, ddnn_int len);

#ifdef __cplusplus
}
#endif
#endif
