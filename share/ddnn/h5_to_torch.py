#!/usr/bin/env python3
"""Loads an HDF5 weights file written by ddnn's DDNetSaveWeights() (or torch_to_h5.py) into a
PyTorch module's state_dict: every dataset is the state_dict key of its name, converted to the
dtype of the module's tensor; a missing or unexpected key, or a shape that differs, is an error
(load_state_dict(strict=True)); a dataset whose content checksum (written by ddnn) does not match is
an error naming it.

    python3 h5_to_torch.py weights.h5 state.pt [--names c1=conv1,f5=fc1]

writes the state_dict (a dict of tensors) with torch.save; --names renames module prefixes
(ddnn layer name = torch module name). From Python: load_state_dict(module, "weights.h5", {"c1": "conv1"}).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_to_h5 import parse_names, rename  # noqa: E402


def _splitmix64(x):
    import numpy as np
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def content_checksum(a):
    """ddnn's content checksum of an array in its stored type (src/io/hdf5.cxx, HashBox()): the sum mod 2^64
    over the entries, in C order, of SplitMix64(SplitMix64(index ^ 0x6A09E667F3BCC909) ^ the entry's bits)"""
    import numpy as np
    a = np.ascontiguousarray(a).ravel()
    if a.dtype.itemsize == 4:
        bits = a.view(np.uint32).astype(np.uint64)
    elif a.dtype.itemsize == 8:
        bits = a.view(np.uint64)
    else:
        return None
    with np.errstate(over="ignore"):
        g = np.arange(a.size, dtype=np.uint64)
        h = _splitmix64(_splitmix64(g ^ np.uint64(0x6A09E667F3BCC909)) ^ bits)
        return int(h.sum(dtype=np.uint64))


def read_state_dict(file, names=None):
    """the file's datasets as a dict of torch tensors, keys renamed; a dataset with ddnn's content checksum
    (attribute "ddnn_checksum") must match it"""
    import h5py
    import numpy as np
    import torch
    sd = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            key = rename(name, names or {})
            if key in sd:
                raise SystemExit("h5_to_torch: two datasets map to key '%s'" % key)
            a = np.array(obj[()])
            if "ddnn_checksum" in obj.attrs:
                stored = int(np.asarray(obj.attrs["ddnn_checksum"]).astype(np.uint64))
                got = content_checksum(a)
                if got is not None and got != stored:
                    raise SystemExit("h5_to_torch: dataset '%s' of '%s' is corrupted: its content checksum is %016x, the stored one %016x" % (name, file, got, stored))
            sd[key] = torch.from_numpy(a)

    with h5py.File(file, "r") as f:
        f.visititems(visit)
    return sd


def load_state_dict(module, file, names=None):
    """loads file into module (strict); tensors take the dtype of the module's own"""
    sd = read_state_dict(file, names)
    own = module.state_dict()
    for k, v in sd.items():
        if k in own:
            if tuple(v.shape) != tuple(own[k].shape):
                raise SystemExit("h5_to_torch: dataset for '%s' has shape %s, the module's tensor %s" % (k, tuple(v.shape), tuple(own[k].shape)))
            sd[k] = v.to(own[k].dtype)
    module.load_state_dict(sd, strict=True)
    return module


def main(argv):
    import torch
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("weights", help="HDF5 file written by ddnn")
    p.add_argument("output", help="state_dict file to write (torch.save)")
    p.add_argument("--names", default="", help="module renames old=new,...")
    a = p.parse_args(argv)
    torch.save(read_state_dict(a.weights, parse_names(a.names)), a.output)


if __name__ == "__main__":
    main(sys.argv[1:])
