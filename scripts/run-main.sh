#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the main job on 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Placeholder until the training job lands: a PETSc Poisson solve on 2 ranks, seen as a ddnn tensor.
mpiexec -n 2 build/tutorials/ex1_dmda_tensor -da_grid_x 65 -da_grid_y 65 -ksp_rtol 1e-10
