#!/usr/bin/env python3
"""
The catalogue of issue 13, run again (item "the catalogue run again"): the main job and the example
networks driven as a careless or hostile user would, one deterministic case per row, grouped in the
issue's categories:

  options      bad values (zero, negative, overflowing, non-numeric, unknown names and types)
  per-rank     option strings that differ between ranks (an MPMD launch: mpiexec -n 1 prog args : -n 1 prog other)
  yaml         YAML options files with syntax errors, unknown keys
  partition    partitions that do not fit the ranks or the shapes
  files        corrupted, truncated, empty and foreign HDF5 files as data or checkpoint
  kill         a kill -9 during checkpoint writes, then a restart
  paths        paths that are not ours to replace: /dev/null, a directory, a FIFO, a symbolic link
  nonfinite    NaN in the data, learning rates inf/nan/huge
  huge         sizes that do not fit in memory or in a PetscInt

Every run is classified as
  clear        non-zero exit (not a signal), a PETSc error message containing every word the case lists
  correct      exit 0 with the final result (and the case's own check of the output, if any)
  unclear      an error without a message, or whose message lacks a word the case lists
  hang         no exit within the time limit
  crash        killed by a signal
  silent       exit 0 where an error was due, or a result that is wrong or missing
  destroyed    a path that must survive (a device node, a directory, the last checkpoint) changed
and the tally table is printed. The test fails unless hang = silent = destroyed = unclear = crash = 0.

  catalogue.py <main_job> <ex6_example_nets> <share/ddnn> <tests/data> <mpiexec> [-v] [-k substring]
"""
import concurrent.futures
import hashlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

MAIN, EX6, SHARE, DATA, MPIEXEC = sys.argv[1:6]
VERBOSE = "-v" in sys.argv
ONLY = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv else None
OPTS = os.path.join(SHARE, "main_job.opts")
RESULT = "held-out relative L2 error"
TIMEOUT = 40
HAVE_H5IMPORT = shutil.which("h5import") is not None  # writes the foreign HDF5 files (NaN data); their cases are skipped visibly without it
work = tempfile.mkdtemp(prefix="ddnn_catalogue_")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
# float64: the float32 path's oneDNN kernels take seconds to create; the checks are the same
BASE = ["-options_file", OPTS, "-nsamples", "24", "-ntest", "8", "-grid", "8", "-epochs", "1", "-batch", "4", "-float32", "0"]
W = lambda *p: os.path.join(work, *p)
DATAFILE, CKPT = W("data.h5"), W("ckpt.h5")


class Case:
    def __init__(self, cat, name, args=None, np=1, expect="error", words=(), mpmd=None, prog=None, guard=(), check=None, memlimit=None, timeout=TIMEOUT, run=None, h5import=False):
        self.h5import = h5import
        self.cat, self.name, self.args, self.np, self.expect, self.words = cat, name, args or [], np, expect, [w.lower() for w in words]
        self.mpmd, self.prog, self.guard, self.check, self.memlimit, self.timeout, self.custom = mpmd, prog or MAIN, guard, check, memlimit, timeout, run


def fingerprint(path):
    """type and content of a path that must survive the run"""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ("missing",)
    if stat.S_ISREG(st.st_mode):
        return ("file", hashlib.sha256(open(path, "rb").read()).hexdigest())
    return (stat.S_IFMT(st.st_mode), st.st_rdev, st.st_ino, os.readlink(path) if stat.S_ISLNK(st.st_mode) else "")


