/*
  The binding ABI (c_api/ddnn_capi.h), called from C++ as a binding would: handles as intptr_t,
  communicators as MPI_Fint, (pointer, length) strings. Null, destroyed and wrong-class handles,
  PETSc's Fortran "not created" marker, out-of-range enumerations, short output buffers and Vecs
  of the wrong size give clear errors; the ABI computes the same numbers as the C API.
*/
#include "layertest.hpp"
#include "../c_api/ddnn_capi.h"
#include <cstring>

using namespace ddtest;

static ddnn_fint World()
{
  return (ddnn_fint)MPI_Comm_c2f(PETSC_COMM_WORLD);
}

/* the ABI's handle of a C object, and back */
template <class T>
static ddnn_handle H(T obj)
{
  return (ddnn_handle)obj;
}

static ddnn_handle Tensor2D(ddnn_int ny, ddnn_int nx)
{
  ddnn_handle part, t;
  ddnn_int    pshape[2] = {1, Size()}, shape[2] = {ny, nx};
  DDT(ddnn_partition_create_cartesian(World(), 2, pshape, -1, NULL, &part));
  DDT(ddnn_tensor_create_from_partition(part, DD_FLOAT64, 2, shape, &t));
  DDT(ddnn_partition_destroy(&part));
  return t;
}

TEST(CAPI, VersionAndInitialized)
{
  int v, flg;
  DDT(ddnn_capi_version(&v));
  EXPECT_EQ(v, DDNN_CAPI_VERSION);
  DDT(ddnn_initialized(&flg));
  EXPECT_EQ(flg, 1);
  DDT(ddnn_petsc_initialized(&flg));
  EXPECT_EQ(flg, 1);
}

TEST(CAPI, NullDestroyedAndWrongHandles)
{
  double      v;
  ddnn_handle t = Tensor2D(4, 6), l, none = 0;
  DDT(ddnn_layer_create(World(), &l));
  /* null */
  DD_EXPECT_ERROR(ddnn_tensor_norm(0, NORM_2, &v), PETSC_ERR_ARG_NULL, "Null DDTensor handle (argument 1)");
  DD_EXPECT_ERROR(ddnn_layer_forward(l, t, 0), PETSC_ERR_ARG_NULL, "Null DDTensor handle (argument 3)");
  DD_EXPECT_ERROR(ddnn_net_set_up(0, 0, NULL), PETSC_ERR_ARG_NULL, "Null DDNet handle");
  /* destroyed: the handle is zeroed, a second destroy does nothing, a later use is a null handle */
  ddnn_handle d = Tensor2D(3, 3);
  DDT(ddnn_tensor_destroy(&d));
  EXPECT_EQ(d, 0);
  DDT(ddnn_tensor_destroy(&d));
  DDT(ddnn_tensor_destroy(&none));
  DD_EXPECT_ERROR(ddnn_tensor_set(d, 1.0), PETSC_ERR_ARG_NULL, "Null DDTensor handle");
  /* another class: a layer, and a PETSc Vec, where a tensor is expected */
  DD_EXPECT_ERROR(ddnn_tensor_norm(l, NORM_2, &v), PETSC_ERR_ARG_WRONG, "a DDLayer where a DDTensor is expected");
  Vec x;
  DDT(VecCreateMPI(PETSC_COMM_WORLD, 5, PETSC_DETERMINE, &x));
  DD_EXPECT_ERROR(ddnn_tensor_copy(t, H(x)), PETSC_ERR_ARG_WRONG, "a Vec where a DDTensor is expected");
  DD_EXPECT_ERROR(ddnn_tensor_place_vec(t, t), PETSC_ERR_ARG_WRONG, "a DDTensor where a Vec is expected");
  /* PETSc's Fortran marker of an object not created (type(tVec) :: v before VecCreate) */
  DD_EXPECT_ERROR(ddnn_tensor_copy_from_vec(t, -2), PETSC_ERR_ARG_NULL, "Fortran marker");
  /* not an address at all */
  DD_EXPECT_ERROR(ddnn_tensor_norm(8, NORM_2, &v), PETSC_ERR_ARG_WRONG, "Invalid DDTensor handle");
  /* arrays of handles name the entry at fault */
  ddnn_handle xs[2] = {t, 0};
  DD_EXPECT_ERROR(ddnn_layer_set_up_multi(l, 2, xs), PETSC_ERR_ARG_NULL, "argument 3, entry 1");
  /* a null output pointer, an enumeration out of range, an invalid communicator */
  DD_EXPECT_ERROR(ddnn_tensor_norm(t, NORM_2, NULL), PETSC_ERR_ARG_NULL, "Null pointer for the output (argument 3)");
  DD_EXPECT_ERROR(ddnn_tensor_norm(t, 17, &v), PETSC_ERR_ARG_OUTOFRANGE, "Invalid NormType value 17");
  DD_EXPECT_ERROR(ddnn_tensor_set_data_type(t, 5), PETSC_ERR_ARG_OUTOFRANGE, "Invalid DDDataType value 5");
  DD_EXPECT_ERROR(ddnn_layer_pool_set_type(l, -1), PETSC_ERR_ARG_OUTOFRANGE, "Invalid DDPoolType");
  ddnn_handle bad;
  DD_EXPECT_ERROR(ddnn_tensor_create((ddnn_fint)MPI_Comm_c2f(MPI_COMM_NULL), &bad), PETSC_ERR_ARG_WRONG, "Invalid Fortran communicator");
  DDT(VecDestroy(&x));
  DDT(ddnn_layer_destroy(&l));
  DDT(ddnn_tensor_destroy(&t));
  EXPECT_EQ(l, 0);
  EXPECT_EQ(t, 0);
}

