"""torchtest.py - what the PyTorch interop tests of tests/torch share: their command line (as
tests/CMakeLists.txt passes it), a run of the weights driver (tests/torch/weights_driver.c) and
the comparison of ddnn's output with torch's. Importing it needs torch, h5py and numpy."""
import argparse
import os
import subprocess
import sys

import h5py
import numpy as np
import torch


def setup():
    """The arguments; share/ddnn on sys.path (h5_to_torch, torch_to_h5); torch on one thread; the
    work directory made. Returns the arguments and W(file), the file's path in the work directory."""
    p = argparse.ArgumentParser()
    p.add_argument("--driver", required=True)
    p.add_argument("--mpiexec", required=True)
    p.add_argument("--np-flag", default="-n")
    p.add_argument("--share", required=True)
    p.add_argument("--workdir", required=True)
    a = p.parse_args()
    sys.path.insert(0, a.share)
    torch.set_num_threads(1)
    os.makedirs(a.workdir, exist_ok=True)
    return a, lambda f: os.path.join(a.workdir, f)


def run_driver(a, common, out, np_, xpart, dtype, extra):
    """The weights driver on np_ ranks with the options common + extra, x on partition xpart; its output y (written to out)"""
    cmd = [a.mpiexec, a.np_flag, str(np_), a.driver] + common + ["-xpart", ",".join(map(str, xpart)), "-dtype", dtype, "-out", out] + extra
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        print(" ".join(cmd))
        print(r.stdout)
        sys.exit("weights_driver failed")
    with h5py.File(out, "r") as f:
        return np.array(f["y"])


def compare(what, y, ref, tol, width=48):
    """Prints max |y - ref| / max |ref| against tol; whether it holds"""
    err = np.abs(y - ref).max() / np.abs(ref).max()
    print("%-*s max |ddnn - torch| / max |torch| = %.2e (tolerance %.0e)" % (width, what, err, tol))
    return bool(err <= tol)