def launch(c, args=None, mpmd=None, np=None, cwd=None):
    """runs the case's program; returns (status, output), status None on a timeout"""
    args, mpmd, np = args if args is not None else c.args, mpmd if mpmd is not None else c.mpmd, np or c.np
    if mpmd:
        cmd = [MPIEXEC]
        for i, a in enumerate(mpmd):
            cmd += ([":"] if i else []) + ["-n", "1", c.prog] + a
    elif np > 1:
        cmd = [MPIEXEC, "-n", str(np), c.prog] + args
    else:
        cmd = [c.prog] + args
    limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (c.memlimit, c.memlimit))) if c.memlimit else None
    p = subprocess.Popen(cmd, cwd=cwd or work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=limit, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=c.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out.decode(errors="replace")
    return p.returncode, out.decode(errors="replace")


def message(out):
    """the PETSc error lines, without the option tables and the banners"""
    keep, table = [], False
    for l in out.splitlines():
        if "PETSC ERROR:" not in l:
            continue
        l = l.split("PETSC ERROR:", 1)[1].strip()
        if l.startswith("PETSc Option Table entries") or l.startswith("----") and "End of Error Message" in l:
            table = True
        elif l.startswith("----") and "Error Message" in l:
            table = False
        elif not table and l and not l.startswith("Option left") and not l.startswith("Configure options"):
            keep.append(l)
    return "\n".join(keep)


def classify(c, rc, out):
    """(outcome, detail)"""
    if rc is None:
        return "hang", "no exit in %d s" % c.timeout
    if rc < 0 or rc >= 128:
        return "crash", "status %d" % rc
    msg = message(out) or out.strip()[-2000:]  # an error found before PETSc starts (a YAML file) is printed without PETSc's prefix
    if rc == 0:
        if c.expect == "error":
            return "silent", "exit 0, an error was due"
        if RESULT not in out:
            return "silent", "exit 0 without the result"
        bad = c.check(out) if c.check else None
        return ("silent", bad) if bad else ("correct", "")
    if c.expect == "ok":
        return "unclear", "an error where a correct run was due: " + msg[:200]
    if not msg:
        return "unclear", "status %d without a PETSc error message" % rc
    low = msg.lower()
    missing = [w for w in c.words if w not in low]
    if "out-of-range error code" in low:
        missing.append("(PETSc's 'out-of-range error code')")
    if missing:
        return "unclear", "the message lacks %s" % missing
    return "clear", ""


def run_case(c):
    before = {g: fingerprint(g) for g in c.guard}
    t0 = time.time()
    if c.custom:
        outcome, detail = c.custom(c)
        out = ""
    else:
        rc, out = launch(c)
        outcome, detail = classify(c, rc, out)
    after = {g: fingerprint(g) for g in c.guard}
    changed = [g for g in c.guard if before[g] != after[g]]
    if changed:
        outcome, detail = "destroyed", "changed: %s" % changed
    return c, outcome, detail, time.time() - t0, message(out)


def h5import(path, fields, S=24, n=8, value=lambda s, i: 0.1 * ((s * 7 + i) % 11)):
    """an HDF5 file written by another program (h5import): datasets of shape (S, 1, n, n) in float64"""
    args = []
    for f, v in fields.items():
        txt, cfg = path + "." + f + ".txt", path + "." + f + ".cfg"
        with open(txt, "w") as fp:
            for s in range(S):
                fp.write(" ".join(v(s, i) for i in range(n * n)) + "\n")
        with open(cfg, "w") as fp:
            fp.write("PATH %s\nINPUT-CLASS TEXTFP\nINPUT-SIZE 64\nRANK 4\nDIMENSION-SIZES %d 1 %d %d\nOUTPUT-CLASS FP\nOUTPUT-SIZE 64\nOUTPUT-ARCHITECTURE NATIVE\n" % (f, S, n, n))
        args += [txt, "-c", cfg]
    subprocess.run(["h5import"] + args + ["-o", path], check=True, stdout=subprocess.DEVNULL)


# ---------------------------------------------------------------------------------------------
# the files the cases start from: a data file, its checkpoint, and the unperturbed results
def prepare():
    c = Case("setup", "baseline")
    rc, out = launch(c, BASE + ["-data", DATAFILE, "-checkpoint", CKPT])
    if rc != 0 or RESULT not in out:
        print("the unperturbed run failed (status %s):\n%s" % (rc, out[-3000:]))
        sys.exit(1)
    shutil.copy(CKPT, W("ckpt_good.h5"))
    good = [l for l in out.splitlines() if l.startswith(RESULT)]
    rc, out = launch(c, BASE + ["-data", DATAFILE, "-checkpoint", W("ckpt_r.h5")] + ["-epochs", "2"])
    two = [l for l in out.splitlines() if l.startswith(RESULT)]
    shutil.copy(W("ckpt_good.h5"), W("ckpt_r.h5"))
    rc, out = launch(c, BASE + ["-data", DATAFILE, "-checkpoint", W("ckpt_r.h5"), "-epochs", "2", "-restart"])
    restarted = [l for l in out.splitlines() if l.startswith(RESULT)]
    if not two or two != restarted:
        print("a restarted run does not continue the uninterrupted one:\n%s\n%s" % (two, restarted))
        sys.exit(1)
    data = open(DATAFILE, "rb").read()
    ck = open(W("ckpt_good.h5"), "rb").read()
    open(W("trunc_data.h5"), "wb").write(data[: len(data) // 2])
    open(W("trunc_ck.h5"), "wb").write(ck[: len(ck) // 2])
    open(W("empty.h5"), "wb").close()
    open(W("text.h5"), "w").write("this is not an HDF5 file\n" * 40)
    zeros = bytearray(data)
    zeros[0:8] = bytes(8)  # the HDF5 signature
    open(W("nosig_data.h5"), "wb").write(bytes(zeros))
    hdr = bytearray(ck)
    for o in range(48, 96):  # inside the superblock / root group header
        hdr[o] ^= 0x5A
    open(W("hdr_ck.h5"), "wb").write(bytes(hdr))
    os.mkdir(W("dir"))
    os.mkdir(W("dirx.h5.tmp"))
    os.mkfifo(W("fifo"))
    os.symlink(W("ckpt_good.h5"), W("link.h5"))
    with open(W("bad_key.yaml"), "w") as fp:
        fp.write("c1:\n  layer:\n    conv:\n      no_such_key: 1\n")
    with open(W("tab.yaml"), "w") as fp:
        fp.write("net:\n\tinputs: x\n")
    with open(W("lr_rank1.yaml"), "w") as fp:
        fp.write("optimizer:\n  lr: 0.5\n")
    if not HAVE_H5IMPORT:
        return good, restarted
    h5import(W("foreign_names.h5"), {"x": lambda s, i: "%.3f" % (0.01 * i), "y": lambda s, i: "%.3f" % (0.02 * i)})
    h5import(W("nan_input.h5"), {"input": lambda s, i: "nan" if (s, i) == (3, 27) else "%.3f" % (0.01 * ((s + i) % 13)), "target": lambda s, i: "%.3f" % (0.02 * ((s * i) % 7))})
    h5import(W("inf_target.h5"), {"input": lambda s, i: "%.3f" % (0.01 * ((s + i) % 13)), "target": lambda s, i: "inf" if (s, i) == (5, 9) else "%.3f" % (0.02 * ((s * i) % 7))})
    h5import(W("clean_foreign.h5"), {"input": lambda s, i: "%.3f" % (0.01 * ((s + i) % 13)), "target": lambda s, i: "%.3f" % (0.02 * ((s * i) % 7))})
    return good, restarted


def same_result(expected):
    return lambda out: None if [l for l in out.splitlines() if l.startswith(RESULT)] == expected else "result %s, expected %s" % ([l for l in out.splitlines() if l.startswith(RESULT)], expected)


# ---------------------------------------------------------------------------------------------
def kill_during_checkpoint(c):
    """kill -9 a 2-rank run while it writes a checkpoint (its .tmp exists), then restart from the checkpoint"""
    ck = W("kill_ck.h5")
    for f in (ck, ck + ".tmp"):
        if os.path.exists(f):
            os.unlink(f)
    args = BASE + ["-data", DATAFILE, "-checkpoint", ck, "-epochs", "400", "-nsamples", "24", "-grid", "8"]
    p = subprocess.Popen([MPIEXEC, "-n", "2", MAIN] + args, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    caught, t0 = False, time.time()
    while time.time() - t0 < 25 and p.poll() is None:
        if os.path.exists(ck) and os.path.exists(ck + ".tmp"):  # a checkpoint exists and the next is being written
            caught = True
            break
        time.sleep(0.002)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    if not os.path.exists(ck):
        return "destroyed", "no checkpoint after the kill (caught mid-write: %s)" % caught
    rc, out = launch(c, BASE + ["-data", DATAFILE, "-checkpoint", ck, "-epochs", "2", "-restart"], np=2)
    outcome, detail = classify(c, rc, out)
    if outcome == "correct" and "restarted from" not in out:
        outcome, detail = "silent", "did not restart from the checkpoint"
    return outcome, detail + ("" if caught else " (the kill came between checkpoint writes)")


def cases(good, restarted):
    D = ["-data", DATAFILE]
    K = lambda name="c.h5": ["-checkpoint", W(name)]
    R = BASE + D + K()
    L = []
    add = lambda *a, **k: L.append(Case(*a, **k))
    # options
    add("options", "-batch 0", R + ["-batch", "0"], words=["-batch 0", "positive"])
    add("options", "-batch -4", R + ["-batch", "-4"], words=["-batch -4", "positive"])
    add("options", "-batch larger than the held-out set", R + ["-batch", "12"], words=["-batch 12", "-ntest 8"])
    add("options", "-nsamples abc", R + ["-nsamples", "abc"], words=["abc"])
    add("options", "-epochs two", R + ["-epochs", "two"], words=["two"])
    add("options", "-ntest 100", R + ["-ntest", "100"], words=["-ntest 100"])
    add("options", "-grid 4294967304 (wraps to 8)", R + ["-grid", "4294967304"], words=["-grid", "4294967304"])
    add("options", "-nsamples 9999999999", R + ["-nsamples", "9999999999"], words=["-nsamples", "9999999999"])
    add("options", "-c1_layer_conv_kernel 4294967299", R + ["-c1_layer_conv_kernel", "4294967299"], words=["-c1_layer_conv_kernel", "4294967299"])
    add("options", "-c1_layer_type nosuchtype", R + ["-c1_layer_type", "nosuchtype"], words=["nosuchtype"])
    add("options", "-net_layers with an undefined layer", R + ["-net_layers", "c1,a1,zzz"], words=["zzz"])
    add("options", "-prediction_layer nothere", R + ["-prediction_layer", "nothere"], words=["nothere"])
    add("options", "-float32 7", R + ["-float32", "7"], words=["7"])
    add("options", "a misspelt option", R + ["-optimzer_lr", "0.1"], words=["-optimzer_lr"])
    add("options", "-restart without a checkpoint", BASE + D + K("none.h5") + ["-restart"], words=["none.h5"])
    add("options", "-c1_layer_conv_padding -1", R + ["-c1_layer_conv_padding", "-1"], words=["padding", "-1"])
    add("options", "-nsamples 0", R + ["-nsamples", "0"], words=["-nsamples 0"])
    add("options", "-optimizer_type nosuch", R + ["-optimizer_type", "nosuch"], words=["nosuch"])
    add("options", "a loss fed only by the inputs (trains nothing)", R + ["-loss_layer_inputs", "x,target"], words=["nothing to differentiate", "loss"])
    add("options", "-epochs 0 (evaluates only)", R + ["-epochs", "0"], expect="ok")
    add("options", "correct run", R, expect="ok", check=same_result(good))
    # options differing between ranks (MPMD)
    add("per-rank", "-checkpoint differs", mpmd=[BASE + D + K("r0.h5"), BASE + D + K("r1.h5")], words=["differs between ranks", "r0.h5", "r1.h5"])
    add("per-rank", "-data differs", mpmd=[R, BASE + ["-data", W("other.h5")] + K()], words=["differs between ranks"])
    add("per-rank", "-epochs differs", mpmd=[R, R + ["-epochs", "2"]], words=["differ"])
    add("per-rank", "-batch differs", mpmd=[R, R + ["-batch", "8", "-ntest", "8"]], words=["differ"])
    add("per-rank", "-grid differs", mpmd=[R, R + ["-grid", "12"]], words=["differ"])
    add("per-rank", "-nsamples differs (regenerate)", mpmd=[BASE + ["-data", W("ns.h5")] + K(), BASE + ["-data", W("ns.h5"), "-nsamples", "32"] + K()], words=["differ"])
    add("per-rank", "a layer option on rank 1 only", mpmd=[R, R + ["-c3_layer_conv_out_channels", "8"]], words=["differ"])
    add("per-rank", "-optimizer_lr differs", mpmd=[R, R + ["-optimizer_lr", "0.5"]], words=["differ"])
    add("per-rank", "a bad option on rank 1 only", mpmd=[R, R + ["-batch", "0"]], words=["-batch 0", "rank 1"])
    add("per-rank", "an unknown option on rank 1 only", mpmd=[R, R + ["-bogus", "1"]], words=["-bogus"])
    add("per-rank", "a YAML file on rank 1 only", mpmd=[R, R + ["-options_file_yaml", W("lr_rank1.yaml")]], words=["options files", "differ between ranks", "lr_rank1.yaml"])
    add("per-rank", "-restart on rank 1 only", mpmd=[R, R + ["-restart"]], words=["differs between ranks", "-restart 1"])
    add("per-rank", "-regenerate on rank 1 only", mpmd=[R, R + ["-regenerate"]], words=["differs between ranks", "-regenerate 1"], guard=[DATAFILE])
    # YAML
    add("yaml", "syntax error", ["-options_file_yaml", os.path.join(DATA, "bad_syntax.yaml")], prog=EX6, words=["bad_syntax.yaml:4:9", "syntax"])
    add("yaml", "a tab for indentation", ["-options_file_yaml", W("tab.yaml")], prog=EX6, words=["tab.yaml:2"])
    add("yaml", "missing file", ["-options_file_yaml", W("nosuch.yaml")], prog=EX6, words=["nosuch.yaml"])
    add("yaml", "an unknown key", ["-options_file", os.path.join(SHARE, "lenet5.opts"), "-options_file_yaml", W("bad_key.yaml"), "-steps", "1"], prog=EX6, words=["-c1_layer_conv_no_such_key"])
    # partitions
    add("partition", "more ranks than grid points", R + ["-grid", "2"], np=3, words=["-grid 2", "too small for 3 ranks"])
    add("partition", "-data_partition not matching the ranks", ["-options_file", os.path.join(SHARE, "lenet5.opts"), "-steps", "1", "-data_partition", "1,1,3,1"], prog=EX6, np=2, words=["partition"])
    add("partition", "-data_batch 0", ["-options_file", os.path.join(SHARE, "lenet5.opts"), "-steps", "1", "-data_batch", "0"], prog=EX6, words=["-data_batch 0", "positive"])
    add("partition", "-data_partition with a zero", ["-options_file", os.path.join(SHARE, "lenet5.opts"), "-steps", "1", "-data_partition", "1,1,0,2"], prog=EX6, np=2, words=["partition"])
    # files
    add("files", "-checkpoint the same file as -data", BASE + D + ["-checkpoint", DATAFILE], words=["name the same file", "-checkpoint"], guard=[DATAFILE])
    add("files", "truncated data file", BASE + ["-data", W("trunc_data.h5")] + K(), words=["trunc_data.h5"], guard=[W("trunc_data.h5")])
    add("files", "empty data file", BASE + ["-data", W("empty.h5")] + K(), words=["empty.h5"], guard=[W("empty.h5")])
    add("files", "text file as data", BASE + ["-data", W("text.h5")] + K(), words=["text.h5"], guard=[W("text.h5")])
    add("files", "data file without its HDF5 signature", BASE + ["-data", W("nosig_data.h5")] + K(), np=2, words=["nosig_data.h5"])
    add("files", "foreign HDF5 file (other dataset names)", BASE + ["-data", W("foreign_names.h5")] + K(), words=["foreign_names.h5", "input"], h5import=True)
    add("files", "a checkpoint as the data file", BASE + ["-data", W("ckpt_good.h5")] + K(), words=["ckpt_good.h5", "input"])
    add("files", "a data file of another grid", BASE + D + K() + ["-grid", "16"], words=["1x8x8", "1x16x16"])
    add("files", "truncated checkpoint", BASE + D + ["-checkpoint", W("trunc_ck.h5"), "-restart", "-epochs", "2"], words=["trunc_ck.h5"])
    add("files", "checkpoint with a corrupted header", BASE + D + ["-checkpoint", W("hdr_ck.h5"), "-restart", "-epochs", "2"], np=2, words=["hdr_ck.h5"])
    add("files", "the data file as checkpoint", BASE + D + ["-checkpoint", W("data_as_ck.h5"), "-restart", "-epochs", "2"], words=["data_as_ck.h5"])
    add("files", "checkpoint of another network", BASE + D + ["-checkpoint", W("ckpt_other.h5"), "-restart", "-epochs", "2", "-c5_layer_conv_out_channels", "32"], words=["first that differs", "c5.weight"])
    add("files", "a clean foreign data file (h5import)", BASE + ["-data", W("clean_foreign.h5")] + K(), expect="ok", h5import=True)
    add("files", "restart from a good checkpoint on 2 ranks", BASE + D + ["-checkpoint", W("ckpt_r2.h5"), "-restart", "-epochs", "2"], np=2, expect="ok", check=same_result(restarted))
    # kill -9
    add("kill", "kill -9 during a checkpoint write, then restart", np=2, expect="ok", run=kill_during_checkpoint, timeout=60)
    # paths
    add("paths", "-checkpoint /dev/null", BASE + D + ["-checkpoint", "/dev/null"], words=["/dev/null", "not a regular file"], guard=["/dev/null"])
    add("paths", "-data /dev/null -regenerate", BASE + ["-data", "/dev/null", "-regenerate"] + K(), words=["/dev/null", "not a regular file"], guard=["/dev/null"])
    add("paths", "-data /dev/null", BASE + ["-data", "/dev/null"] + K(), words=["/dev/null"], guard=["/dev/null"])
    add("paths", "-data a directory", BASE + ["-data", W("dir")] + K(), words=[W("dir")], guard=[W("dir")])
    add("paths", "-data a directory -regenerate", BASE + ["-data", W("dir"), "-regenerate"] + K(), words=[W("dir"), "not a regular file"], guard=[W("dir")])
    add("paths", "-checkpoint a directory", BASE + D + ["-checkpoint", W("dir")], words=[W("dir"), "not a regular file"], guard=[W("dir")])
    add("paths", "-checkpoint a FIFO", BASE + D + ["-checkpoint", W("fifo")], words=[W("fifo"), "not a regular file"], guard=[W("fifo")])
    add("paths", "-checkpoint a symbolic link", BASE + D + ["-checkpoint", W("link.h5")], words=["symbolic link"], guard=[W("link.h5"), W("ckpt_good.h5")])
    add("paths", "-checkpoint whose .tmp is a directory", BASE + D + ["-checkpoint", W("dirx.h5")], words=[W("dirx.h5.tmp")], guard=[W("dirx.h5.tmp")])
    add("paths", "-checkpoint in a missing directory", BASE + D + ["-checkpoint", W("nosuchdir", "c.h5")], words=["nosuchdir"])
    add("paths", "-data in a missing directory", BASE + ["-data", W("nosuchdir", "d.h5")] + K(), words=["nosuchdir"])
    # non-finite
    add("nonfinite", "-optimizer_lr 1e400 (inf)", R + ["-optimizer_lr", "1e400"], words=["learning rate inf", "-optimizer_lr", "finite"])
    add("nonfinite", "-optimizer_lr nan", R + ["-optimizer_lr", "nan"], words=["learning rate nan", "-optimizer_lr", "finite"])
    add("nonfinite", "-optimizer_lr -1", R + ["-optimizer_lr", "-1"], words=["learning rate -1", "-optimizer_lr", "positive"])
    add("nonfinite", "-optimizer_lr 1e30 (diverges)", R + ["-optimizer_lr", "1e30"], np=2, words=["diverged", "step"])
    add("nonfinite", "a NaN in the input data", BASE + ["-data", W("nan_input.h5")] + K(), words=["Dataset \"input\"", "nan_input.h5", "holds a nan in sample 3"], h5import=True)
    add("nonfinite", "an inf in the target data", BASE + ["-data", W("inf_target.h5")] + K(), words=["Dataset \"target\"", "inf_target.h5", "holds an inf in sample"], h5import=True)
    add("nonfinite", "a NaN in the input, -dd_check_finite", BASE + ["-data", W("nan_input.h5"), "-dd_check_finite"] + K(), words=["holds a nan in sample 3"], h5import=True)
    # huge sizes
    add("huge", "-grid 30000 (3.6 GB per vector)", R + ["-grid", "30000"], words=["out of memory", "bytes"], memlimit=3 << 30)
    add("huge", "-c1_layer_conv_out_channels 100000000", R + ["-c1_layer_conv_out_channels", "100000000"], words=["c1"], memlimit=3 << 30)
    add("huge", "-c1_layer_conv_out_channels 3000000 (fits PetscInt, not memory)", R + ["-c1_layer_conv_out_channels", "3000000"], words=["out of memory", "bytes", "c1"], memlimit=3 << 30)
    add("huge", "-batch 4000000 -ntest 4000000", R + ["-batch", "4000000", "-ntest", "4000000", "-nsamples", "8000000"], words=["samples"], memlimit=3 << 30)
    add("huge", "-c1_layer_conv_kernel 1000", R + ["-c1_layer_conv_kernel", "1000"], words=["c1"], memlimit=3 << 30)
    skipped = [c.name for c in L if c.h5import and not HAVE_H5IMPORT]
    if skipped:
        print("SKIPPED (no h5import to write foreign HDF5 files): " + "; ".join(skipped))
    return [c for c in L if (HAVE_H5IMPORT or not c.h5import) and (not ONLY or ONLY in c.name or ONLY == c.cat)]


good, restarted = prepare()
shutil.copy(DATAFILE, W("data_as_ck.h5"))
shutil.copy(W("ckpt_good.h5"), W("ckpt_other.h5"))
shutil.copy(W("ckpt_good.h5"), W("ckpt_r2.h5"))
all_cases = cases(good, restarted)
t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
    results = list(ex.map(run_case, all_cases))
# the data file the cases share is never changed by them
if open(DATAFILE, "rb").read() != open(W("data_as_ck.h5"), "rb").read():
    results.append((Case("files", "the shared data file"), "destroyed", "changed by some case", 0, ""))

OUTCOMES = ["clear", "correct", "unclear", "hang", "crash", "silent", "destroyed"]
cats = []
for c, o, d, t, m in results:
    if c.cat not in cats:
        cats.append(c.cat)
for c, o, d, t, m in results:
    bad = o not in ("clear", "correct")
    if bad or VERBOSE or d:
        print("%-9s %-10s %-55s %5.1fs %s" % (o.upper() if bad else o, c.cat, c.name[:55], t, d))
        if VERBOSE and m:
            print("           " + m.splitlines()[min(1, len(m.splitlines()) - 1)][:200])
print("\n%-10s" % "category" + "".join("%10s" % o for o in OUTCOMES))
tot = {o: 0 for o in OUTCOMES}
for cat in cats:
    row = {o: sum(1 for c, oo, d, t, m in results if c.cat == cat and oo == o) for o in OUTCOMES}
    for o in OUTCOMES:
        tot[o] += row[o]
    print("%-10s" % cat + "".join("%10d" % row[o] for o in OUTCOMES))
print("%-10s" % "total" + "".join("%10d" % tot[o] for o in OUTCOMES))
print("%d runs in %.0f s" % (len(results), time.time() - t0))
shutil.rmtree(work, ignore_errors=True)
failed = sum(tot[o] for o in ("unclear", "hang", "crash", "silent", "destroyed"))
sys.exit(1 if failed else 0)
