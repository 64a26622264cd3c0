# Copies the public headers to a scratch directory and appends the prototype of a new public
# function, DDTensorScratchShift(), to the scratch ddtensor.h: the input of test_06_generator.
#   cmake -DSRC=<include dir> -DDST=<scratch dir> -P scratch_headers.cmake
file(GLOB headers ${SRC}/*.h)
file(MAKE_DIRECTORY ${DST})
file(COPY ${headers} DESTINATION ${DST})
file(APPEND ${DST}/ddtensor.h "\nPETSC_EXTERN PetscErrorCode DDTensorScratchShift(DDTensor, PetscInt, PetscReal *);\n")
