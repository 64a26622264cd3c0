#!/usr/bin/env bash
# Runs ddnn's GPU tests (and the CPU backend tests as a sanity check) from a bundle made by
# scripts/gpu-bundle.sh, on a machine with a CUDA device, CUDA and/or PyTorch, but no PETSc, MPI or
# HDF5 (issue 11, sec. 6).
#
#   tar xJf ddnn-gpu.tar.xz && ddnn-gpu/gpu-run.sh [results-dir (ddnn-gpu-results)]
#   scripts/gpu-run.sh ddnn-gpu.tar.xz [results-dir]      (unpacks it first)
#
# CUDA's libraries (cudart, cuBLAS; cuDNN and NCCL when the build uses them) come from, in order:
# $DDNN_CUDA_LIBS, PyTorch's nvidia-* Python packages (found with python3 -c 'import nvidia.cublas'
# and friends), /usr/local/cuda/lib64 and /usr/local/cuda/lib. The bundle's own libraries (PETSc,
# Open MPI, HDF5, ...) come first. Open MPI is relocated into the bundle with OPAL_* variables.
set -uo pipefail
if [ $# -ge 1 ] && [ -f "$1" ] && [[ $1 == *.tar.xz ]]; then
  dest=$(mktemp -d)
  tar -C "$dest" -xJf "$1"
  shift
  exec "$dest/ddnn-gpu/gpu-run.sh" "$@"
fi
b=$(cd "$(dirname "$0")" && pwd)
results=${1:-$PWD/ddnn-gpu-results}
mkdir -p "$results"
log=$results/summary.txt
: > "$log"
say() { echo "$@" | tee -a "$log"; }

# CUDA libraries: PyTorch's nvidia packages (nvidia/<pkg>/lib, or nvidia/cu13/lib in newer wheels)
cudalibs=()
[ -n "${DDNN_CUDA_LIBS:-}" ] && cudalibs+=("$DDNN_CUDA_LIBS")
for py in python3 python; do
  command -v $py > /dev/null || continue
  while IFS= read -r d; do [ -n "$d" ] && cudalibs+=("$d"); done < <($py - << 'EOF' 2>/dev/null
import importlib, os
seen = []
for m in ("nvidia.cu13", "nvidia.cuda_runtime", "nvidia.cublas", "nvidia.cufft", "nvidia.cudnn", "nvidia.nccl", "nvidia.cuda_nvrtc", "nvidia.nvjitlink"):
    try:
        mod = importlib.import_module(m)
    except Exception:
        continue
    for p in list(getattr(mod, "__path__", [])):
        d = os.path.join(p, "lib")
        if os.path.isdir(d) and d not in seen:
            seen.append(d)
for d in seen:
    print(d)
EOF
)
  break
done
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && cudalibs+=("$d"); done
cudapath=$(IFS=:; echo "${cudalibs[*]:-}")
# the bundle's C++ runtime only where the machine's own lacks the newest symbol version it needs
need=$(strings "$b"/lib/fallback/libstdc++.so.6 2>/dev/null | grep -E '^GLIBCXX_[0-9.]+$' | sort -V | tail -1)
have=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
fallback=$b/lib/fallback
if [ -n "$need" ] && [ -n "$have" ] && grep -qa "$need" "$have"; then fallback=; fi
export LD_LIBRARY_PATH="$b/lib${cudapath:+:$cudapath}${fallback:+:$fallback}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Open MPI from the bundle
export OPAL_PREFIX=$b OPAL_EXEC_PREFIX=$b OPAL_BINDIR=$b/bin OPAL_LIBDIR=$b/lib OPAL_PKGLIBDIR=$b/lib/openmpi
export OPAL_DATAROOTDIR=$b/share OPAL_DATADIR=$b/share OPAL_PKGDATADIR=$b/share/openmpi OPAL_SYSCONFDIR=$b/etc
export OMPI_MCA_mca_base_component_path=$b/lib/openmpi PMIX_MCA_mca_base_component_path=$b/lib/pmix
export OMPI_MCA_mca_base_param_files=$b/etc/openmpi-mca-params.conf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export PATH=$b/bin:$PATH

say "ddnn GPU run: bundle $(cat "$b/VERSION" 2>/dev/null), $(date -u)"
say "CUDA library folders: ${cudapath:-none found}"
if [ -n "$fallback" ]; then say "C++ runtime: the bundle's ($fallback)"; else say "C++ runtime: the machine's own ($have has $need)"; fi
command -v nvidia-smi > /dev/null && nvidia-smi -L 2>&1 | tee -a "$log"
missing=$(ldd "$b/lib/libddnn.so" | grep 'not found' || true)
if [ -n "$missing" ]; then
  say "libddnn cannot load: these libraries were not found (set DDNN_CUDA_LIBS to their folder):"
  say "$missing"
  exit 2
fi

fail=0
run() { # name, command...
  local name=$1
  shift
  say "== $name: $*"
  local t0=$SECONDS
  if "$@" > "$results/$name.txt" 2>&1; then say "   passed ($((SECONDS - t0)) s)"; else
    say "   FAILED (exit $?, $((SECONDS - t0)) s): see $results/$name.txt"
    fail=1
  fi
  grep -E '^\[  (SKIPPED|FAILED) \]|no CUDA device' "$results/$name.txt" | sort -u | sed 's/^/   /' | tee -a "$log"
}
cd "$results"
# the GPU suite: one rank (MPI singleton), then two ranks sharing the device
OMPI_MCA_ess_singleton_isolated=1 run test_13_gpu_np1 "$b/tests/test_13_gpu"
run test_13_gpu_np2 mpiexec -n 2 "$b/tests/test_13_gpu"
# primitives on device tensors at 3 ranks sharing the device (unbalanced pieces, an empty one)
run test_13_gpu_np3 mpiexec -n 3 "$b/tests/test_13_gpu" --gtest_filter='*OnDevice*:Gpu.Copy*'
# the kernel-table entries of /gpu/cuda against /cpu/ref (normalization, optimizers, interpolation, reductions)
[ -x "$b/tests/test_21_gpu_kernels" ] && OMPI_MCA_ess_singleton_isolated=1 run test_21_gpu_kernels "$b/tests/test_21_gpu_kernels"
# the backend registry and tensors on the CPU from the same build (sanity of the bundle; DDNN_GPU_CPU_SANITY=0 skips them)
if [ "${DDNN_GPU_CPU_SANITY:-1}" != 0 ]; then
  OMPI_MCA_ess_singleton_isolated=1 run test_08_backends_np1 "$b/tests/test_08_backends"
  OMPI_MCA_ess_singleton_isolated=1 run test_02_tensor_np1 "$b/tests/test_02_tensor"
fi
# benchmarks on the device (DDNN_GPU_BENCH=0 skips them): the local FFT kernels, cuFFT against FFTW
# (DDNN_GPU_BENCHES: which of spectral, conv, halo; all by default)
benches=" ${DDNN_GPU_BENCHES:-spectral conv halo mainjob} "
if [ "${DDNN_GPU_BENCH:-1}" != 0 ]; then
  if [[ $benches == *" spectral "* ]]; then
    OMPI_MCA_ess_singleton_isolated=1 run bench_spectral_kernels "$b/bench/bench_spectral" -kernels 1 -torch 0 -reps 20
    grep -A20 'local FFT kernels' "$results/bench_spectral_kernels.txt" | tee -a "$log"
  fi
  if [[ $benches == *" conv "* ]]; then
    # cuDNN convolutions against PyTorch's on this device (python3 with torch: PyTorch's own)
    # (PyTorch without the bundle's libraries on its path)
    DDNN_BENCH_PYTHON=${DDNN_BENCH_PYTHON:-env -u LD_LIBRARY_PATH python3} OMPI_MCA_ess_singleton_isolated=1 run bench_gpu_conv "$b/bench/bench_gpu_conv" -reps 20
    tee -a "$log" < "$results/bench_gpu_conv.txt"
  fi
  if [[ $benches == *" mainjob "* ]] && [ -x "$b/tutorials/main_job" ]; then
    # the main job (share/ddnn/main_job.opts, float32) trained on the GPU (-dd_backend /gpu/cuda) and on
    # this machine's CPU (1 rank, the default backend), the same data; then a larger grid
    # (DDNN_GPU_MJ_GRID, default 128); and the network in PyTorch on the same GPU (bench/torch_network.py)
    mj=$results/mainjob
    mkdir -p "$mj"
    pushd "$mj" > /dev/null
    opts=(-options_file "$b/share/ddnn/main_job.opts" -float32 -epochs ${DDNN_GPU_MJ_EPOCHS:-3})
    torch=(env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 python3 "$b/bench/torch_network.py" --net unet --device cuda --epochs ${DDNN_GPU_MJ_EPOCHS:-3} --ntest 32)
    OMPI_MCA_ess_singleton_isolated=1 run main_job_gpu_g32 "$b/tutorials/main_job" "${opts[@]}" -regenerate -dd_backend /gpu/cuda -log_view :$results/main_job_gpu_g32_logview.txt
    OMPI_MCA_ess_singleton_isolated=1 run main_job_cpu_g32 "$b/tutorials/main_job" "${opts[@]}"
    run torch_unet_gpu_g32 "${torch[@]}" --data main_job_data.h5 --grid 32
    g=${DDNN_GPU_MJ_GRID:-128}
    big=(-grid $g -data main_job_data_g$g.h5 -checkpoint main_job_checkpoint_g$g.h5)
    OMPI_MCA_ess_singleton_isolated=1 run main_job_gpu_g$g "$b/tutorials/main_job" "${opts[@]}" "${big[@]}" -regenerate -dd_backend /gpu/cuda -log_view :$results/main_job_gpu_g${g}_logview.txt
    run torch_unet_gpu_g$g "${torch[@]}" --data main_job_data_g$g.h5 --grid $g
    OMPI_MCA_ess_singleton_isolated=1 run main_job_cpu_g$g "$b/tutorials/main_job" "${opts[@]}" "${big[@]}"
    # 2 ranks sharing the GPU (DDNN_GPU_MJ_NP2=0 skips it)
    [ "${DDNN_GPU_MJ_NP2:-1}" != 0 ] && run main_job_gpu_g${g}_np2 mpiexec -n 2 "$b/tutorials/main_job" "${opts[@]}" "${big[@]}" -dd_backend /gpu/cuda
    popd > /dev/null
    for f in "$results"/main_job_*g*.txt "$results"/torch_unet_*.txt; do
      case $f in *_logview.txt) continue ;; esac
      [ -f "$f" ] || continue
      echo "--- $(basename "$f")"; grep -E '^epoch|held-out relative|"times"|ERROR' "$f" | head -12
    done | tee -a "$log"
  fi
  if [[ $benches == *" halo "* ]]; then
    # the halo exchange of device tensors against a raw staged copy of the same bytes, 1 and 2 ranks sharing the device
    OMPI_MCA_ess_singleton_isolated=1 run bench_gpu_halo_np1 "$b/bench/bench_gpu_halo" -reps 50
    run bench_gpu_halo_np2 mpiexec -n 2 "$b/bench/bench_gpu_halo" -reps 50
    cat "$results/bench_gpu_halo_np1.txt" "$results/bench_gpu_halo_np2.txt" | tee -a "$log"
    # DDNN_GPU_MPS=1: again under CUDA's Multi-Process Service (one device context for the ranks), where its daemon is installed
    if [ "${DDNN_GPU_MPS:-0}" != 0 ] && command -v nvidia-cuda-mps-control > /dev/null; then
      export CUDA_MPS_PIPE_DIRECTORY=$results/mps-pipe CUDA_MPS_LOG_DIRECTORY=$results/mps-log
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      if nvidia-cuda-mps-control -d; then
        run bench_gpu_halo_np2_mps mpiexec -n 2 "$b/bench/bench_gpu_halo" -reps 50
        tee -a "$log" < "$results/bench_gpu_halo_np2_mps.txt"
        echo quit | nvidia-cuda-mps-control
      else say "   the MPS daemon did not start"; fi
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  fi
fi
# the device tests under compute-sanitizer's memcheck (DDNN_GPU_SANITIZE=1, where it is installed)
if [ "${DDNN_GPU_SANITIZE:-0}" != 0 ] && command -v compute-sanitizer > /dev/null; then
  OMPI_MCA_ess_singleton_isolated=1 run test_13_gpu_memcheck timeout ${DDNN_GPU_SANITIZE_TIMEOUT:-300} compute-sanitizer --tool memcheck --error-exitcode 9 "$b/tests/test_13_gpu" --gtest_filter="${DDNN_GPU_SANITIZE_FILTER:-Gpu.Conv*:Gpu.Pool*:Gpu.Pack*:Gpu.Vector*:Gpu.Gemm*:Gpu.Fft*:Gpu.*OnDevice*:Gpu.Copy*}"
  grep -E 'ERROR SUMMARY' "$results/test_13_gpu_memcheck.txt" | tee -a "$log"
fi
# everything in one archive too (a caller that fetches few files gets them all; data files left out)
tar -C "$(dirname "$results")" --exclude='*.h5' -czf "$results.tar.gz" "$(basename "$results")" 2> /dev/null && say "archive: $results.tar.gz"
say "results in $results"
exit $fail
