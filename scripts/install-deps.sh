#!/usr/bin/env bash
# Installs the Debian packages ddnn needs, when missing. Idempotent; fast when all is present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config gfortran
      petsc-dev libopenmpi-dev openmpi-bin libhdf5-openmpi-dev
      libdnnl-dev libyaml-dev libopenblas-dev libfftw3-dev libgtest-dev googletest valgrind python3-h5py python3-numpy python3-torch hdf5-tools)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
