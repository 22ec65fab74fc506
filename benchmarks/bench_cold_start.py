"""Cold start: process start -> first PCM byte, `voxcli speak --raw` against piper-tts's CLI.

    python benchmarks/bench_cold_start.py [--runs 9] [--text "..."] [--baseline] [--no-warm-cache]

Both CLIs are run as installed (the `voxcli` and `piper` entry points on
PATH, or `python -m` with --module), on the same voice file (en_US-joe-medium
from voxcli's registry), interleaved run by run so a load change on the
machine hits both alike. Each run spawns the process, writes the text (piper
reads stdin) and times the first byte on stdout. Prints p50/p90 per CLI and
the ratio of the p50s; voxcli's derived cache (split graph, optimized graphs)
is filled by one discarded run first unless --no-warm-cache (then the first
voxcli run pays for building it, as a first-ever `speak` does).

The machine these helpers run on is shared: trust the ratio, not the
milliseconds; the load average (`uptime`) is printed before and after.

Bytecode: both CLIs run with `PYTHONPYCACHEPREFIX` set to one temp dir (and
PYTHONDONTWRITEBYTECODE unset), so both start from cached bytecode as an
installed package does; an environment that forbids bytecode otherwise makes
voxcli (an editable checkout here) compile ~300 modules on every start while
piper's wheel has its .pyc (`--as-is` keeps the environment as it is).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TEXT = "Hello there. This is a cold start."


def voice_path() -> Path:
    """The voice file voxcli speaks with by default (piper gets the same file)."""
    from voxcli.hub.resolve import resolve_model

    bundle = resolve_model(None, kind="tts")
    return next(iter(bundle.find(".onnx")))


BASE_ENV: dict[str, str] = dict(os.environ)
"""The environment both CLIs run in (see "Bytecode" above; set by `main`)."""
CPU_S: dict[str, list[float]] = {}
"""Whole-process CPU seconds per run and CLI (less sensitive to other load than wall time)."""


def first_byte_ms(cmd: list[str], stdin_text: str | None, env: dict[str, str] | None = None) -> float:
    """Milliseconds from spawning `cmd` to its first byte on stdout (the rest is drained)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**BASE_ENV, **env})
    assert proc.stdout is not None
    if stdin_text is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin_text.encode() + b"\n")
        proc.stdin.close()
    first = proc.stdout.read(1)
    ms = (time.perf_counter() - t0) * 1000.0
    proc.stdout.read()
    if proc.wait(timeout=120) != 0 or not first:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed (exit {proc.returncode})")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S.setdefault(" ".join(cmd) + repr(env), []).append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return ms


def commands(text: str, module: bool, baseline: bool,
             other: Path | None = None) -> dict[str, tuple[list[str], str | None, dict[str, str]]]:
    """name -> (argv, stdin text, extra environment) for each CLI."""
    model = str(voice_path())
    vox = [sys.executable, "-m", "voxcli"] if module or not shutil.which("voxcli") else [shutil.which("voxcli") or ""]
    pip = [sys.executable, "-m", "piper"] if module or not shutil.which("piper") else [shutil.which("piper") or ""]
    arms = {
        "voxcli": ([*vox, "speak", text, "--raw", "--quiet"], None, {}),
        "piper": ([*pip, "-m", model, "--output-raw"], text, {}),
    }
    if baseline:  # voxcli as before the optimized-graph cache: every graph optimized in memory
        arms["vox-nocache"] = ([*vox, "speak", text, "--raw", "--quiet"], None, {"VOXCLI_NO_GRAPH_CACHE": "1"})
    if other is not None:  # another checkout (e.g. `git archive HEAD | tar -x -C DIR`): before/after in one run
        arms["vox-other"] = ([sys.executable, "-m", "voxcli", "speak", text, "--raw", "--quiet"], None,
                             {"PYTHONPATH": str(other)})
    return arms


def _load() -> str:
    """1/5/15-minute load averages, as `uptime` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--module", action="store_true", help="run both as `python -m` instead of the entry points")
    ap.add_argument("--no-warm-cache", action="store_true", help="do not fill voxcli's derived cache first")
    ap.add_argument("--baseline", action="store_true",
                    help="also run voxcli with VOXCLI_NO_GRAPH_CACHE=1 (optimizing in memory, as before)")
    ap.add_argument("--as-is", action="store_true", help="keep the bytecode settings of the environment")
    ap.add_argument("--other", type=Path, default=None, help="also run `python -m voxcli` from this source tree")
    args = ap.parse_args()
    if not args.as_is:
        import tempfile

        BASE_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        BASE_ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "voxcli-bench-pycache")
    load_before = _load()
    cmds = commands(args.text, args.module, args.baseline, args.other)
    if not args.no_warm_cache:
        for arm in cmds.values():
            first_byte_ms(*arm)  # derived cache filled, files in the page cache for all
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for i in range(args.runs):
        order = list(cmds)[i % len(cmds):] + list(cmds)[:i % len(cmds)]  # none always goes first
        for name in order:
            times[name].append(first_byte_ms(*cmds[name]))
        print(f"run {i + 1}/{args.runs}: " + "  ".join(f"{n} {times[n][-1]:6.0f} ms" for n in cmds), flush=True)
    print(f"\ntext: {args.text!r}, {args.runs} interleaved runs (shared machine: compare the ratio); "
          f"load average before {load_before}, after {_load()}")
    for name, ms in times.items():
        argv, _stdin, env = cmds[name]
        cpu = statistics.median(CPU_S[" ".join(argv) + repr(env)][-len(ms):])
        print(f"{name:<11} first byte p50 {statistics.median(ms):6.0f} ms  p90 {pct(ms, 0.9):6.0f} ms  "
              f"(whole process CPU p50 {cpu:.2f} s)")
    for name in (n for n in cmds if n != "piper"):
        ratio = statistics.median(times[name]) / statistics.median(times["piper"])
        print(f"ratio {name}/piper p50: {ratio:.2f}x")


if __name__ == "__main__":
    main()
