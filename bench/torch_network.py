#!/usr/bin/python3
"""
torch_network.py - the networks of bench_network.py written in PyTorch, timed per epoch (or step).

    OMP_NUM_THREADS=T /usr/bin/python3 bench/torch_network.py --net unet --threads T \
        [--dtype float32|float64] [--epochs E] [--data main_job_data.h5] [--ntest 64] [--batch 8] [--grid 32]
    OMP_NUM_THREADS=T /usr/bin/python3 bench/torch_network.py --net fno --threads T [...as unet]
    OMP_NUM_THREADS=T /usr/bin/python3 bench/torch_network.py --net lenet5 --threads T [--steps 200] [--batch 16]
    /usr/bin/python3 bench/torch_network.py --net unet --count   # parameter count only
    python3 bench/torch_network.py --net unet --device cuda [--tf32]  # on a GPU (the main job's -dd_backend /gpu/cuda)

unet: the main job's surrogate of share/ddnn/main_job.opts, layer for layer: conv 3x3 (padding 1,
bias) + ReLU twice per level, 2x2 max-pool, channels 16/32/64, bilinear x2 upsampling
(align_corners false, as -layer_upsample_mode linear), concatenation [upsampled, skip] along the
channels, a 1x1 output convolution, MSE loss (mean); Adam (lr 2e-3, betas 0.9/0.999, eps 1e-8)
with the cosine schedule (T_max 40, eta_min 5e-5) stepped once per epoch, as DDOptimizerEndEpoch.
The data are the main job's HDF5 file (datasets "input" and "target", shape (S, 1, n, n)): the
first S - ntest samples, shuffled every epoch, batches of --batch, the last partial batch dropped
(DDNetTrainEpoch). Without --data (or when the file is missing), random data of the same shape.
One epoch is timed like DDNetTrainEpoch's seconds: batch fetch (indexing the tensors in memory),
forward, zero_grad, backward, step; the batch fetches alone are reported as "data". With --device
cuda the model lives on the GPU and every batch is copied there when fetched (as the main job copies
its host batches to device tensors), cuDNN picks its algorithms by timing them (cudnn.benchmark, as
ddnn's set-up does), and float32 convolutions and matrix products are strict float32 unless --tf32
(ddnn: -dd_cuda_tf32); the epoch's time ends with a device synchronization (loss.item() per step).

fno: the main job's Fourier neural operator of share/ddnn/main_job_fno.opts (593,937 parameters), layer
for layer: a 1x1 lifting convolution to 24 channels, four Fourier layers (Li et al. 2021's
SpectralConv2d: torch.fft.rfft2, the modes [:8, :8] and [-8:, :8] mixed by complex weights (Ci, Co, 8, 8),
irfft2; plus a 1x1 convolution of the same input; the sum, GELU (erf) after the first three), a 1x1
projection to 64 channels, GELU, a 1x1 output convolution, MSE; data, optimizer and epochs as unet.

lenet5: share/ddnn/lenet5.opts (conv 5x5 -> 6, tanh, avg-pool 2, conv 5x5 -> 16, tanh, avg-pool 2,
flatten, affine 120/84/10 with tanh between, cross-entropy), Adam lr 2e-3, batch 16 of 1x32x32;
a fresh random mini-batch every step (ex6_example_nets computes gratings + noise; here torch.rand
and random labels, of the same shape); --steps steps timed as ex6_example_nets times them, and the
draws of the mini-batches (torch.rand, torch.randint) timed separately as "data", as
ex6_example_nets times its MakeBatch.

Output, one JSON line: {"net", "dtype", "threads", "params", "times": [seconds per epoch, or per
--steps steps, data included], "data": [the seconds of those spent making or fetching the
mini-batches], "loss": [...]}.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class UNet(nn.Module):
    """share/ddnn/main_job.opts: c1,a1,c2,a2,p1,c3,a3,c4,a4,p2,c5,a5,c6,a6,u2,k2,c7,a7,u1,k1,c8,a8,out"""

    def __init__(self):
        super().__init__()
        c = lambda i, o, k=3: nn.Conv2d(i, o, k, padding=k // 2, bias=True)
        self.c1, self.c2 = c(1, 16), c(16, 16)
        self.c3, self.c4 = c(16, 32), c(32, 32)
        self.c5, self.c6 = c(32, 64), c(64, 64)
        self.c7 = c(64 + 32, 32)  # k2 = concat(u2, a4)
        self.c8 = c(32 + 16, 16)  # k1 = concat(u1, a2)
        self.out = c(16, 1, 1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

    def forward(self, x):
        a2 = F.relu(self.c2(F.relu(self.c1(x))))
        a4 = F.relu(self.c4(F.relu(self.c3(F.max_pool2d(a2, 2)))))
        a6 = F.relu(self.c6(F.relu(self.c5(F.max_pool2d(a4, 2)))))
        a7 = F.relu(self.c7(torch.cat([self.up(a6), a4], 1)))
        a8 = F.relu(self.c8(torch.cat([self.up(a7), a2], 1)))
        return self.out(a8)


class LeNet5(nn.Module):
    """share/ddnn/lenet5.opts: 61,706 parameters"""

    def __init__(self):
        super().__init__()
        self.c1, self.c3 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        self.f5, self.f6, self.out = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2)
        x = F.avg_pool2d(torch.tanh(self.c3(x)), 2)
        x = torch.flatten(x, 1)
        return self.out(torch.tanh(self.f6(torch.tanh(self.f5(x)))))


class SpectralConv2d(nn.Module):
    """Li et al. 2021's Fourier layer: the kept modes of rfft2 (two corners along H, the first m2 along W) times complex weights"""

    def __init__(self, ci, co, m1, m2, cdtype):
        super().__init__()
        self.m1, self.m2, self.co = m1, m2, co
        scale = 1 / (ci * co)
        self.w1 = nn.Parameter(scale * torch.rand(ci, co, m1, m2, dtype=cdtype))
        self.w2 = nn.Parameter(scale * torch.rand(ci, co, m1, m2, dtype=cdtype))

    def forward(self, x):
        N, _, H, W = x.shape
        xf = torch.fft.rfft2(x)
        out = torch.zeros(N, self.co, H, W // 2 + 1, dtype=xf.dtype, device=x.device)
        out[:, :, :self.m1, :self.m2] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :self.m1, :self.m2], self.w1)
        out[:, :, -self.m1:, :self.m2] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -self.m1:, :self.m2], self.w2)
        return torch.fft.irfft2(out, s=(H, W))


