#!/usr/bin/env bash
# Configures and builds ddnn in ./build (Release). Extra arguments go to cmake's configure step.
# Where the CUDA toolkit is installed (/usr/local/cuda/bin/nvcc), the GPU backend is compiled too
# (-DDDNN_WITH_CUDA=ON, sm_90), so that CI always compiles the GPU code; pass -DDDNN_WITH_CUDA=OFF to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=()
if [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda=(-DDDNN_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@" > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
echo "build: ok (log in build.log)"
