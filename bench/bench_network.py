#!/usr/bin/python3
"""
bench_network.py - whole networks, ddnn against the same network in PyTorch (issue 16, item 6).

    /usr/bin/python3 bench/bench_network.py [--build build] [--ranks 1,2] [--dtypes float32,float64]
        [--nets unet,lenet5] [--rounds 3] [--epochs 3] [--steps 200] [--workdir DIR] [--ddnn-args "..."]

Runs, interleaved (ddnn, PyTorch, ddnn, ... with the order flipped every round), for every net,
rank count P and data type:
  unet:   build/tutorials/main_job -options_file share/ddnn/main_job.opts (the main job: U-Net on
          32x32 Poisson data, batch 8, 512 training samples = 64 steps per epoch) with
          mpiexec -n P, OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1, -epochs E+1 (the first epoch is
          a warm-up and is dropped), against bench/torch_network.py --net unet --threads P on
          the same HDF5 file (written by the first main_job run into --workdir);
  lenet5: build/tutorials/ex6_example_nets -options_file share/ddnn/lenet5.opts -steps S (batch
          16 of 1x32x32, 10 classes) against torch_network.py --net lenet5 --steps S.
Each run gives the median of its epochs (unet: DDNetTrainEpoch's seconds as main_job prints them)
or its time for S steps (lenet5); the table gives, per case, the median over the rounds and the
ratio ddnn / PyTorch (goal of issue 16: <= 0.75). Timing is never asserted. Run it on an idle
machine: both sides want P cores.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def env1():
    e = dict(os.environ)
    e.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return e


def run(cmd, env, cwd):
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    return r.stdout


def mpi(P):
    return ["mpiexec", "--oversubscribe", "--bind-to", "none", "-n", str(P)]


def ddnn_unet(a, P, dt):
    cmd = mpi(P) + [os.path.join(a.build, "tutorials", "main_job"), "-options_file", os.path.join(ROOT, "share/ddnn/main_job.opts"),
                    "-epochs", str(a.epochs + 1), "-float32", "1" if dt == "float32" else "0",
                    "-data", os.path.join(a.workdir, "main_job_data.h5"), "-checkpoint", os.path.join(a.workdir, "ckpt.h5")] + a.ddnn_args.split()
    out = run(cmd, env1(), a.workdir)
    t = [float(m.group(1)) for m in re.finditer(r"^epoch\s+\d+ .*\s([0-9.]+) s$", out, re.M)]
    if len(t) != a.epochs + 1:
        sys.exit("cannot read the epoch times of:\n" + out[-3000:])
    return statistics.median(t[1:])


def ddnn_lenet(a, P, dt):
    cmd = mpi(P) + [os.path.join(a.build, "tutorials", "ex6_example_nets"), "-options_file", os.path.join(ROOT, "share/ddnn/lenet5.opts"),
                    "-steps", str(a.steps), "-print_every", str(10 * a.steps), "-eval_batches", "1"] + (["-float64"] if dt == "float64" else []) + a.ddnn_args.split()
    out = run(cmd, env1(), a.workdir)
    m = re.search(r"^\d+ steps in ([0-9.]+) s", out, re.M)
    if not m:
        sys.exit("cannot read the time of:\n" + out[-3000:])
    return float(m.group(1))


def torch_net(a, net, P, dt):
    e = dict(os.environ)
    e.update(OMP_NUM_THREADS=str(P), OPENBLAS_NUM_THREADS=str(P))
    cmd = [a.python, os.path.join(HERE, "torch_network.py"), "--net", net, "--threads", str(P), "--dtype", dt]
    if net == "unet":
        cmd += ["--epochs", str(a.epochs), "--data", os.path.join(a.workdir, "main_job_data.h5")]
    else:
        cmd += ["--steps", str(a.steps), "--runs", "1"]
    out = run(cmd, e, a.workdir)
    return statistics.median(json.loads(out.strip().splitlines()[-1])["times"])


def main():
    ap = argparse.ArgumentParser(description="ddnn against PyTorch, whole networks")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--nets", default="unet,lenet5")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3, help="unet: timed epochs per run (plus one warm-up)")
    ap.add_argument("--steps", type=int, default=200, help="lenet5: timed steps per run")
    ap.add_argument("--workdir", default="")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--ddnn-args", default="", help="extra options for the ddnn programs (e.g. -log_view)")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.workdir = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="bench_network_"))
    os.makedirs(a.workdir, exist_ok=True)
    cases = [(n, int(P), d) for n in a.nets.split(",") for P in a.ranks.split(",") for d in a.dtypes.split(",")]
    res = {c: ([], []) for c in cases}
    for r in range(a.rounds):
        for c in cases:
            net, P, dt = c
            sides = [0, 1] if r % 2 == 0 else [1, 0]
            for s in sides:
                if s == 0:
                    t = ddnn_unet(a, P, dt) if net == "unet" else ddnn_lenet(a, P, dt)
                else:
                    t = torch_net(a, net, P, dt)
                res[c][s].append(t)
            print("round %d  %-6s P=%d %-7s ddnn %.3f s  torch %.3f s" % (r + 1, net, P, dt, res[c][0][-1], res[c][1][-1]), flush=True)
    unit = {"unet": "s/epoch", "lenet5": "s/%d steps" % a.steps}
    print("\n| net | ranks / threads | dtype | ddnn (median) | PyTorch (median) | ddnn / PyTorch | goal <= 0.75 |")
    print("|---|---|---|---:|---:|---:|---|")
    for c in cases:
        net, P, dt = c
        d, t = statistics.median(res[c][0]), statistics.median(res[c][1])
        print("| %s | %d | %s | %.3f %s | %.3f | %.2f | %s |" % (net, P, dt, d, unit[net], t, d / t, "met" if d / t <= 0.75 else "not met"))
        print("|  |  |  | runs: %s | %s |  |  |" % (" ".join("%.3f" % x for x in res[c][0]), " ".join("%.3f" % x for x in res[c][1])))


if __name__ == "__main__":
    main()
