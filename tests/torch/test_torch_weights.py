#!/usr/bin/env python3
"""PyTorch <-> ddnn weights (issue 12, "Weights in and out"), driven by CTest (test_15_torch_weights).

 1. A LeNet-5 (the network of share/ddnn/lenet5.opts, written in torch here) is trained a few
    steps in torch, its state_dict written by share/ddnn/torch_to_h5.py (command line, with
    --names fc1=f5,fc2=f6,fc3=out) and loaded by ddnn (tests/torch/weights_driver.c,
    -net_load_weights; the convolutions by -c1_layer_weights_name conv1 -c3_layer_weights_name
    conv2) on 1-4 ranks, batch and spatial partitions: ddnn's logits equal torch's (float32:
    relative 1e-5 of the largest; float64 against torch in float64: 1e-12).
 2. ddnn trains the same network a few steps on 3 ranks and saves it (DDNetSaveWeights());
    share/ddnn/h5_to_torch.py loads the file into the torch LeNet-5: torch's logits equal ddnn's.
 3. A conv + batch-norm net trained in torch (running statistics, num_batches_tracked int64) loads
    into ddnn with the same eval outputs; ddnn trains 2 more steps, h5_to_torch.py loads it back:
    same outputs, num_batches_tracked 5.
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
    from torchtest import compare, run_driver, setup
except ImportError as e:
    print("SKIP: PyTorch or h5py is not installed (%s); install python3-torch and python3-h5py to run this test" % e)
    sys.exit(77)

a, W = setup()
import h5_to_torch  # noqa: E402


class LeNet5(nn.Module):
    """share/ddnn/lenet5.opts: conv 5x5 -> 6, tanh, avg-pool 2 | conv 5x5 -> 16, tanh, avg-pool 2 | flatten | 120 | 84 | 10"""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = nn.functional.avg_pool2d(torch.tanh(self.conv1(x)), 2)
        x = nn.functional.avg_pool2d(torch.tanh(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


N = 12
g = torch.Generator().manual_seed(1)
x = torch.rand(N, 1, 32, 32, generator=g) * 2 - 1
label = torch.randint(0, 10, (N,), generator=g)
with h5py.File(W("data.h5"), "w") as f:
    f["x"] = x.numpy()
    f["label"] = label.float().numpy()

# 1. trained in torch
torch.manual_seed(0)
net = LeNet5()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(net(x), label)
    loss.backward()
    opt.step()
net.eval()
torch.save(net.state_dict(), W("lenet.pt"))
subprocess.run([sys.executable, os.path.join(a.share, "torch_to_h5.py"), W("lenet.pt"), W("from_torch.h5"), "--names", "fc1=f5,fc2=f6,fc3=out"],
               check=True, stdout=subprocess.DEVNULL)
with h5py.File(W("from_torch.h5"), "r") as f:
    assert sorted(f.keys()) == sorted(["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "f5.weight", "f5.bias",
                                       "f6.weight", "f6.bias", "out.weight", "out.bias"]), list(f.keys())
with torch.no_grad():
    ref32 = net(x).numpy()
    ref64 = net.double()(x.double()).numpy()
net.float()

common = ["-options_file", os.path.join(a.share, "lenet5.opts"), "-c1_layer_weights_name", "conv1", "-c3_layer_weights_name", "conv2",
          "-data", W("data.h5"), "-xshape", "%d,1,32,32" % N]


def run(np_, xpart, dtype, extra):
    return run_driver(a, common, W("y_%d_%s_%s.h5" % (np_, "x".join(map(str, xpart)), dtype)), np_, xpart, dtype, extra)


ok = True
cases = [(1, [1, 1, 1, 1], "float32"), (2, [2, 1, 1, 1], "float32"), (3, [3, 1, 1, 1], "float32"), (4, [4, 1, 1, 1], "float32"),
         (4, [1, 1, 2, 2], "float32"), (2, [1, 1, 2, 1], "float64"), (3, [3, 1, 1, 1], "float64")]
for np_, xpart, dtype in cases:
    y = run(np_, xpart, dtype, ["-net_load_weights", W("from_torch.h5")])
    ok &= compare("torch -> ddnn, %d ranks, x partition %s, %s" % (np_, xpart, dtype), y, ref32 if dtype == "float32" else ref64,
                  1e-5 if dtype == "float32" else 1e-12)

# 2. trained in ddnn, loaded into torch
y = run(3, [3, 1, 1, 1], "float64", ["-mode", "train", "-steps", "3", "-save", W("from_ddnn.h5")])
back = h5_to_torch.load_state_dict(LeNet5().double(), W("from_ddnn.h5"), {"f5": "fc1", "f6": "fc2", "out": "fc3"})
back.eval()
with torch.no_grad():
    yt = back(x.double()).numpy()
ok &= compare("ddnn (3 ranks, 3 steps) -> torch, float64", yt, y, 1e-12)
# the loaded weights are ddnn's trained ones, not torch's
ok &= bool(np.abs(yt - ref64).max() > 1e-3)
# 3. batch normalization: running statistics and num_batches_tracked (int64) both ways
class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1, self.fc = nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Linear(4 * 30 * 30, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.bn1(self.conv1(x))), 1))


torch.manual_seed(2)
bnet = BNNet().double()
opt = torch.optim.SGD(bnet.parameters(), lr=0.05)
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(bnet(x.double()), label).backward()
    opt.step()
bnet.eval()
sys.path.insert(0, a.share)
import torch_to_h5  # noqa: E402
names = {"conv1": "c1", "bn1": "bn", "fc": "out"}
torch_to_h5.save_state_dict(bnet, W("bn_from_torch.h5"), names)
with h5py.File(W("bn_from_torch.h5"), "r") as f:
    assert f["bn.num_batches_tracked"].dtype == np.int64 and f["bn.num_batches_tracked"].shape == ()
with torch.no_grad():
    bref = bnet(x.double()).numpy()
common = ["-net_inputs", "x,label", "-net_layers", "c1,bn,act,flat,out,loss", "-c1_layer_type", "conv", "-c1_layer_conv_out_channels", "4",
          "-c1_layer_conv_kernel", "3", "-bn_layer_type", "batchnorm", "-act_layer_type", "activation", "-act_layer_activation_type", "relu",
          "-flat_layer_type", "flatten", "-out_layer_type", "affine", "-out_layer_affine_out_features", "10", "-loss_layer_type", "loss",
          "-loss_layer_inputs", "out,label", "-loss_layer_loss_type", "crossentropy", "-optimizer_type", "sgd", "-optimizer_lr", "0.05",
          "-data", W("data.h5"), "-xshape", "%d,1,32,32" % N]
y = run(2, [1, 1, 2, 1], "float64", ["-net_load_weights", W("bn_from_torch.h5")])
ok &= compare("torch -> ddnn, conv + batchnorm, 2 ranks, float64", y, bref, 1e-12)
y = run(2, [2, 1, 1, 1], "float64", ["-net_load_weights", W("bn_from_torch.h5"), "-mode", "train", "-steps", "2", "-save", W("bn_from_ddnn.h5")])
back = h5_to_torch.load_state_dict(BNNet().double(), W("bn_from_ddnn.h5"), {v: k for k, v in names.items()})
back.eval()
with torch.no_grad():
    yt = back(x.double()).numpy()
ok &= compare("ddnn (2 more steps) -> torch, conv + batchnorm", yt, y, 1e-12)
nbt = int(back.bn1.num_batches_tracked)
print("num_batches_tracked: torch 3 steps + ddnn 2 steps = %d" % nbt)
ok &= nbt == 5

# 6. the scripts' checks: a ddnn file with a flipped data byte is refused by h5_to_torch naming the dataset; a
#    torch_to_h5 that fails (two keys on one name) leaves an existing file as it was and no temporary; bfloat16
#    tensors are written exactly, as float32
import shutil  # noqa: E402
shutil.copy(W("bn_from_ddnn.h5"), W("flipped.h5"))
with h5py.File(W("flipped.h5"), "r+") as f:
    d = f["c1.weight"]
    v = d[()]
    v.reshape(-1)[3] = np.nextafter(v.reshape(-1)[3], np.inf)
    d[...] = v
try:
    h5_to_torch.read_state_dict(W("flipped.h5"))
    print("FAIL: a flipped value was read without complaint")
    ok = False
except SystemExit as e:
    print("flipped value refused: %s" % e)
    ok &= "'c1.weight'" in str(e) and "corrupted" in str(e)
before = open(W("bn_from_torch.h5"), "rb").read()
try:
    torch_to_h5.save_state_dict(bnet, W("bn_from_torch.h5"), {"conv1": "x", "bn1": "x"})
    print("FAIL: two keys on one dataset name were written")
    ok = False
except SystemExit as e:
    print("collision refused: %s" % e)
ok &= open(W("bn_from_torch.h5"), "rb").read() == before and not os.path.exists(W("bn_from_torch.h5") + ".tmp")
bf = {"w": torch.tensor([1.5, -2.25, 3.0e38], dtype=torch.bfloat16)}
torch_to_h5.save_state_dict(bf, W("bf16.h5"))
with h5py.File(W("bf16.h5"), "r") as f:
    ok &= f["w"].dtype == np.float32 and np.array_equal(f["w"][()], bf["w"].float().numpy())
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
