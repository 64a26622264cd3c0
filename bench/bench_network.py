#!/usr/bin/python3
"""
bench_network.py - whole networks, ddnn against the same network in PyTorch (issue 16, item 6).

    /usr/bin/python3 bench/bench_network.py [--build build] [--ranks 1,2] [--dtypes float32,float64]
        [--nets unet,fno,lenet5] [--rounds 3] [--epochs 3] [--steps 200] [--workdir DIR] [--ddnn-args "..."]
        [--before OTHER_BUILD] [--before-args "..."]

Runs, interleaved (ddnn, PyTorch, ddnn, ... with the order flipped every round), for every net,
rank count P and data type:
  unet:   build/tutorials/main_job -options_file share/ddnn/main_job.opts (the main job: U-Net on
          32x32 Poisson data, batch 8, 512 training samples = 64 steps per epoch) with
          mpiexec -n P, OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1, -epochs E+1 (the first epoch is
          a warm-up and is dropped), against bench/torch_network.py --net unet --threads P on
          the same HDF5 file (written by the first main_job run into --workdir);
  fno:    the same main job with share/ddnn/main_job_fno.opts (a Fourier neural operator: four spectral
          layers with 1x1 convolutions beside them, GELU; its own data file, of the same kind), against
          torch_network.py --net fno (Li et al. 2021's SpectralConv2d with torch.fft);
  lenet5: build/tutorials/ex6_example_nets -options_file share/ddnn/lenet5.opts -steps S (batch
          16 of 1x32x32, 10 classes) against torch_network.py --net lenet5 --steps S. The two
          sides make their data differently (ex6_example_nets computes gratings + noise per
          step, PyTorch draws torch.rand and torch.randint), so both time their data generation
          separately ("data D s of it"; "data" in torch_network.py's JSON) and the table gives
          LeNet-5 twice: the training steps without the data generation (T - D, the comparable
          figure and the one of issue 16's goal), and with it (T).
With --before, the ddnn programs of a second build (e.g. main's, before a change) run as a third
side in the same rounds, so that a change is measured before/after in the same minutes; the table
then adds their median and the ratio after / before. --before-args gives that side its own ddnn
options (default: --ddnn-args), so that two settings of one build compare the same way, e.g.
--before build --ddnn-args "-net_weights replicated" --before-args "" (replicated against broadcast).
Each run gives the median of its epochs (unet: DDNetTrainEpoch's seconds as main_job prints them;
its DDDataset serves the mini-batches from memory after reading the file once, as PyTorch's epoch
indexes tensors in memory) or its time for S steps (lenet5: with and without the data generation); the
table gives, per case, the median over the rounds and the ratio ddnn / PyTorch (goal of issue
16: <= 0.75). A --before build whose ex6_example_nets prints no data figure (before this split)
shows "n/a" on the "without data" row and is compared on the "with data" row only. Timing is
never asserted. Run it on an idle machine: both sides want P cores.

    /usr/bin/python3 bench/bench_network.py --weak [--weak-grid 64] [--weak-batch 8] [--rounds 3] [--epochs 2]

gives the main job's weak scaling instead (same entries per rank and step at 1 and 2 ranks; see weak()).
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


MAIN_JOB_OPTS = {"unet": "share/ddnn/main_job.opts", "fno": "share/ddnn/main_job_fno.opts"}


def data_file(a, net):
    return os.path.join(a.workdir, "main_job_%s_data.h5" % net)


def ddnn_main_job(a, P, dt, net="unet"):
    cmd = mpi(P) + [os.path.join(a.build, "tutorials", "main_job"), "-options_file", os.path.join(ROOT, MAIN_JOB_OPTS[net]),
                    "-epochs", str(a.epochs + 1), "-float32", "1" if dt == "float32" else "0",
                    "-data", data_file(a, net), "-checkpoint", os.path.join(a.workdir, "ckpt.h5")] + a.ddnn_args.split()
    out = run(cmd, env1(), a.workdir)
    t = [float(m.group(1)) for m in re.finditer(r"^epoch\s+\d+ .*\s([0-9.]+) s$", out, re.M)]
    if len(t) != a.epochs + 1:
        sys.exit("cannot read the epoch times of:\n" + out[-3000:])
    return statistics.median(t[1:])


def weak_cmd(a, P, dt, grid, batch, ckpt="ckpt.h5"):
    return mpi(P) + [os.path.join(a.build, "tutorials", "main_job"), "-options_file", os.path.join(ROOT, "share/ddnn/main_job.opts"),
                     "-epochs", str(a.epochs + 1), "-float32", "1" if dt == "float32" else "0", "-grid", str(grid), "-batch", str(batch),
                     "-data", os.path.join(a.workdir, "main_job_data_%d.h5" % grid), "-checkpoint", os.path.join(a.workdir, ckpt)] + a.ddnn_args.split()


def weak_step(out, a, batch):
    """seconds per training step of one main job run (median over the timed epochs)"""
    t = [float(m.group(1)) for m in re.finditer(r"^epoch\s+\d+ .*\s([0-9.]+) s$", out, re.M)]
    if len(t) != a.epochs + 1:
        sys.exit("cannot read the epoch times of:\n" + out[-3000:])
    return statistics.median(t[1:]) / ((576 - 64) // batch)


def ddnn_weak(a, P, dt, grid, batch):
    return weak_step(run(weak_cmd(a, P, dt, grid, batch), env1(), a.workdir), a, batch)


def ddnn_weak_pair(a, dt, grid, batch):
    """the machine's own ceiling: two independent 1-rank jobs at once (no communication between them); the slower one's step"""
    ps = [subprocess.Popen(weak_cmd(a, 1, dt, grid, batch, "ckpt_pair%d.h5" % i), env=env1(), cwd=a.workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outs = [p.communicate()[0] for p in ps]
    for p, o in zip(ps, outs):
        if p.returncode:
            sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(p.args), o[-3000:]))
    return max(weak_step(o, a, batch) for o in outs)


def weak(a):
    """
    Weak scaling (issue 16, item 5): the same entries per rank and step at 1 and 2 ranks. The
    main job's grid is square (-grid n), so 2 ranks cannot hold twice a 1-rank square grid at
    the same batch; the per-rank work is kept instead by the batch: 1 rank -grid G -batch B/2
    (local B/2 x G x G) against 2 ranks -grid G -batch B (local B x G x G/2, a halo exchange
    per convolution), and the efficiency is t_step(1 rank) / t_step(2 ranks).

    The baseline measured in the same rounds: two independent 1-rank jobs of the 1-rank size at
    once (no communication, nothing shared but the machine: memory bandwidth, caches, clocks).
    t1 / t_pair is the efficiency the machine itself allows two cores; t_pair / t2 is what ddnn's
    communication and partitioned kernels leave of it.
    """
    G, B = a.weak_grid, a.weak_batch
    cases = [(P, dt) for P in (1, 2, "pair") for dt in a.dtypes.split(",")]
    res = {c: [] for c in cases}
    for r in range(a.rounds):
        for dt in a.dtypes.split(","):
            order = (1, 2, "pair") if r % 2 == 0 else ("pair", 2, 1)  # round 1's 1-rank job writes the data file before the pair reads it
            for P in order:
                res[(P, dt)].append(ddnn_weak_pair(a, dt, G, B // 2) if P == "pair" else ddnn_weak(a, P, dt, G, B // 2 if P == 1 else B))
            print("round %d  %-7s 1 rank %.2f ms/step  2 ranks %.2f ms/step  two 1-rank jobs at once %.2f ms/step" % (r + 1, dt, 1e3 * res[(1, dt)][-1], 1e3 * res[(2, dt)][-1], 1e3 * res[("pair", dt)][-1]), flush=True)
    print("\n| dtype | 1 rank: -grid %d -batch %d, ms/step | 2 ranks: -grid %d -batch %d, ms/step | two 1-rank jobs at once, ms/step | efficiency t1/t2 | machine's t1/t_pair | ddnn's t_pair/t2 | goal t1/t2 >= 0.90 |" % (G, B // 2, G, B))
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for dt in a.dtypes.split(","):
        t1, t2, tp = statistics.median(res[(1, dt)]), statistics.median(res[(2, dt)]), statistics.median(res[("pair", dt)])
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |" % (dt, 1e3 * t1, 1e3 * t2, 1e3 * tp, t1 / t2, t1 / tp, tp / t2, "met" if t1 / t2 >= 0.9 else "not met"))


def ddnn_lenet(a, P, dt):
    cmd = mpi(P) + [os.path.join(a.build, "tutorials", "ex6_example_nets"), "-options_file", os.path.join(ROOT, "share/ddnn/lenet5.opts"),
                    "-steps", str(a.steps), "-print_every", str(10 * a.steps), "-eval_batches", "1"] + (["-float64"] if dt == "float64" else []) + a.ddnn_args.split()
    out = run(cmd, env1(), a.workdir)
    m = re.search(r"^\d+ steps in ([0-9.]+) s", out, re.M)
    if not m:
        sys.exit("cannot read the time of:\n" + out[-3000:])
    d = re.search(r"^\d+ steps in [0-9.]+ s \(.*data ([0-9.]+) s of it", out, re.M)
    return float(m.group(1)), float(d.group(1)) if d else None  # an older ex6_example_nets prints no data figure


def torch_net(a, net, P, dt):
    e = dict(os.environ)
    e.update(OMP_NUM_THREADS=str(P), OPENBLAS_NUM_THREADS=str(P))
    cmd = [a.python, os.path.join(HERE, "torch_network.py"), "--net", net, "--threads", str(P), "--dtype", dt]
    if net in MAIN_JOB_OPTS:
        cmd += ["--epochs", str(a.epochs), "--data", data_file(a, net)]
    else:
        cmd += ["--steps", str(a.steps), "--runs", "1"]
    r = json.loads(run(cmd, e, a.workdir).strip().splitlines()[-1])
    t, d = r["times"], r.get("data") or [None] * len(r["times"])
    if net in MAIN_JOB_OPTS:
        return statistics.median(t), None
    i = sorted(range(len(t)), key=lambda k: t[k])[len(t) // 2]  # the median run, with its own data time
    return t[i], d[i]


def check_params(a):
    """
    The smoke test (CTest bench_network_params): each ddnn network has as many parameters as its
    PyTorch twin in torch_network.py, i.e. the benchmark compares the same networks. The ddnn
    side is read from DDNetView's "total parameters" line of a run with no training (main_job
    -epochs 0 on a small data file; ex6_example_nets -steps 1). Exit 77 (skipped) without torch.
    """
    try:
        subprocess.run([a.python, "-c", "import torch"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError):
        print("torch is not importable by %s: skipped" % a.python)
        sys.exit(77)
    ddnn = {}
    for net in a.nets.split(","):
        if net in MAIN_JOB_OPTS:
            cmd = mpi(1) + [os.path.join(a.build, "tutorials", "main_job"), "-options_file", os.path.join(ROOT, MAIN_JOB_OPTS[net]), "-epochs", "0",
                            "-nsamples", "24", "-ntest", "8", "-data", os.path.join(a.workdir, "params.h5"), "-checkpoint", os.path.join(a.workdir, "params_ckpt.h5")]
        else:
            cmd = mpi(1) + [os.path.join(a.build, "tutorials", "ex6_example_nets"), "-options_file", os.path.join(ROOT, "share/ddnn/%s.opts" % net), "-steps", "1", "-eval_batches", "1"]
        out = run(cmd, env1(), a.workdir)
        m = re.search(r"total parameters: (\d+)", out)
        if not m:
            sys.exit("no parameter count in the output of %s:\n%s" % (" ".join(cmd), out[-2000:]))
        ddnn[net] = int(m.group(1))
        t = json.loads(run([a.python, os.path.join(HERE, "torch_network.py"), "--net", net, "--count"], dict(os.environ), a.workdir).strip().splitlines()[-1])["params"]
        print("%-7s ddnn %d parameters, PyTorch %d" % (net, ddnn[net], t))
        if t != ddnn[net]:
            sys.exit("%s: ddnn has %d parameters, the PyTorch network of torch_network.py %d: they are not the same network" % (net, ddnn[net], t))


def main():
    ap = argparse.ArgumentParser(description="ddnn against PyTorch, whole networks")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--nets", default="unet,fno,lenet5")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3, help="unet, fno: timed epochs per run (plus one warm-up)")
    ap.add_argument("--steps", type=int, default=200, help="lenet5: timed steps per run")
    ap.add_argument("--workdir", default="")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--ddnn-args", default="", help="extra options for the ddnn programs (e.g. -log_view)")
    ap.add_argument("--before", default="", help="a second build whose ddnn programs run as a third side (before/after)")
    ap.add_argument("--before-args", default=None, help="the ddnn options of the --before side (default: --ddnn-args)")
    ap.add_argument("--check-params", action="store_true", help="only check that both sides have the same parameter count (the CTest smoke test)")
    ap.add_argument("--weak", action="store_true", help="weak scaling of the main job instead (see weak())")
    ap.add_argument("--weak-grid", type=int, default=64)
    ap.add_argument("--weak-batch", type=int, default=8, help="the 2-rank batch; 1 rank runs half of it")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.workdir = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="bench_network_"))
    os.makedirs(a.workdir, exist_ok=True)
    if a.check_params:
        check_params(a)
        return
    if a.weak:
        weak(a)
        return
    cases = [(n, int(P), d) for n in a.nets.split(",") for P in a.ranks.split(",") for d in a.dtypes.split(",")]
    b = None
    if a.before:
        b = argparse.Namespace(**vars(a))
        b.build = os.path.abspath(a.before)
        if a.before_args is not None:
            b.ddnn_args = a.before_args
    nsides = 3 if b else 2
    res = {c: tuple([] for _ in range(nsides)) for c in cases}
    for r in range(a.rounds):
        for c in cases:
            net, P, dt = c
            sides = list(range(nsides)) if r % 2 == 0 else list(reversed(range(nsides)))
            for s in sides:
                if s == 0:
                    t = ddnn_main_job(a, P, dt, net) if net in MAIN_JOB_OPTS else ddnn_lenet(a, P, dt)
                elif s == 1:
                    t = torch_net(a, net, P, dt)
                else:
                    t = ddnn_main_job(b, P, dt, net) if net in MAIN_JOB_OPTS else ddnn_lenet(b, P, dt)
                res[c][s].append(t if isinstance(t, tuple) else (t, None))
            show = lambda x: "%.3f s" % x[0] + (" (data %.3f s)" % x[1] if x[1] is not None else "")
            print("round %d  %-6s P=%d %-7s ddnn %s  torch %s%s" % (r + 1, net, P, dt, show(res[c][0][-1]), show(res[c][1][-1]), "  before %s" % show(res[c][2][-1]) if b else ""), flush=True)
    unit = {"unet": "s/epoch", "fno": "s/epoch", "lenet5": "s/%d steps" % a.steps}
    extra = " ddnn before (median) | after / before |" if b else ""
    print("\n| net | ranks / threads | dtype | ddnn (median) | PyTorch (median) | ddnn / PyTorch | goal <= 0.75 |" + extra)
    print("|---|---|---|---:|---:|---:|---|" + ("---:|---:|" if b else ""))

    def row(label, P, dt, unit, runs):
        """one table row and its runs line; runs[s] are the side's seconds, None where it has no such figure"""
        med = [statistics.median(x) if x and None not in x else None for x in runs]
        f = lambda v: "%.3f" % v if v is not None else "n/a"
        d, t = med[0], med[1]
        ratio = d / t if d is not None and t else None
        more = ""
        if b:
            more = " %s | %s |" % (f(med[2]), "%.2f" % (d / med[2]) if d is not None and med[2] else "n/a")
        print("| %s | %d | %s | %s %s | %s | %s | %s |%s" % (label, P, dt, f(d), unit, f(t), "%.2f" % ratio if ratio is not None else "n/a",
                                                         ("met" if ratio <= 0.75 else "not met") if ratio is not None else "", more))
        print("|  |  |  | runs: %s | %s |  |  |%s" % (" ".join(f(x) for x in runs[0]), " ".join(f(x) for x in runs[1]), " %s |  |" % " ".join(f(x) for x in runs[2]) if b else ""))

    for c in cases:
        net, P, dt = c
        if net in MAIN_JOB_OPTS:
            row(net, P, dt, unit[net], [[x[0] for x in res[c][s]] for s in range(nsides)])
            continue
        # lenet5: the training steps without the data generation (the figure of issue 16), then with it
        row("lenet5, training without data", P, dt, unit[net], [[x[0] - x[1] if x[1] is not None else None for x in res[c][s]] for s in range(nsides)])
        row("lenet5, with data", P, dt, unit[net], [[x[0] for x in res[c][s]] for s in range(nsides)])

if __name__ == "__main__":
    main()