class FNO(nn.Module):
    """share/ddnn/main_job_fno.opts: lift, (s_i, w_i, add_i, g_i) x 4 (no GELU after the last), proj, gp, out"""

    def __init__(self, dtype=torch.float32, width=24, modes=8):
        super().__init__()
        cdtype = torch.cfloat if dtype == torch.float32 else torch.cdouble
        self.lift = nn.Conv2d(1, width, 1, dtype=dtype)
        self.s = nn.ModuleList([SpectralConv2d(width, width, modes, modes, cdtype) for _ in range(4)])
        self.w = nn.ModuleList([nn.Conv2d(width, width, 1, dtype=dtype) for _ in range(4)])
        self.proj, self.out = nn.Conv2d(width, 64, 1, dtype=dtype), nn.Conv2d(64, 1, 1, dtype=dtype)

    def forward(self, x):
        x = self.lift(x)
        for i in range(4):
            x = self.s[i](x) + self.w[i](x)
            if i < 3:
                x = F.gelu(x)
        return self.out(F.gelu(self.proj(x)))


def nparams(m):
    # a complex parameter counts its real and imaginary parts, as ddnn stores them
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in m.parameters())
    return sum(p.numel() for p in m.parameters())


def unet_data(args, dtype):
    if args.data and os.path.exists(args.data):
        import h5py

        with h5py.File(args.data, "r") as f:
            x, y = f["input"][()], f["target"][()]
        S = x.shape[0] - args.ntest
        return torch.tensor(x[:S], dtype=dtype), torch.tensor(y[:S], dtype=dtype)
    g = torch.Generator().manual_seed(0)
    S = args.nsamples - args.ntest
    return (torch.rand((S, 1, args.grid, args.grid), generator=g, dtype=dtype),
            torch.rand((S, 1, args.grid, args.grid), generator=g, dtype=dtype))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--net", choices=["unet", "fno", "lenet5"], default="unet")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--epochs", type=int, default=3, help="unet, fno: timed epochs (after one warm-up epoch)")
    ap.add_argument("--steps", type=int, default=200, help="lenet5: steps per timed run")
    ap.add_argument("--runs", type=int, default=3, help="lenet5: timed runs of --steps steps (after a warm-up run)")
    ap.add_argument("--data", default="")
    ap.add_argument("--nsamples", type=int, default=576)
    ap.add_argument("--ntest", type=int, default=64)
    ap.add_argument("--grid", type=int, default=32)
    ap.add_argument("--batch", type=int, default=0, help="default: 8 (unet), 16 (lenet5)")
    ap.add_argument("--count", action="store_true", help="print the parameter count and exit")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda")
    ap.add_argument("--tf32", action="store_true", help="cuda: let float32 convolutions and products use TF32 tensor cores")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
    dtype = torch.float32 if args.dtype == "float32" else torch.float64
    torch.manual_seed(0)
    if args.net == "fno":  # built in its type: Module.to(dtype) would cast the complex weights to real
        model = FNO(dtype).to(dev).train()
    else:
        model = (UNet() if args.net == "unet" else LeNet5()).to(dtype).to(dev).train()
    if args.count:
        print(json.dumps({"net": args.net, "params": nparams(model)}))
        return
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    times, data, losses = [], [], []
    if args.net in ("unet", "fno"):
        B = args.batch or 8
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=40, eta_min=5e-5)
        X, Y = unet_data(args, dtype)
        nb = X.shape[0] // B
        for e in range(args.epochs + 1):  # epoch 0: warm-up
            perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(17 + e))
            tot, td = 0.0, 0.0
            t0 = time.perf_counter()
            for b in range(nb):
                t1 = time.perf_counter()
                idx = perm[b * B:(b + 1) * B]
                x, y = X[idx].to(dev), Y[idx].to(dev)
                td += time.perf_counter() - t1
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot += loss.item()
            sched.step()
            t = time.perf_counter() - t0
            if e:
                times.append(t)
                data.append(td)
                losses.append(tot / nb)
    else:
        B = args.batch or 16
        for r in range(args.runs + 1):
            tot, td = 0.0, 0.0
            t0 = time.perf_counter()
            for s in range(args.steps):
                t1 = time.perf_counter()
                x = (torch.rand((B, 1, 32, 32), dtype=dtype) * 2 - 1).to(dev)
                lab = torch.randint(0, 10, (B,)).to(dev)
                td += time.perf_counter() - t1
                loss = F.cross_entropy(model(x), lab)
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot += loss.item()
            t = time.perf_counter() - t0
            if r:
                times.append(t)
                data.append(td)
                losses.append(tot / args.steps)
    print(json.dumps({"net": args.net, "dtype": args.dtype, "threads": args.threads, "device": args.device, "tf32": args.tf32, "params": nparams(model),
                      "times": times, "data": data, "loss": losses}))


if __name__ == "__main__":
    sys.exit(main())
