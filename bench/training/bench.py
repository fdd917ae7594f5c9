"""How the reference CNN (examples/training/cnn_torch.py) scales: samples/s on 1, 2, 4, 8 and 16 CPU ranks, and on the GPU.

Runs the workload's throughput mode with plain mpiexec (no cluster) at each
rank count up to the machine's cores, then on each GPU it finds, and prints
one table with samples/s, the speed-up over one CPU rank and the efficiency
(speed-up / ranks), then the targets (docs/training.md):

- NFR-001: at least 2x at 4 ranks over 1 rank;
- at least 0.8 efficiency at 8 ranks (on a machine with 16 cores or more);
- a GPU at least 50x one CPU rank.

A machine with PyTorch but no MPI library and no network gets one from
wheels: --wheels DIR installs the mpich wheel (and mpi4py's, if given and
missing) into a temporary folder first. `make bench-training` downloads the
wheel into the cache and runs this.

    python3 bench/training/bench.py [--ranks 1,2,4,8,16] [--wheels DIR] [--out table.md]
"""

from __future__ import annotations

import argparse
import atexit
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "..", "..", "examples", "training", "cnn_torch.py")
PREFIX = "MPIJOB_THROUGHPUT "


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def mpi_works(env: dict) -> bool:
    """mpi4py loads an MPI library and mpiexec is on PATH."""
    if not shutil.which("mpiexec", path=env.get("PATH")):
        return False
    r = subprocess.run([sys.executable, "-c", "from mpi4py import MPI; print(MPI.Get_library_version())"], env=env, capture_output=True, text=True)
    return r.returncode == 0