TEST(CAPI, WrongSizes)
{
  DM          da;
  ddnn_handle t, l;
  Vec         good, bad;
  PetscInt    nlocal;
  DDT(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 9, 7, PETSC_DECIDE, PETSC_DECIDE, 2, 1, NULL, NULL, &da));
  DDT(DMSetUp(da));
  DDT(ddnn_tensor_create_from_dmda(H(da), DD_FLOAT64, &t));
  DDT(DMCreateGlobalVector(da, &good));
  DDT(VecGetLocalSize(good, &nlocal));
  DDT(VecCreateMPI(PETSC_COMM_WORLD, nlocal + 1, PETSC_DETERMINE, &bad));
  /* a Vec of the wrong size: placed or copied, a size error (on every rank) */
  DD_EXPECT_ERROR(ddnn_tensor_place_vec(t, H(bad)), PETSC_ERR_ARG_SIZ, "Vec local size");
  DD_EXPECT_ERROR(ddnn_tensor_copy_from_vec(t, H(bad)), PETSC_ERR_ARG_SIZ, "Vec local size");
  DD_EXPECT_ERROR(ddnn_tensor_copy_to_vec(t, H(bad)), PETSC_ERR_ARG_SIZ, "Vec local size");
  DDT(ddnn_tensor_place_vec(t, H(good)));
  DDT(ddnn_tensor_reset_vec(t, H(good)));
  /* output arrays and strings too short */
  ddnn_int shape[4], small[2];
  DD_EXPECT_ERROR(ddnn_tensor_get_shape(t, 2, small), PETSC_ERR_ARG_SIZ, "has room for 2 entries; 4 are needed");
  DDT(ddnn_tensor_get_shape(t, 4, shape));
  EXPECT_EQ(shape[0], 1);
  EXPECT_EQ(shape[1], 2);
  EXPECT_EQ(shape[2], 7);
  EXPECT_EQ(shape[3], 9);
  DDT(ddnn_layer_create(World(), &l));
  DDT(ddnn_layer_set_type(l, "conv   ", 4)); /* exactly 4 characters: "conv" */
  char type[16];
  DD_EXPECT_ERROR(ddnn_layer_get_type(l, type, 3), PETSC_ERR_ARG_SIZ, "too small");
  DDT(ddnn_layer_get_type(l, type, sizeof(type)));
  EXPECT_STREQ(type, "conv");
  /* arrays of values: the count and the element type must be the tensor's */
  std::vector<double> vals(2 * 9 * 7, 1.0);
  std::vector<float>  fvals(2 * 9 * 7, 1.0f);
  DD_EXPECT_ERROR(ddnn_tensor_set_values_global(t, DD_FLOAT64, vals.data(), 5), PETSC_ERR_ARG_SIZ, "Array of 5 entries");
  DD_EXPECT_ERROR(ddnn_tensor_set_values_global(t, DD_FLOAT32, fvals.data(), (ddnn_int)fvals.size()), PETSC_ERR_ARG_WRONG, "Array of float32 values");
  DDT(ddnn_tensor_set_values_global(t, DD_FLOAT64, vals.data(), (ddnn_int)vals.size()));
  double sum;
  DDT(ddnn_tensor_sum(t, &sum));
  EXPECT_EQ(sum, 2 * 9 * 7);
  /* a scatter's or gather's array is read on its root only: an error there reaches every rank
     (the others used to wait in the collective, or return success) */
  const int  root   = Size() - 1;
  const bool onroot = Rank() == root;
  std::vector<double> back(vals.size(), 0.0);
  DD_EXPECT_ERROR(ddnn_tensor_scatter_from_root(t, root, DD_FLOAT64, vals.data(), onroot ? 5 : 0), PETSC_ERR_ARG_SIZ, "Array of 5 entries (argument 4) on rank");
  DD_EXPECT_ERROR(ddnn_tensor_scatter_from_root(t, root, DD_FLOAT32, fvals.data(), (ddnn_int)(onroot ? fvals.size() : 0)), PETSC_ERR_ARG_WRONG, "Array of float32 values");
  DD_EXPECT_ERROR(ddnn_tensor_gather_to_root(t, root, onroot ? DD_FLOAT32 : DD_FLOAT64, onroot ? (void *)fvals.data() : (void *)back.data(), (ddnn_int)back.size()), PETSC_ERR_ARG_WRONG, "Array of float32 values");
  DD_EXPECT_ERROR(ddnn_tensor_gather_to_root(t, root, DD_FLOAT64, onroot ? NULL : back.data(), (ddnn_int)back.size()), PETSC_ERR_ARG_NULL, "Null array of values");
  /* elsewhere the array is not read */
  DDT(ddnn_tensor_scatter_from_root(t, root, DD_FLOAT64, onroot ? vals.data() : NULL, onroot ? (ddnn_int)vals.size() : -1));
  DDT(ddnn_tensor_gather_to_root(t, root, DD_FLOAT64, onroot ? back.data() : NULL, onroot ? (ddnn_int)back.size() : 0));
  if (onroot) EXPECT_EQ(back, vals);
  /* more ranks than the communicator has (a length that would be read past the array) */
  {
    ddnn_handle p;
    ddnn_int    ps[2] = {1, 1};
    int         r0    = 0;
    DD_EXPECT_ERROR(ddnn_partition_create_cartesian(World(), 2, ps, ((ddnn_int)1 << 32) + 1, &r0, &p), PETSC_ERR_ARG_OUTOFRANGE, "ranks (argument 4) in a communicator of");
    DD_EXPECT_ERROR(ddnn_partition_create_cartesian(World(), 2, ps, 1, NULL, &p), PETSC_ERR_ARG_NULL, "Null array of ranks");
  }
  /* ownership sizes: as many as the partition's extent */
  ddnn_handle u, part;
  ddnn_int    pshape[4], lx[16] = {0};
  DDT(ddnn_tensor_get_partition(t, &part)); /* borrowed */
  DDT(ddnn_partition_get_shape(part, 4, pshape));
  DDT(ddnn_tensor_create(World(), &u));
  DDT(ddnn_tensor_set_partition(u, part));
  DDT(ddnn_tensor_set_shape(u, 4, shape));
  DD_EXPECT_ERROR(ddnn_tensor_set_ownership_ranges(u, 3, pshape[3] + 1, lx), PETSC_ERR_ARG_SIZ, "which the partition splits in");
  DDT(ddnn_tensor_destroy(&u));
  DDT(ddnn_layer_destroy(&l));
  DDT(ddnn_tensor_destroy(&t));
  DDT(VecDestroy(&good));
  DDT(VecDestroy(&bad));
  DDT(DMDestroy(&da));
}

