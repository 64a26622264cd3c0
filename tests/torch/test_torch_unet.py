#!/usr/bin/env python3
"""The main job's U-Net (share/ddnn/main_job.opts, tutorials/main_job.c) between PyTorch and ddnn
(issue 12, "Weights in and out"), driven by CTest (test_15_torch_unet).

 1. MainJobUNet below is share/ddnn/main_job.opts written in torch, module for layer: convs
    c1..c8 and out (3x3, padding 1; out 1x1), ReLU (ddnn's default activation), 2x2 max pooling,
    bilinear upsampling by 2 (align_corners false, ddnn's default), skip concatenations
    [upsampled, encoder] along the channels (-k2_layer_inputs u2,a4). It has no batch
    normalization, so its state_dict is the 18 conv weights and biases.
 2. Trained a few Adam steps in torch on random (log kappa, u) pairs, its state_dict exported by
    share/ddnn/torch_to_h5.py (command line) and loaded by ddnn (tests/torch/weights_driver.c with
    -options_file main_job.opts -net_load_weights) on 1-4 ranks, batch and spatial partitions
    (balanced and not: 32 over 3 ranks): ddnn's output equals torch's (eval mode; float32:
    relative 1e-5 of the largest; float64 against torch in float64: 1e-12).
 3. ddnn trains it 3 steps on 2 and on 4 ranks (the options' Adam, MSE loss against the target)
    and saves it (DDNetSaveWeights()); share/ddnn/h5_to_torch.py loads the file into MainJobUNet:
    torch's output equals ddnn's, and differs from the torch-trained network's.
Exits 77 (CTest SKIP_RETURN_CODE) when torch or h5py cannot be imported.
"""
import os
import subprocess
import sys

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torchtest import compare, run_driver, setup
except ImportError as e:
    print("SKIP: PyTorch or h5py is not installed (%s); install python3-torch and python3-h5py to run this test" % e)
    sys.exit(77)


class MainJobUNet(nn.Module):
    """share/ddnn/main_job.opts: a 2-level U-Net, 1 -> 16 -> 32 -> 64 channels, on (N, 1, G, G)"""

    def __init__(self):
        super().__init__()
        conv = lambda ci, co, k=3: nn.Conv2d(ci, co, k, padding=k // 2)  # noqa: E731
        self.c1, self.c2 = conv(1, 16), conv(16, 16)
        self.c3, self.c4 = conv(16, 32), conv(32, 32)
        self.c5, self.c6 = conv(32, 64), conv(64, 64)
        self.c7 = conv(64 + 32, 32)
        self.c8 = conv(32 + 16, 16)
        self.out = conv(16, 1, 1)

    def forward(self, x):
        up = lambda t: F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False)  # noqa: E731
        a2 = F.relu(self.c2(F.relu(self.c1(x))))
        a4 = F.relu(self.c4(F.relu(self.c3(F.max_pool2d(a2, 2)))))
        a6 = F.relu(self.c6(F.relu(self.c5(F.max_pool2d(a4, 2)))))
        a7 = F.relu(self.c7(torch.cat([up(a6), a4], 1)))
        a8 = F.relu(self.c8(torch.cat([up(a7), a2], 1)))
        return self.out(a8)


def main():
    a, W = setup()
    import h5_to_torch  # noqa: E402

    N, G = 4, 32
    g = torch.Generator().manual_seed(4)
    x = torch.randn(N, 1, G, G, generator=g)
    target = torch.tanh(x) + 0.1 * torch.randn(N, 1, G, G, generator=g)
    with h5py.File(W("unet_data.h5"), "w") as f:
        f["x"] = x.numpy()
        f["target"] = target.numpy()

    # trained in torch
    torch.manual_seed(0)
    net = MainJobUNet()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    for step in range(3):
        opt.zero_grad()
        F.mse_loss(net(x), target).backward()
        opt.step()
    net.eval()
    torch.save(net.state_dict(), W("unet.pt"))
    subprocess.run([sys.executable, os.path.join(a.share, "torch_to_h5.py"), W("unet.pt"), W("unet_from_torch.h5")], check=True, stdout=subprocess.DEVNULL)
    with h5py.File(W("unet_from_torch.h5"), "r") as f:
        keys = sorted(f.keys())
    want = sorted("%s.%s" % (m, t) for m in ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "out"] for t in ["weight", "bias"])
    assert keys == want, keys
    with torch.no_grad():
        ref32 = net(x).numpy()
        ref64 = net.double()(x.double()).numpy()
    net.float()

    common = ["-options_file", os.path.join(a.share, "main_job.opts"), "-data", W("unet_data.h5"), "-xshape", "%d,1,%d,%d" % (N, G, G),
              "-tshape", "%d,1,%d,%d" % (N, G, G)]

    def run(np_, xpart, dtype, extra, tag=""):
        return run_driver(a, common, W("unet_y_%d_%s_%s%s.h5" % (np_, "x".join(map(str, xpart)), dtype, tag)), np_, xpart, dtype, extra)

    ok = True
    cases = [(1, [1, 1, 1, 1], "float32"), (2, [2, 1, 1, 1], "float32"), (2, [1, 1, 2, 1], "float32"), (4, [1, 1, 2, 2], "float32"),
             (3, [1, 1, 3, 1], "float32"), (1, [1, 1, 1, 1], "float64"), (3, [1, 1, 1, 3], "float64"), (4, [2, 1, 2, 1], "float64")]
    for np_, xpart, dtype in cases:
        y = run(np_, xpart, dtype, ["-net_load_weights", W("unet_from_torch.h5")])
        ok &= compare("U-Net torch -> ddnn, %d ranks, x partition %s, %s" % (np_, xpart, dtype), y, ref32 if dtype == "float32" else ref64,
                      1e-5 if dtype == "float32" else 1e-12, width=62)

    # trained in ddnn (from the torch weights, 3 more Adam steps), loaded into torch
    for np_, xpart in [(2, [1, 1, 2, 1]), (4, [1, 1, 2, 2])]:
        y = run(np_, xpart, "float64", ["-net_load_weights", W("unet_from_torch.h5"), "-mode", "train", "-steps", "3", "-save", W("unet_from_ddnn_%d.h5" % np_)], "_train")
        back = h5_to_torch.load_state_dict(MainJobUNet().double(), W("unet_from_ddnn_%d.h5" % np_))
        back.eval()
        with torch.no_grad():
            yt = back(x.double()).numpy()
        ok &= compare("U-Net ddnn (%d ranks %s, 3 steps) -> torch, float64" % (np_, xpart), yt, y, 1e-12, width=62)
        moved = float(np.abs(yt - ref64).max())
        print("  the ddnn-trained output differs from the torch-trained one by %.2e (must be > 1e-4)" % moved)
        ok &= moved > 1e-4
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
