#!/usr/bin/env python3
"""Loads an HDF5 weights file written by ddnn's DDNetSaveWeights() (or torch_to_h5.py) into a
PyTorch module's state_dict: every dataset is the state_dict key of its name, converted to the
dtype of the module's tensor; a missing or unexpected key, or a shape that differs, is an error
(load_state_dict(strict=True)).

    python3 h5_to_torch.py weights.h5 state.pt [--names c1=conv1,f5=fc1]

writes the state_dict (a dict of tensors) with torch.save; --names renames module prefixes
(ddnn layer name = torch module name). From Python: load_state_dict(module, "weights.h5", {"c1": "conv1"}).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_to_h5 import parse_names, rename  # noqa: E402


def read_state_dict(file, names=None):
    """the file's datasets as a dict of torch tensors, keys renamed"""
    import h5py
    import numpy as np
    import torch
    sd = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            key = rename(name, names or {})
            if key in sd:
                raise SystemExit("h5_to_torch: two datasets map to key '%s'" % key)
            sd[key] = torch.from_numpy(np.array(obj[()]))

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