/* a conv layer forward/backward and a net's loss: the ABI gives the C API's numbers, bit for bit */
TEST(CAPI, SameNumbersAsC)
{
  DM da;
  DDT(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 11, 8, PETSC_DECIDE, PETSC_DECIDE, 2, 1, NULL, NULL, &da));
  DDT(DMSetUp(da));
  DDT(PetscOptionsInsertString(NULL, "-t6c_layer_type conv -t6c_layer_conv_out_channels 3 -t6c_layer_conv_kernel 3 -t6c_layer_conv_padding 1"));
  /* C */
  DDLayer  cl;
  DDTensor cx, cdx, cy, cdy;
  DDT(DDTensorCreateFromDMDA(da, DD_FLOAT64, &cx));
  DDT(DDTensorSetRandomGlobal(cx, 5, -1, 1));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &cl));
  DDT(DDLayerSetOptionsPrefix(cl, "t6c_"));
  DDT(DDLayerSetFromOptions(cl));
  DDT(DDLayerSetUp(cl, cx));
  DDT(DDLayerGetOutput(cl, &cy));
  DDT(DDLayerForward(cl, cx, cy));
  DDT(DDTensorDuplicate(cy, &cdy));
  DDT(DDTensorCopy(cy, cdy));
  DDT(DDTensorDuplicate(cx, &cdx));
  DDT(DDLayerBackward(cl, cdy, cdx));
  /* ABI */
  ddnn_handle al, ax, adx, ay, ady, grads[2], params[2];
  ddnn_int    np;
  DDT(ddnn_tensor_create_from_dmda(H(da), DD_FLOAT64, &ax));
  DDT(ddnn_tensor_set_random_global(ax, 5, -1, 1));
  DDT(ddnn_layer_create(World(), &al));
  DDT(ddnn_layer_set_options_prefix(al, "t6c_", -1));
  DDT(ddnn_layer_set_from_options(al));
  DDT(ddnn_layer_set_up(al, ax));
  DDT(ddnn_layer_get_output(al, &ay));
  DDT(ddnn_layer_forward(al, ax, ay));
  DDT(ddnn_layer_create_output(al, &ady));
  DDT(ddnn_tensor_copy(ay, ady));
  DDT(ddnn_tensor_duplicate(ax, &adx));
  DDT(ddnn_layer_backward(al, ady, adx));
  EXPECT_EQ(GatherAll(cy), GatherAll((DDTensor)ay));
  EXPECT_EQ(GatherAll(cdx), GatherAll((DDTensor)adx));
  DDT(ddnn_layer_get_parameters(al, 0, NULL, NULL, &np));
  EXPECT_EQ(np, 2);
  DDT(ddnn_layer_get_parameters(al, 2, params, grads, &np));
  {
    PetscInt  n;
    DDTensor *cg;
    DDT(DDLayerGetGradients(cl, &n, &cg));
    for (PetscInt i = 0; i < n; i++) EXPECT_EQ(GatherAll(cg[i]), GatherAll((DDTensor)grads[i])) << "gradient " << i;
  }
  ddnn_int count;
  DDT(ddnn_layer_get_num_parameters(al, &count));
  EXPECT_EQ(count, 3 * 2 * 9 + 3);
  /* a net built through the ABI in code (names as C strings) equals the C one from options */
  DDT(PetscOptionsInsertString(NULL, "-t6n_net_inputs x,t -t6n_net_layers c1,loss -t6n_c1_layer_type conv -t6n_c1_layer_conv_out_channels 3 "
                                     "-t6n_c1_layer_conv_kernel 3 -t6n_c1_layer_conv_padding 1 -t6n_loss_layer_type loss -t6n_loss_layer_inputs c1,t"));
  DDNet    cnet;
  DDTensor ct, cin[2];
  DDT(DDTensorDuplicate(cy, &ct));
  DDT(DDTensorSetRandomGlobal(ct, 9, 0, 1));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &cnet));
  DDT(DDNetSetOptionsPrefix(cnet, "t6n_"));
  DDT(DDNetSetFromOptions(cnet));
  cin[0] = cx;
  cin[1] = ct;
  DDT(DDNetSetUp(cnet, 2, cin));
  DDT(DDNetForward(cnet, 2, cin));
  PetscReal closs;
  DDT(DDNetGetLoss(cnet, &closs));
  ddnn_handle anet, ac1, aloss;
  const char *inputs[] = {"x", "t"}, *lossin[] = {"c1", "t"};
  ddnn_int    k = 3, p = 1, nl;
  DDT(ddnn_net_create(World(), &anet));
  DDT(ddnn_net_set_input_names(anet, 2, inputs));
  DDT(ddnn_layer_create(World(), &ac1));
  DDT(ddnn_layer_set_type(ac1, DDLAYERCONV, -1));
  DDT(ddnn_layer_conv_set_output_channels(ac1, 3));
  DDT(ddnn_layer_conv_set_kernel(ac1, 1, &k));
  DDT(ddnn_layer_conv_set_padding(ac1, 1, &p));
  DDT(ddnn_layer_create(World(), &aloss));
  DDT(ddnn_layer_set_type(aloss, "loss", 4));
  DDT(ddnn_net_add_layer(anet, ac1, "c1", 2, 0, NULL));
  DDT(ddnn_net_add_layer(anet, aloss, "loss", -1, 2, lossin));
  DDT(ddnn_layer_destroy(&ac1));
  DDT(ddnn_layer_destroy(&aloss));
  ddnn_handle ain[2] = {H(cx), H(ct)};
  DDT(ddnn_net_set_up(anet, 2, ain));
  DDT(ddnn_net_forward(anet, 2, ain));
  double aloss_v;
  DDT(ddnn_net_get_loss(anet, &aloss_v));
  EXPECT_EQ(aloss_v, closs);
  DDT(ddnn_net_get_num_layers(anet, &nl));
  EXPECT_EQ(nl, 2);
  /* an optimizer set up from the net's parameters through the ABI: one step lowers the loss */
  ddnn_handle opt;
  DDT(ddnn_optimizer_create(World(), &opt));
  DDT(ddnn_optimizer_set_type(opt, "adam", -1));
  DDT(ddnn_optimizer_set_learning_rate(opt, 1e-2));
  DDT(ddnn_optimizer_set_up_from_net(opt, anet));
  for (int s = 0; s < 5; s++) {
    DDT(ddnn_net_zero_gradients(anet));
    DDT(ddnn_net_forward(anet, 2, ain));
    DDT(ddnn_net_backward(anet, 0));
    DDT(ddnn_optimizer_step(opt));
  }
  DDT(ddnn_net_forward(anet, 2, ain));
  DDT(ddnn_net_get_loss(anet, &aloss_v));
  EXPECT_LT(aloss_v, closs);
  ddnn_int step, epoch;
  DDT(ddnn_optimizer_get_step_count(opt, &step, &epoch));
  EXPECT_EQ(step, 5);
  DDT(ddnn_optimizer_destroy(&opt));
  DDT(ddnn_net_destroy(&anet));
  DDT(DDNetDestroy(&cnet));
  DDT(DDTensorDestroy(&ct));
  DDT(ddnn_tensor_destroy(&ax));
  DDT(ddnn_tensor_destroy(&adx));
  DDT(ddnn_tensor_destroy(&ady));
  DDT(ddnn_layer_destroy(&al));
  DDT(DDTensorDestroy(&cx));
  DDT(DDTensorDestroy(&cdx));
  DDT(DDTensorDestroy(&cdy));
  DDT(DDLayerDestroy(&cl));
  DDT(DMDestroy(&da));
}

