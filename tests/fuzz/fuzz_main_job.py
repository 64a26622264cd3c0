#!/usr/bin/env python3
"""
Fuzz test of the main job's set-up (issue 13, item 9): random option strings, corrupted HDF5 data
files and checkpoints (flipped bytes, truncations) and paths that are not regular files, each run
of tutorials/main_job under a timeout. Every run must end in
  - a correct result: exit 0 and the final held-out error line, equal to the unperturbed run's
    when the perturbation is of a file (a flipped byte in unused space is harmless), or
  - an error: a non-zero exit status that is not a signal, with a PETSc error message;
never a hang (timeout), a crash (signal), a silent run (exit 0 without a result or a result
that differs) or a destroyed path. Fixed seed, bounded count: about 30 runs of ~1 s.

  fuzz_main_job.py <main_job executable> <main_job.opts> [runs]
"""
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile

EXE, OPTS = sys.argv[1], sys.argv[2]
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 12
TIMEOUT = 30
BASE = ["-options_file", OPTS, "-nsamples", "24", "-ntest", "8", "-grid", "8", "-epochs", "1", "-batch", "4"]
RESULT = "held-out relative L2 error"

rng = random.Random(20240613)
work = tempfile.mkdtemp(prefix="ddnn_fuzz_")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
failures = []


