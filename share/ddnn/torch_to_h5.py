#!/usr/bin/env python3
"""Writes a PyTorch module's state_dict (parameters and buffers: running statistics,
num_batches_tracked) to an HDF5 file that ddnn's DDNetLoadWeights() / -net_load_weights reads:
one dataset per tensor, named by its state_dict key, of the tensor's global shape and dtype
(num_batches_tracked stays a 0-d int64 dataset).

    python3 torch_to_h5.py model.pt weights.h5 [--names conv1=c1,fc1=f5]

model.pt holds a state_dict or a whole module (torch.save). --names renames module prefixes:
"conv1=c1" writes "conv1.weight" as "c1.weight" (a key equal to the prefix, or starting with
"prefix.", is renamed), so the file's names can be ddnn's layer names; the other way is ddnn's
-<layer>_layer_weights_name conv1. From Python: save_state_dict(module, "weights.h5", {"conv1": "c1"}).
"""
import argparse
import sys


def parse_names(text):
    """ "a=b,c=d" -> {"a": "b", "c": "d"} """
    names = {}
    for item in filter(None, (text or "").split(",")):
        if "=" not in item:
            raise SystemExit("--names: '%s' is not old=new" % item)
        old, new = item.split("=", 1)
        names[old.strip()] = new.strip()
    return names


def rename(key, names):
    """the key with its longest matching module prefix renamed"""
    best = None
    for old in names:
        if (key == old or key.startswith(old + ".")) and (best is None or len(old) > len(best)):
            best = old
    if best is None:
        return key
    new = names[best]
    rest = key[len(best):].lstrip(".")
    return new + ("." + rest if new and rest else rest)


def _array(key, t):
    """the tensor as a numpy array: bfloat16 (which numpy lacks) exactly as float32; other types numpy cannot hold are an error naming the key"""
    import torch
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as e:
        raise SystemExit("torch_to_h5: tensor '%s' has dtype %s, which HDF5 (through numpy) cannot hold: %s" % (key, t.dtype, e))


def save_state_dict(module, file, names=None):
    """writes module's state_dict (or a state_dict) to file; returns the dataset names written.
    Every name and tensor is checked first, and the file is written as file + ".tmp" and renamed at
    the end: an error leaves an existing file as it was"""
    import os
    import h5py
    sd = module.state_dict() if hasattr(module, "state_dict") else module
    names = names or {}
    written, arrays = {}, []
    for key, t in sd.items():
        name = rename(key, names)
        if name in written:
            raise SystemExit("torch_to_h5: '%s' and '%s' both map to dataset '%s'" % (written[name], key, name))
        written[name] = key
        arrays.append((name, _array(key, t)))
    tmp = file + ".tmp"
    try:
        with h5py.File(tmp, "w") as f:
            for name, a in arrays:
                f.create_dataset(name, data=a)
        os.replace(tmp, file)
    except BaseException:
        if os.path.isfile(tmp) and not os.path.islink(tmp):
            os.unlink(tmp)
        raise
    return list(written)


def main(argv):
    import torch
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="torch.save'd state_dict or module")
    p.add_argument("output", help="HDF5 file to write")
    p.add_argument("--names", default="", help="module renames old=new,...")
    a = p.parse_args(argv)
    obj = torch.load(a.model, map_location="cpu")
    for n in save_state_dict(obj, a.output, parse_names(a.names)):
        print(n)


if __name__ == "__main__":
    main(sys.argv[1:])