/* primitives through the ABI: a halo exchange's adjoint test, viewers by handle and by Fortran constant */
TEST(CAPI, PrimitiveAndViewers)
{
  ddnn_handle t = Tensor2D(6, 4 * Size()), h;
  double      err;
  DDT(ddnn_primitive_create(World(), &h));
  DDT(ddnn_primitive_set_type(h, DDPRIMITIVEHALO, -1));
  DDT(ddnn_primitive_halo_set_kernel(h, 0, 3, 1, 1, 1, PETSC_DECIDE));
  DDT(ddnn_primitive_halo_set_kernel(h, 1, 3, 1, 1, 1, PETSC_DECIDE));
  DDT(ddnn_primitive_set_up(h, t, 0));
  DDT(ddnn_primitive_adjoint_test(h, 0, 0, 3, &err));
  EXPECT_LT(err, 1e-14);
  ddnn_int lo[2], hi[2];
  DDT(ddnn_tensor_get_halo(t, 2, lo, hi));
  EXPECT_EQ(lo[1], 1);
  EXPECT_EQ(hi[1], 1);
  char type[32];
  DDT(ddnn_primitive_get_type(h, type, sizeof(type)));
  EXPECT_STREQ(type, "halo");
  PetscViewer v;
  DDT(PetscViewerASCIIOpen(PETSC_COMM_WORLD, "/dev/null", &v));
  DDT(ddnn_primitive_view(h, H(v)));
  DDT(ddnn_tensor_view(t, H(v)));
  DDT(PetscViewerDestroy(&v));
  DD_EXPECT_ERROR(ddnn_tensor_view(t, -2), PETSC_ERR_ARG_NULL, "PetscViewer handle (argument 2) is PETSc's Fortran marker");
  DDT(ddnn_primitive_destroy(&h));
  DDT(ddnn_tensor_destroy(&t));
}