def run(args, what):
    """runs the main job; returns (kind, output): kind 'ok', 'error', or a failure description"""
    try:
        p = subprocess.run([EXE] + args, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "HANG (timeout %d s)" % TIMEOUT, ""
    out = p.stdout.decode(errors="replace")
    if p.returncode < 0 or p.returncode >= 128:
        return "CRASH (status %d)" % p.returncode, out
    if p.returncode == 0:
        return ("ok", out) if RESULT in out else ("SILENT (exit 0 without a result)", out)
    if "PETSC ERROR" not in out:
        return "ERROR WITHOUT A MESSAGE (status %d)" % p.returncode, out
    return "error", out


def result_line(out):
    return [l for l in out.splitlines() if l.startswith(RESULT)]


def check(args, what, expect=None, must_fail=False):
    kind, out = run(args, what)
    bad = None
    if kind not in ("ok", "error"):
        bad = kind
    elif kind == "ok" and must_fail:
        bad = "SILENT (succeeded, an error was expected)"
    elif kind == "ok" and expect is not None and result_line(out) != expect:
        bad = "SILENTLY WRONG (result %s, expected %s)" % (result_line(out), expect)
    msg = ""
    if kind == "error":  # the error's message: the first PETSc error line that is not a banner
        lines = [l.split("PETSC ERROR:", 1)[1].strip() for l in out.splitlines() if "PETSC ERROR:" in l]
        lines = [l for l in lines if l and not l.startswith("-") and not l.startswith("#")]
        msg = (": " + lines[min(1, len(lines) - 1)][:160]) if lines else ""
    print("%-6s %s%s" % ("FAIL" if bad else kind, what, msg), flush=True)
    if bad:
        failures.append("%s: %s\n  args: %s\n  output tail: %s" % (what, bad, " ".join(args), out[-1500:]))
    return kind, out


# the unperturbed runs: generation, then training on the data and restarting from the checkpoint
data, ckpt = os.path.join(work, "data.h5"), os.path.join(work, "ckpt.h5")
kind, out = check(BASE + ["-data", data, "-checkpoint", ckpt], "baseline: generate and train")
base = result_line(out)
good_data, good_ckpt = open(data, "rb").read(), open(ckpt, "rb").read()
shutil.copy(ckpt, ckpt + ".copy.h5")
kind, out = check(BASE + ["-data", data, "-epochs", "2", "-restart", "-checkpoint", ckpt + ".copy.h5"], "baseline: restart")
base_restart = result_line(out)
if not base or not base_restart:
    print("the unperturbed runs failed:\n" + "\n".join(failures))
    sys.exit(1)


def corrupt(b):
    b = bytearray(b)
    how = rng.choice(["flip", "flip", "flip", "truncate", "zeros"])
    if how == "flip":
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        b = b[: rng.randrange(len(b))]
    else:
        o = rng.randrange(len(b))
        b[o : o + rng.randint(1, 64)] = bytes(min(len(b) - o, 64))[: len(b[o : o + 64])]
    return bytes(b), how


# corrupted data files: an error or the unperturbed result
for i in range(RUNS):
    bad, how = corrupt(good_data)
    f = os.path.join(work, "bad%d.h5" % i)
    open(f, "wb").write(bad)
    check(BASE + ["-data", f, "-checkpoint", os.path.join(work, "cb.h5")], "data file, %s #%d" % (how, i), expect=base)
    os.unlink(f)

# corrupted checkpoints, restarted from: an error or the unperturbed restart
for i in range(RUNS // 2):
    bad, how = corrupt(good_ckpt)
    f = os.path.join(work, "badck%d.h5" % i)
    open(f, "wb").write(bad)
    check(BASE + ["-data", data, "-epochs", "2", "-restart", "-checkpoint", f], "checkpoint, %s #%d" % (how, i), expect=base_restart)

# an interrupted generation: a partial file left by a killed run (slices missing) is refused
partial = os.path.join(work, "partial.h5")
p = subprocess.Popen([EXE] + BASE + ["-nsamples", "4000", "-data", partial + ".tmp.h5", "-checkpoint", os.path.join(work, "cp.h5")], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
kill_file = partial + ".tmp.h5.tmp"
for _ in range(200):  # wait until the generator has written part of its file, then kill it
    if os.path.exists(kill_file) and os.path.getsize(kill_file) > 40000:
        break
    try:
        p.wait(timeout=0.05)
        break
    except subprocess.TimeoutExpired:
        pass
p.kill()
p.wait()
if os.path.exists(kill_file):
    shutil.copy(kill_file, partial)
    check(BASE + ["-data", partial, "-checkpoint", os.path.join(work, "cp.h5")], "data file of a killed generation", must_fail=True)
    if os.path.exists(partial + ".tmp.h5"):
        failures.append("a killed generation left its final file name behind")
else:
    failures.append("the generator was not caught mid-file (no %s)" % kill_file)

# paths that are not regular files: refused, left intact
fifo, dirp = os.path.join(work, "fifo"), os.path.join(work, "dir")
os.mkfifo(fifo)
os.mkdir(dirp)
check(BASE + ["-data", data, "-checkpoint", fifo], "-checkpoint a FIFO", must_fail=True)
check(BASE + ["-data", dirp, "-regenerate", "-checkpoint", os.path.join(work, "c3.h5")], "-data a directory with -regenerate", must_fail=True)
check(BASE + ["-data", data, "-checkpoint", dirp], "-checkpoint a directory", must_fail=True)
if not stat.S_ISFIFO(os.stat(fifo).st_mode) or not stat.S_ISDIR(os.stat(dirp).st_mode):
    failures.append("a FIFO or a directory was replaced")

# random option strings
opts = {
    "-nsamples": ["0", "-3", "1", "24", "9999999999", "4294967299", "abc", "2.5", ""],
    "-ntest": ["0", "-1", "8", "24", "100", "x"],
    "-grid": ["0", "1", "2", "3", "8", "-8", "4294967304", "1e1"],
    "-epochs": ["0", "-1", "1", "two"],
    "-batch": ["0", "-4", "1", "3", "4", "1000", "4294967300"],
    "-data": [data, "/nonexistent/dir/d.h5", dirp, fifo, ""],
    "-checkpoint": [ckpt, "/nonexistent/dir/c.h5", dirp, fifo, os.path.join(work, "new.h5")],
    "-restart": ["", "true", "maybe"],
    "-prediction_layer": ["out", "nothere", ""],
    "-float32": ["0", "1", "yes", "7"],
    "-optimizer_lr": ["0.001", "-1", "nan", "1e400", "x"],
    "-bogus_option": ["1"],
}
for i in range(RUNS):
    args = list(BASE) + ["-data", data, "-checkpoint", os.path.join(work, "cr.h5")]
    for k in rng.sample(sorted(opts), rng.randint(1, 3)):
        v = rng.choice(opts[k])
        args += [k] + ([v] if v else [])
    shutil.copy(data, data + ".bak")
    check(args, "options " + " ".join(args[len(BASE) + 4 :]))
    if open(data, "rb").read() != good_data and "-regenerate" not in args:
        shutil.copy(data + ".bak", data)

if not stat.S_ISFIFO(os.stat(fifo).st_mode) or not stat.S_ISDIR(os.stat(dirp).st_mode):
    failures.append("a FIFO or a directory was replaced by a fuzzed run")
shutil.rmtree(work, ignore_errors=True)
if failures:
    print("\n%d failure(s):\n" % len(failures) + "\n\n".join(failures))
    sys.exit(1)
print("fuzz: all runs ended in a clear error or the correct result")
