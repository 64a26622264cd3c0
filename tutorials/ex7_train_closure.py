#!/usr/bin/env python3
"""Tutorial 7, the PyTorch side: trains the convolutional closure of tutorials/ex7_torch_closure.F90
offline in PyTorch and writes its state_dict for ddnn (share/ddnn/torch_to_h5.py's format).

The PDE is tutorial 4's: 2-D advection-diffusion u_t + a . grad u = nu Lap u on the unit square,
homogeneous Dirichlet, forward Euler with central differences on M x M interior points. The coarse
model knows only the diffusion; the closure C (conv 3x3 1 -> 8 with bias, tanh, conv 1x1 8 -> 1)
supplies the rest:

    u^{n+1} = u^n + dt nu Lap_h u^n + (dt/h) C(u^n).

Training data: snapshots of reference runs from random Gaussian bumps; the target of a snapshot u
is the missing term (h/dt) (reference step - coarse step) = -h a . grad_h u, divided by its RMS
for the training (the factor is folded into conv2 afterwards). Float64, Adam with a cosine schedule.

    python3 ex7_train_closure.py --weights ex7_closure.h5 [--reference ex7_reference.h5 -m 32 --steps 100]

writes the weights (datasets conv1.weight, conv1.bias, conv2.weight, conv2.bias: the module's own
names; ex7 maps them with -closure_c1_layer_weights_name conv1) and, with --reference, the state
after --steps steps of the corrected model computed in torch from tutorial 7's test bump (dataset
"u", shape (1, 1, M, M)), which ex7 compares with its own (-torch_reference).
With --run EX7 (and --mpiexec), it then runs ex7 at 1 and 2 ranks on these files: ex7 checks its
rollout against torch's (the test tutorial_ex7_torch_closure_from_torch).
Exits 77 (CTest's skip code) when torch or h5py is missing.
"""
import argparse
import os
import subprocess
import sys

try:
    import h5py  # noqa: F401
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("SKIP: PyTorch or h5py is not installed (%s); install python3-torch and python3-h5py to run this part" % e)
    sys.exit(77)

NU, AX, AY, DT = 0.01, 0.5, 0.25, 0.005


class Closure(nn.Module):
    """the closure network: ddnn layers c1 (conv 3x3, padding 1), a1 (tanh), c2 (conv 1x1)"""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 1, 1)

    def forward(self, u):
        return self.conv2(torch.tanh(self.conv1(u)))


def euler(u, h, advect):
    """one forward-Euler step of (N, 1, M, M) states, zero outside the grid (ex7's EulerStep); u[..., j, i] is (x_i, y_j)"""
    p = F.pad(u, (1, 1, 1, 1))
    c, w, e, s, n = p[..., 1:-1, 1:-1], p[..., 1:-1, :-2], p[..., 1:-1, 2:], p[..., :-2, 1:-1], p[..., 2:, 1:-1]
    lap = (w + e + s + n - 4 * c) / h**2
    adv = (AX * (e - w) + AY * (n - s)) / (2 * h)
    return u + DT * (NU * lap - advect * adv)


def bump(m, x0, y0, width=0.08):
    """ex7's Bump: grid point (i, j) at ((i + 1) h, (j + 1) h)"""
    h = 1.0 / (m + 1)
    t = torch.arange(1, m + 1, dtype=torch.float64) * h
    y, x = torch.meshgrid(t, t, indexing="ij")
    return torch.exp(-((x - x0) ** 2 + (y - y0) ** 2) / (2 * width**2)).reshape(1, 1, m, m)


def train(m, steps, seed):
    h = 1.0 / (m + 1)
    g = torch.Generator().manual_seed(seed)
    snaps = []
    for k in range(6):  # reference runs from random bumps, every 10th state a snapshot
        c = 0.25 + 0.5 * torch.rand(2, generator=g, dtype=torch.float64)
        u = bump(m, float(c[0]), float(c[1]), 0.05 + 0.05 * float(torch.rand(1, generator=g, dtype=torch.float64)))
        for n in range(200):
            if n % 10 == 0:
                snaps.append(u)
            u = euler(u, h, 1.0)
    u = torch.cat(snaps)
    r = (h / DT) * (euler(u, h, 1.0) - euler(u, h, 0.0))  # the missing term
    scale = float(r.pow(2).mean().sqrt())  # trained on r / scale (O(1)); folded into conv2 afterwards
    r = r / scale
    torch.manual_seed(seed)
    net = Closure().double()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, 1e-4)
    for s in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(net(u), r)
        loss.backward()
        opt.step()
        sched.step()
        if s == 0 or (s + 1) % (steps // 4) == 0:
            print("  torch training step %d: loss %.3e relative to the target's mean square" % (s + 1, loss.item()))
    with torch.no_grad():
        net.conv2.weight *= scale
        net.conv2.bias *= scale
    return net.eval()


def rollout(net, m, steps):
    """tutorial 7's test: the corrected model, the coarse model and the reference from bump (0.35, 0.3)"""
    h = 1.0 / (m + 1)
    u = v = w = bump(m, 0.35, 0.3)
    with torch.no_grad():
        for n in range(steps):
            u = euler(u, h, 0.0) + (DT / h) * net(u)
            v = euler(v, h, 1.0)
            w = euler(w, h, 0.0)
    return u, float((u - v).norm() / v.norm()), float((w - v).norm() / v.norm())


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", required=True, help="HDF5 weights file to write")
    p.add_argument("--reference", help="HDF5 file for torch's rollout of the corrected model")
    p.add_argument("-m", type=int, default=32, help="grid points per side of the rollout")
    p.add_argument("--steps", type=int, default=100, help="rollout steps")
    p.add_argument("--train-steps", type=int, default=800)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run", help="ex7 executable to run on the files (at 1 and 2 ranks)")
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--np-flag", default="-n")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "share", "ddnn"))
    import torch_to_h5  # noqa: E402

    net = train(32, a.train_steps, a.seed)
    names = torch_to_h5.save_state_dict(net, a.weights)
    print("wrote %s: %s" % (a.weights, ", ".join(names)))
    u, err, err0 = rollout(net, a.m, a.steps)
    print("torch rollout of %d steps on %d x %d: relative L2 error vs the reference %.3e (coarse model without closure %.3e)" % (a.steps, a.m, a.m, err, err0))
    if a.reference:
        import h5py
        with h5py.File(a.reference, "w") as f:
            f["u"] = u.numpy()
        print("wrote %s: dataset u (1, 1, %d, %d)" % (a.reference, a.m, a.m))
    if a.run:
        if not a.reference:
            sys.exit("--run needs --reference")
        for np_ in (1, 2):
            cmd = [a.mpiexec, a.np_flag, str(np_), a.run, "-closure_net_load_weights", a.weights, "-m", str(a.m), "-steps", str(a.steps),
                   "-torch_reference", a.reference, "-require_progress"]
            print(" ".join(cmd), flush=True)
            r = subprocess.run(cmd)
            if r.returncode:
                sys.exit("ex7 failed at %d ranks" % np_)
        print("PASS")


if __name__ == "__main__":
    main(sys.argv[1:])
