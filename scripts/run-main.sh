#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the main job on 2 ranks:
# a PETSc Poisson solver makes the data (random coefficient fields on a DMDA) into HDF5, and a
# domain-decomposed U-Net surrogate trains on the DMDA's decomposition (share/ddnn/main_job.opts).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh
scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
mkdir -p build/main_job
cd build/main_job
mpiexec -n 2 "$root/build/tutorials/main_job" -options_file "$root/share/ddnn/main_job.opts" -regenerate "$@"
