#!/usr/bin/python3
"""
torch_baseline.py - PyTorch's fwd+bwd time for the layer cases of bench_layers, printed as JSON.

    OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T [OPENBLAS_CORETYPE=SkylakeX] \
    MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=100000000000 \
      /usr/bin/python3 bench/torch_baseline.py --threads T [--reps 10] [--cases conv2d_16x512,...] [--dtype float32|float64]

bench_layers runs it through popen with exactly this environment, in the same run as its own
measurements. Every case is float32 (or float64 with --dtype float64), torch.set_num_threads(T), training mode; one timed
iteration is y = layer(x); y.backward(dy) with x.requires_grad (so the input gradient is
computed, as ddnn's Backward with dx) and the gradients reset to None before it (zero_grad's
default). Spatial cases are timed with contiguous (NCHW/NCDHW) tensors, the layout PyTorch
users get by default, and with torch.channels_last(_3d), which can be faster for the oneDNN
convolution; bench_layers judges the goals against contiguous and shows the verdict
against channels_last in brackets. Times are medians, in seconds, after warm-up.

Output: {"torch": version, "threads": T, "reps": R,
         "times": {"<case>/<layout>": {"wall": seconds, "cpu": seconds}, ...}}
(cpu: the process CPU time, all threads; with 1 thread, the wall time less the time spent
waiting for a core on a shared machine.) Without torch it prints {"torch": null, "error": ...}
and exits with status 3; bench_layers checks for torch first and then prints
"PyTorch: not available".
"""
import argparse
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # bench_layers checks this first; say so in the same JSON shape
    print(json.dumps({"torch": None, "error": str(e)}))
    sys.exit(3)

# name: (kind, input shape, extra); shapes follow bench_layers.cxx
CASES = {
    "conv2d_16x512": ("conv", (1, 16, 512, 512), 16),
    "conv2d_64x56": ("conv", (8, 64, 56, 56), 64),
    "conv3d_8x64": ("conv", (1, 8, 64, 64, 64), 8),
    "conv1x1_24x32": ("conv1x1", (8, 24, 32, 32), 24),
    "conv1x1_96x32": ("conv1x1", (8, 96, 32, 32), 96),
    "conv1x1_256x28": ("conv1x1", (8, 256, 28, 28), 256),
    "affine_64x4096": ("affine", (64, 4096), 4096),
    "maxpool_16x512": ("maxpool", (1, 16, 512, 512), None),
    "maxpool_64x56": ("maxpool", (8, 64, 56, 56), None),
    "batchnorm_16x512": ("batchnorm", (1, 16, 512, 512), None),
    "upsample_16x256": ("upsample", (1, 16, 256, 256), None),
    "upsample_64x56": ("upsample", (8, 64, 56, 56), None),
    "relu_16x512": ("relu", (1, 16, 512, 512), None),
    "leakyrelu_16x512": ("leakyrelu", (1, 16, 512, 512), None),
    "tanh_16x512": ("tanh", (1, 16, 512, 512), None),
    "sigmoid_16x512": ("sigmoid", (1, 16, 512, 512), None),
    "silu_16x512": ("silu", (1, 16, 512, 512), None),
    "elu_16x512": ("elu", (1, 16, 512, 512), None),
    "gelu_16x512": ("gelu", (1, 16, 512, 512), None),
    "gelutanh_16x512": ("gelutanh", (1, 16, 512, 512), None),
    "softplus_16x512": ("softplus", (1, 16, 512, 512), None),
}


def make(kind, shape, extra):
    if kind == "conv":
        conv = nn.Conv2d if len(shape) == 4 else nn.Conv3d
        return conv(shape[1], extra, kernel_size=3, padding=1, bias=True)
    if kind == "conv1x1":
        return nn.Conv2d(shape[1], extra, kernel_size=1, bias=True)
    if kind == "affine":
        return nn.Linear(shape[1], extra, bias=True)
    if kind == "maxpool":
        return nn.MaxPool2d(2) if len(shape) == 4 else nn.MaxPool3d(2)
    if kind == "batchnorm":
        return nn.BatchNorm2d(shape[1]) if len(shape) == 4 else nn.BatchNorm3d(shape[1])
    if kind == "upsample":
        return nn.Upsample(scale_factor=2, mode="bilinear" if len(shape) == 4 else "trilinear", align_corners=False)
    if kind == "relu":
        return nn.ReLU()
    if kind == "leakyrelu":
        return nn.LeakyReLU(0.01)
    if kind == "tanh":
        return nn.Tanh()
    if kind == "sigmoid":
        return nn.Sigmoid()
    if kind == "silu":
        return nn.SiLU()
    if kind == "elu":
        return nn.ELU()
    if kind == "gelu":
        return nn.GELU()
    if kind == "gelutanh":
        return nn.GELU(approximate="tanh")
    if kind == "softplus":
        return nn.Softplus()
    raise ValueError(kind)


def time_case(name, layout, reps, warmup, min_time, dtype):
    kind, shape, extra = CASES[name]
    torch.manual_seed(0)
    layer = make(kind, shape, extra).train().to(dtype)
    x = torch.rand(shape, dtype=dtype) * 2 - 1
    if layout == "channels_last":
        mf = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        x = x.contiguous(memory_format=mf)
        layer = layer.to(memory_format=mf)
    x.requires_grad_(True)
    with torch.no_grad():
        y = layer(x)
    dy = torch.rand(y.shape, dtype=dtype) * 2 - 1
    if layout == "channels_last":
        dy = dy.contiguous(memory_format=mf)
    params = list(layer.parameters())

    def step():
        x.grad = None
        for p in params:
            p.grad = None
        out = layer(x)
        out.backward(dy)

    tw = 0.0
    for _ in range(warmup):
        t0 = time.perf_counter()
        step()
        tw = time.perf_counter() - t0
    if tw > 0:  # as bench_layers: more repetitions for fast cases, up to min_time seconds
        reps = int(max(reps, min(20 * reps, math.ceil(min_time / tw))))
    ts, cs = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    return {"wall": statistics.median(ts), "cpu": statistics.median(cs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--layouts", default="contiguous,channels_last")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "reps": a.reps, "dtype": a.dtype, "times": {}}
    for name in a.cases.split(","):
        if name not in CASES:
            print(f"unknown case {name}", file=sys.stderr)
            sys.exit(2)
        layouts = a.layouts.split(",") if len(CASES[name][1]) > 2 else ["contiguous"]
        for lay in layouts:
            out["times"][f"{name}/{lay}"] = time_case(name, lay, a.reps, a.warmup, a.min_time, dtype)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
