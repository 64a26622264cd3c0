# Helpers to register MPI tests with CTest.
#
#   ddnn_add_mpi_test(NAME base TARGET exe NP 1 2 4 [ARGS ...] [LABELS ...] [TIMEOUT s])
#
# registers one test per rank count, named base_npN, run through mpiexec.  Tests
# run oversubscribed (2 cores here, up to 8 ranks) and as root where needed.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _ddnn_mpiexec_version ERROR_QUIET)
set(DDNN_TEST_ENV "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
if(_ddnn_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND DDNN_TEST_ENV
    "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    "OMPI_MCA_rmaps_base_oversubscribe=1"
    "OMPI_MCA_btl_vader_single_copy_mechanism=none")
endif()

function(ddnn_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TARGET;TIMEOUT" "NP;ARGS;LABELS;COMMAND" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  foreach(np IN LISTS T_NP)
    set(tname ${T_NAME}_np${np})
    if(T_COMMAND)
      set(cmd ${T_COMMAND})
    else()
      set(cmd $<TARGET_FILE:${T_TARGET}>)
    endif()
    add_test(NAME ${tname}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${DDNN_MPIEXEC_EXTRA_FLAGS} ${MPIEXEC_PREFLAGS}
              ${cmd} ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    set_tests_properties(${tname} PROPERTIES ENVIRONMENT "${DDNN_TEST_ENV}" PROCESSORS ${np}
      TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
  endforeach()
endfunction()

# ddnn_add_memcheck_test(NAME name TARGET exe NP n [ARGS ...]): the program under valgrind
# (definite leaks and invalid accesses are errors; Open MPI's own noise is suppressed).
find_program(DDNN_VALGRIND valgrind)
function(ddnn_add_memcheck_test)
  cmake_parse_arguments(T "" "NAME;TARGET;NP" "ARGS" ${ARGN})
  if(NOT DDNN_VALGRIND)
    return()
  endif()
  add_test(NAME ${T_NAME}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} ${DDNN_MPIEXEC_EXTRA_FLAGS}
            ${DDNN_VALGRIND} -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=3
            --suppressions=${PROJECT_SOURCE_DIR}/tests/valgrind.supp
            $<TARGET_FILE:${T_TARGET}> ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${DDNN_TEST_ENV}" PROCESSORS ${T_NP} TIMEOUT 900 LABELS memcheck)
endfunction()