def install_wheels(wheels: str, env: dict, keep_mpi4py: bool) -> dict:
    """Install the wheels in DIR into a temporary folder and point PATH, LD_LIBRARY_PATH and PYTHONPATH at it."""
    files = sorted(glob.glob(os.path.join(wheels, "*.whl")))
    if not any(os.path.basename(f).startswith("mpich-") for f in files):
        sys.exit(f"--wheels {wheels}: no mpich wheel there; download it into that folder (make bench-training does)")
    tag = f"-cp{sys.version_info[0]}{sys.version_info[1]}-"
    # mpi4py's wheel for this Python only; none when keeping the one this
    # Python has (it loads whatever MPI it finds).
    files = [f for f in files if not os.path.basename(f).startswith("mpi4py-") or (tag in os.path.basename(f) and not keep_mpi4py)]
    # --prefix, not --target: the mpich wheel's bin/ and lib/ (mpiexec,
    # libmpi.so.12) land under the prefix only this way.
    prefix = tempfile.mkdtemp(prefix="mpijob-bench-mpi-")
    atexit.register(shutil.rmtree, prefix, True)
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
                    "--no-warn-script-location", "--prefix", prefix, *files], check=True)
    sites = glob.glob(os.path.join(prefix, "lib*", "python3*", "*-packages")) + glob.glob(os.path.join(prefix, "local", "lib*", "python3*", "*-packages"))
    log(f"installed {', '.join(os.path.basename(f) for f in files)} under {prefix} in {time.monotonic() - t:.1f}s")
    env = dict(env)
    env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + os.path.join(prefix, "local", "bin") + os.pathsep + env.get("PATH", "")
    env["LD_LIBRARY_PATH"] = os.pathsep.join([os.path.join(prefix, "lib"), os.path.join(prefix, "local", "lib"), env.get("LD_LIBRARY_PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([*sites, env.get("PYTHONPATH", "")])
    return env


def launcher(env: dict) -> str:
    out = subprocess.run(["mpiexec", "--version"], env=env, capture_output=True, text=True)
    text = out.stdout + out.stderr
    if "HYDRA" in text or "Hydra" in text:
        return "hydra"
    if "Open MPI" in text or "OpenRTE" in text or "PRRTE" in text or "prterun" in text:
        return "openmpi"
    return "unknown"


def mpiexec(kind: str, n: int, cores: int) -> list[str]:
    if kind == "hydra":
        return ["mpiexec", "-n", str(n), "-bind-to", "core"]
    if kind == "openmpi":
        cmd = ["mpiexec", "-n", str(n)]
        return cmd + (["--oversubscribe", "--bind-to", "none"] if n > cores else ["--bind-to", "core"])
    return ["mpiexec", "-n", str(n)]


def run(cmd: list[str], env: dict, timeout: int) -> dict:
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(PREFIX)]
    if r.returncode != 0 or not lines:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode} without a {PREFIX.strip()} line")
    out = json.loads(lines[-1][len(PREFIX):])
    out["wall_seconds"] = round(time.monotonic() - t, 1)
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--ranks", default="1,2,4,8,16", help="CPU rank counts; those above the machine's cores are skipped")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-per-rank", type=int, default=64)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--overlap", action="store_true", help="CPU ranks sum gradients bucket by bucket during backward (the workload's --overlap)")
    p.add_argument("--ceiling", action="store_true",
                   help="also run each CPU rank count with --alone (no rank sums or waits): the efficiency the cores themselves allow, whatever the communication")
    p.add_argument("--gpu", choices=("auto", "no"), default="auto", help="auto: also on the GPUs this PyTorch sees")
    p.add_argument("--gpu-batches", default="64,512", help="batch per GPU rank: the CPU's, and one that gives a GPU enough work per step")
    p.add_argument("--wheels", default="", help="folder with the mpich wheel (and mpi4py's), installed when this machine has no working MPI")
    p.add_argument("--mpi", choices=("auto", "wheels"), default="auto", help="auto: this machine's MPI when it works, else --wheels; wheels: always the wheels in --wheels")
    p.add_argument("--timeout", type=int, default=300, help="seconds for one run")
    p.add_argument("--out", default="", help="also write the table (markdown) here, and the raw results beside it as .json")
    args = p.parse_args(argv)

    start = time.monotonic()
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", PIP_ROOT_USER_ACTION="ignore")
    if os.geteuid() == 0:  # Open MPI refuses root without these; a bench machine often runs as root
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if args.mpi == "wheels" or not mpi_works(env):
        if not args.wheels:
            sys.exit("no working MPI here (mpiexec and mpi4py): pass --wheels DIR with the mpich wheel (make bench-training downloads it)")
        have = subprocess.run([sys.executable, "-c", "import mpi4py"], env=env, capture_output=True).returncode == 0
        env = install_wheels(args.wheels, env, keep_mpi4py=have and args.mpi == "auto")
        if not mpi_works(env):
            sys.exit(f"still no working MPI after installing the wheels in {args.wheels}")
    kind = launcher(env)
    cores = len(os.sched_getaffinity(0))
    import torch  # only to count GPUs and name the machine

    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    machine = f"{cores} cores ({cpu or 'unknown CPU'})"
    gpus = torch.cuda.device_count() if args.gpu == "auto" else 0
    if gpus:
        machine += f", {gpus} x {torch.cuda.get_device_name(0)}"
    log(f"{machine}; MPI launcher: {kind}; torch {torch.__version__}")

    common = ["--mode", "throughput", "--width", str(args.width)]
    cpu_only = ["--overlap"] if args.overlap else []
    results = []
    alone: dict[int, float] = {}  # --ceiling: samples/s with no communication, by rank count
    one = 0.0
    for n in [int(x) for x in args.ranks.split(",") if x.strip()]:
        if n > cores:
            log(f"{n} ranks: skipped, this machine has {cores} cores")
            continue
        extra = ["--baseline", str(one)] if one else []
        cmd = [*mpiexec(kind, n, cores), sys.executable, WORKLOAD, *common, "--steps", str(args.steps), "--warmup", "5",
               "--device", "cpu", "--batch-per-rank", str(args.batch_per_rank), *cpu_only, *extra]
        r = run(cmd, env, args.timeout)
        if n == 1:
            one = r["samples_per_second"]
        results.append(r)
        log(f"cpu x{n}: {r['samples_per_second']:.0f} samples/s ({r['wall_seconds']}s)")
        if args.ceiling and n > 1:
            a = run([*cmd, "--alone"], env, args.timeout)
            alone[n] = a["samples_per_second"]
            log(f"cpu x{n}, alone: {a['samples_per_second']:.0f} samples/s ({a['wall_seconds']}s)")
    for b in [int(x) for x in args.gpu_batches.split(",") if x.strip()] if gpus else []:
        # More steps on a GPU: each is milliseconds.
        cmd = [*mpiexec(kind, gpus, cores), sys.executable, WORKLOAD, *common, "--device", "cuda", "--batch-per-rank", str(b),
               "--steps", str(max(args.steps, 200)), "--warmup", "20"]
        r = run(cmd, env, args.timeout)
        results.append(r)
        log(f"cuda x{gpus}, batch {b}: {r['samples_per_second']:.0f} samples/s ({r['wall_seconds']}s)")

    heads = ["ranks", "device", "batch per rank", "samples/s", "per rank", "speed-up over 1 CPU rank", "efficiency", "allreduce share of a step",
             "of it, waiting for the slowest rank", "compute per step, fastest-slowest rank"] + (["efficiency with no communication"] if args.ceiling else [])
    rows = ["| " + " | ".join(heads) + " |", "|" + "|".join(" --- " if h == "device" else " ---: " for h in heads) + "|"]
    for r in results:
        speedup = r["samples_per_second"] / one if one else 0.0
        cpu = r["device"] == "cpu"
        cells = [str(r["ranks"]), r["device"], str(r["batch_per_rank"]), f"{r['samples_per_second']:.0f}", f"{r['samples_per_second_per_rank']:.0f}",
                 f"{speedup:.2f}x" if one else "(no 1-rank run)", f"{speedup / r['ranks']:.2f}" if cpu and one else "", f"{100 * r['allreduce_share']:.1f} %",
                 f"{100 * r.get('waiting_for_slowest_share', 0.0):.1f} %", f"{r.get('compute_ms_fastest_rank') or 0:.1f}-{r.get('compute_ms_slowest_rank') or 0:.1f} ms"]
        if args.ceiling:
            cells.append(f"{alone[r['ranks']] / (r['ranks'] * one):.2f}" if cpu and r["ranks"] in alone and one else "")
        rows.append("| " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    summing = "overlapped allreduces" if args.overlap else "one allreduce"
    print()
    print(f"Machine: {machine}; torch {torch.__version__}; MPI: {kind}; {summing} per step; model width {args.width} "
          f"({results[0]['allreduce_mb'] if results else '?'} MB of gradients per step)")
    print(table)
    print()
    by = {(r["device"], r["ranks"], r["batch_per_rank"]): r for r in results}
    verdicts = []

    def target(name: str, key, ok) -> None:
        r = by.get(key)
        verdicts.append(f"- {name}: " + ("not measured here" if r is None or not one else ("met" if ok(r) else "NOT met") + f" ({r['samples_per_second'] / one:.2f}x)"))

    target("NFR-001, at least 2x at 4 CPU ranks", ("cpu", 4, args.batch_per_rank), lambda r: r["samples_per_second"] >= 2 * one)
    if cores >= 16:
        target("at least 0.8 efficiency at 8 CPU ranks (16 cores)", ("cpu", 8, args.batch_per_rank), lambda r: r["samples_per_second"] >= 0.8 * 8 * one)
        if 8 in alone and one:
            verdicts[-1] += f"; with no communication at all, 8 ranks on these cores give {alone[8] / (8 * one):.2f}"
    else:
        verdicts.append(f"- at least 0.8 efficiency at 8 CPU ranks: not measured here ({cores} cores; the target is for 16)")
    best_gpu = max((r for r in results if r["device"] == "cuda"), key=lambda r: r["samples_per_second"], default=None)
    if best_gpu:
        target("a GPU at least 50x one CPU rank", ("cuda", best_gpu["ranks"], best_gpu["batch_per_rank"]), lambda r: r["samples_per_second"] >= 50 * one)
    else:
        verdicts.append("- a GPU at least 50x one CPU rank: not measured here (no GPU)")
    print("\n".join(verdicts))
    log(f"done in {time.monotonic() - start:.0f}s")
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Machine: {machine}; torch {torch.__version__}; MPI: {kind}\n\n{table}\n\n" + "\n".join(verdicts) + "\n")
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump({"machine": machine, "mpi": kind, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
