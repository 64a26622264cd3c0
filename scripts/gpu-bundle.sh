#!/usr/bin/env bash
# Packs a CUDA build of ddnn for a GPU machine that has CUDA, cuDNN and PyTorch but no PETSc, MPI,
# HDF5 or package registry (issue 11, sec. 6): the test and benchmark programs, libddnn, the
# shared-library closure they need (minus glibc and CUDA's own libraries, which the GPU machine
# provides: scripts/gpu-run.sh finds them there), Open MPI's launcher, plugin folder, help files
# and configuration, and scripts/gpu-run.sh. The result must stay under 64 MiB (checked).
#
#   scripts/gpu-bundle.sh [build-dir (build)] [output (ddnn-gpu.tar.xz)]
#
# Unpack and run on the GPU machine:  tar xJf ddnn-gpu.tar.xz && ddnn-gpu/gpu-run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$root/ddnn-gpu.tar.xz}
case $out in /*) ;; *) out=$PWD/$out ;; esac
limit=$((64 * 1024 * 1024))

[ -f "$build/libddnn.so" ] || { echo "gpu-bundle: no $build/libddnn.so (build first)" >&2; exit 1; }
grep -q '^DDNN_WITH_CUDA:BOOL=ON' "$build/CMakeCache.txt" || echo "gpu-bundle: warning: $build is not a CUDA build (-DDDNN_WITH_CUDA=ON)" >&2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b=$stage/ddnn-gpu
mkdir -p "$b/tests" "$b/bench" "$b/lib" "$b/bin" "$b/share" "$b/etc"

# programs
for f in "$build"/tests/test_* "$build"/bench/bench_*; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  case $f in */tests/*) cp "$f" "$b/tests/" ;; *) cp "$f" "$b/bench/" ;; esac
done
cp -P "$build"/libddnn.so* "$b/lib/"
[ -d "$root/share/ddnn" ] && cp -r "$root/share/ddnn" "$b/share/"
# the main job (its epoch on the GPU against the CPU) and the PyTorch twin of its network
mkdir -p "$b/tutorials"
[ -x "$build/tutorials/main_job" ] && cp "$build/tutorials/main_job" "$b/tutorials/"
cp "$root/bench/torch_network.py" "$b/bench/"

# Open MPI: launcher and daemon, MCA plugins (and PMIx's), help texts, configuration
ompi_pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
ompi_pkgdata=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
ompi_sysconf=$(ompi_info --path sysconfdir --parsable 2>/dev/null | sed -n 's/^path:sysconfdir://p')
[ -d "$ompi_pkglib" ] || { echo "gpu-bundle: Open MPI's plugin folder not found (ompi_info --path pkglibdir)" >&2; exit 1; }
for p in mpiexec orterun orted; do
  cp "$(readlink -f "$(command -v $p)")" "$b/bin/$p"
done
cp -r "$ompi_pkglib" "$b/lib/openmpi"
pmixdir=$(ls -d /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix 2>/dev/null || true)
[ -n "$pmixdir" ] && cp -r "$pmixdir" "$b/lib/pmix"
[ -d "$ompi_pkgdata" ] && cp -r "$ompi_pkgdata" "$b/share/openmpi"
[ -d "$ompi_sysconf" ] && cp "$ompi_sysconf"/openmpi-mca-params.conf "$b/etc/" 2>/dev/null || true

# the ldd closure of all of it, without glibc (the GPU machine's own) and CUDA (cudart, cuBLAS,
# cuDNN, NCCL, the driver: from the GPU machine's CUDA or PyTorch's nvidia-* packages)
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libresolv\.so|libcuda\.so|libcudart\.so|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink|libcufft|libcurand|libcusolver|libcusparse|libnvidia)'
declare -A seen=()
queue=()
while IFS= read -r f; do queue+=("$f"); done < <(find "$b/tests" "$b/bench" "$b/tutorials" "$b/bin" "$b/lib" -type f \( -perm -u+x -o -name '*.so*' \))
while [ ${#queue[@]} -gt 0 ]; do
  f=${queue[0]}
  queue=("${queue[@]:1}")
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $skip ]] && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    [ -f "$path" ] || continue # "not found" (e.g. an optional plugin dependency): left out
    [ -e "$b/lib/$name" ] || cp -L "$path" "$b/lib/$name"
    queue+=("$b/lib/$name")
  done < <(LD_LIBRARY_PATH="$b/lib:${LD_LIBRARY_PATH:-}" ldd "$f" 2>/dev/null || true)
done
# the C++ runtime goes to lib/fallback: gpu-run.sh uses the GPU machine's own when it is at least as new
mkdir -p "$b/lib/fallback"
for f in "$b"/lib/libstdc++.so* "$b"/lib/libgcc_s.so*; do [ -e "$f" ] && mv "$f" "$b/lib/fallback/"; done
strip --strip-unneeded "$b"/lib/*.so* "$b"/tests/* "$b"/bench/bench_* "$b"/tutorials/* 2>/dev/null || true

cp "$root/scripts/gpu-run.sh" "$b/gpu-run.sh"
(cd "$build" && git -C "$root" describe --always --dirty 2>/dev/null || echo unknown) > "$b/VERSION"

du -sh "$b" | awk '{print "gpu-bundle: unpacked " $1}'
tar -C "$stage" -cf - ddnn-gpu | xz -T0 -8 > "$out"
size=$(stat -c %s "$out")
echo "gpu-bundle: $out: $((size / 1024 / 1024)) MiB ($size bytes; limit $limit)"
if [ "$size" -ge "$limit" ]; then
  echo "gpu-bundle: the bundle is over 64 MiB" >&2
  exit 1
fi
