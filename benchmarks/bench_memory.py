#!/usr/bin/env python3
"""Peak RSS of the installed `voxcli` against input length and input speed (issue 18, "Done when").

    python benchmarks/bench_memory.py                          # 1 and 3 minutes, every path
    python benchmarks/bench_memory.py --hours 10               # the full run: 1 min, 1 h, 10 h
    python benchmarks/bench_memory.py --minutes 1,10,60 --paths transcribe-stdin,speak --json

Each path runs the CLI as installed (a `voxcli ...` subprocess, the program
people use, not an in-process API) once per input length:

- transcribe-file:  `voxcli transcribe FILE` on a generated FLAC;
- transcribe-stdin: `voxcli transcribe -` with the same audio written to its
  stdin as s16le as fast as the pipe takes it (unpaced, faster than real
  time: the case that needs back-pressure);
- speak:            `voxcli speak - --raw` with text written to stdin
  (~15 characters per second of speech), the PCM drained and counted;
- chat:             `voxcli chat --input FILE --llm local --max-tokens 8 -o tmp.wav`.
  The scripted mic feeds its input in real time (that is chat's contract),
  so an N-minute input takes N minutes of wall time whatever the CPU.

The audio is low-level noise with a few sentences in voxcli's own voice (made
once with `voxcli speak`) spliced in every `--every-s` seconds. It is
generated, never stored whole: blocks are computed on demand, and the FLAC
for the file paths is written a block at a time, so the harness itself is
flat and 10 hours cost only the FLAC on disk (deleted after the run).

Peak RSS is the kernel's high-water mark for the voxcli process: ru_maxrss
from wait4() (exact, taken at exit), cross-checked by sampling VmHWM from
/proc/<pid>/status while it runs. The goal (issue 18): every length within
50 MB of the shortest one (the 1-minute figure), i.e. flat in input length.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterator, Optional

import numpy as np

PATHS = ("transcribe-file", "transcribe-stdin", "speak", "chat")
GOAL_MB = 50.0
"""Issue 18: peak RSS at any length within this of the shortest (1-minute) run."""
RSS_LOG_S = 60.0
"""`--rss-log` interval: one line per minute shows where a long run grows (the peak alone does not)."""
WARMUP_MIN = 0.1
"""Unmeasured first run per path (6 s of input): builds and hashes any derived model cache."""
VOICE_RATE = 22050
"""The catalog voice's rate: `speak --raw` bytes -> seconds, a sanity figure only."""
CHARS_PER_S = 15.0
"""Speaking rate used to size `speak -` text to N minutes of speech."""
SENTENCES = ("The quick brown fox jumps over the lazy dog. "
             "Please tell me the capital of France, and keep it short.")
PARAGRAPH = ("Streaming speech begins before the whole paragraph has arrived, which keeps the first audio fast. "
             "Memory must stay flat however long the text is, because nothing waits for the end of the input. "
             "This paragraph repeats until the requested number of minutes of speech has been written. ")


@dataclass(frozen=True)
class Program:
    """A deterministic endless audio program: noise, with `speech` every `every_s` seconds."""

    rate: int
    speech: np.ndarray
    """int16 samples of the spoken sentences, at `rate`."""
    every_s: float = 120.0
    offset_s: float = 2.0
    """Where the speech starts inside each period (so even a short run hears it once)."""
    noise_dbfs: float = -70.0
    seed: int = 18
    noise: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A precomputed loop (7 s + 1 sample, so no block size divides it) instead of fresh noise per block:
        # keeps the generator cheap on a shared CPU; repetition does not matter to a VAD.
        sigma = 32768.0 * 10 ** (self.noise_dbfs / 20)
        rng = np.random.default_rng(self.seed)
        loop = np.clip(np.round(rng.normal(0.0, sigma, 7 * self.rate + 1)), -32768, 32767).astype(np.int16)
        object.__setattr__(self, "noise", loop)

    def block(self, start: int, n: int) -> np.ndarray:
        """Samples [start, start + n) of the program, int16 (the same whatever the block size)."""
        idx = (np.arange(start, start + n) % self.noise.size)
        out = self.noise[idx].copy()
        period = max(int(self.every_s * self.rate), self.speech.size + 1)
        offset = int(self.offset_s * self.rate)
        for p in range(start // period - 1, (start + n) // period + 1):
            s0 = p * period + offset
            lo, hi = max(start, s0), min(start + n, s0 + self.speech.size)
            if p >= 0 and lo < hi:
                out[lo - start:hi - start] = self.speech[lo - s0:hi - s0]
        return out

    def blocks(self, total: int, n: int) -> Iterator[np.ndarray]:
        """The first `total` samples, `n` at a time."""
        for start in range(0, total, n):
            yield self.block(start, min(n, total - start))


def offline_env() -> dict[str, str]:
    """Never download during a measurement (env, not --offline: older checkouts lack the flag)."""
    return {**os.environ, "VOXCLI_OFFLINE": "1"}


def make_speech(rate: int, text: str = SENTENCES, cmd: tuple[str, ...] = ("voxcli",)) -> np.ndarray:
    """The sentences in voxcli's own voice, via the installed CLI (int16 at `rate`)."""
    pcm = subprocess.run([*cmd, "speak", text, "--raw", "--rate", str(rate), "--format", "s16le", "-q"],
                         check=True, capture_output=True, env=offline_env(), cwd=tempfile.gettempdir()).stdout
    return np.frombuffer(pcm, dtype="<i2").copy()


def write_flac(path: Path, program: Program, total: int) -> None:
    """The program's first `total` samples as 16-bit FLAC, written block by block (flat in length)."""
    import soundfile as sf

    with sf.SoundFile(str(path), "w", samplerate=program.rate, channels=1, format="FLAC", subtype="PCM_16") as f:
        for b in program.blocks(total, program.rate * 10):
            f.write(b)


def text_chunks(chars: int, size: int = 4096) -> Iterator[bytes]:
    """`chars` characters of PARAGRAPH repeated, in pieces of `size`, ending in a newline."""
    whole = PARAGRAPH.encode()
    reps = -(-size // len(whole)) + 1
    buf = whole * reps
    sent = 0
    while sent < chars:
        k = min(size, chars - sent)
        off = sent % len(whole)
        yield buf[off:off + k]
        sent += k
    yield b"\n"


@dataclass
class Measurement:
    """One voxcli run."""

    path: str
    minutes: float
    peak_rss_mb: float
    """ru_maxrss of the process (wait4): the kernel's high-water mark, exact."""
    sampled_hwm_mb: float
    """Largest VmHWM seen while polling /proc (a cross-check; may miss the last moments)."""
    wall_s: float
    x_real_time: float
    """Input minutes / wall minutes (>1: faster than real time; chat is paced at 1 by design)."""
    exit_code: int
    out: str
    """What came out, as a sanity check: lines of text, or seconds of PCM."""
    stderr_tail: str = ""
    growth_mb: Optional[float] = None
    """Peak RSS minus the shortest run's of the same path (filled in by `judge`)."""


def _status_kb(pid: int, key: str = "VmHWM:") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _rollup(pid: int) -> str:
    """Where the RSS is, MB: anon = C heaps, onnxruntime arenas; shmem = LLM KV caches; file = weights, libraries."""
    keys = {"Pss_Anon:": "anon", "Pss_Shmem:": "shmem", "Pss_File:": "file"}
    try:
        rows = [ln.split() for ln in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()]
    except OSError:
        return ""
    return " ".join(f"{keys[r[0]]}={int(r[1]) / 1024:.0f}" for r in rows if r and r[0] in keys)


@dataclass(frozen=True)
class RunResult:
    """What `run_measured` saw of one process."""

    exit_code: int
    peak_rss_mb: float
    sampled_hwm_mb: float
    wall_s: float
    stdout_count: int
    """Lines of stdout, or bytes with count_bytes=True."""
    stdout_head: bytes
    """The first bytes of stdout (the first transcript line: did it hear the speech?)."""
    stderr_tail: str


def run_measured(argv: list[str], *, feed: Callable[[IO[bytes]], None] | None = None,
                 count_bytes: bool = False, timeout_s: float | None = None,
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 rss_log: Path | None = None) -> RunResult:
    """Run `argv` to the end, `feed(stdin)` writing its input from a thread, stdout drained and counted.

    The peak is ru_maxrss from wait4() on this very pid (RUSAGE_CHILDREN would
    mix all children of the harness); VmHWM is polled as a cross-check. Run it
    with `cwd` outside the source tree: `python -m voxcli` puts the cwd first on
    sys.path, so a checkout there would silently shadow the one under test.
    `rss_log`: a line "unix-time elapsed-s VmRSS-MB VmHWM-MB anon=MB shmem=MB file=MB argv" every RSS_LOG_S.
    """
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd)
        counted = [0]
        head = bytearray()

        def drain() -> None:
            while chunk := proc.stdout.read1(1 << 16):  # type: ignore[union-attr]
                counted[0] += len(chunk) if count_bytes else chunk.count(b"\n")
                if len(head) < 400:
                    head.extend(chunk[:400])

        def write() -> None:
            try:
                feed(proc.stdin)  # type: ignore[misc,arg-type]
            except OSError:
                pass  # BrokenPipe: the process exited early; its exit code says why
            finally:
                try:
                    proc.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass

        threads = [threading.Thread(target=drain, daemon=True)]
        if feed:
            threads.append(threading.Thread(target=write, daemon=True))
        for t in threads:
            t.start()
        hwm, next_log = 0, t0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            hwm = max(hwm, _status_kb(proc.pid))
            if rss_log is not None and time.monotonic() >= next_log:
                next_log += RSS_LOG_S
                with open(rss_log, "a", encoding="utf-8") as log:
                    log.write(f"{time.time():.0f} {time.monotonic() - t0:.0f} {_status_kb(proc.pid, 'VmRSS:') / 1024:.1f}"
                              f" {hwm / 1024:.1f} {_rollup(proc.pid)} {shlex.join(argv[:3])}\n")
            if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                proc.kill()
            time.sleep(0.2)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        for t in threads:
            t.join(10)
        err.seek(0)
        tail = err.read()[-1500:].decode("utf-8", "replace")
    return RunResult(proc.returncode, usage.ru_maxrss / 1024, hwm / 1024, wall, counted[0], bytes(head), tail)


def _feed_pcm(program: Program, total: int) -> Callable[[IO[bytes]], None]:
    def feed(stdin: IO[bytes]) -> None:
        for b in program.blocks(total, program.rate // 10):  # 100 ms blocks, unpaced
            stdin.write(b.astype("<i2").tobytes())
    return feed


def _feed_text(chars: int) -> Callable[[IO[bytes]], None]:
    def feed(stdin: IO[bytes]) -> None:
        for chunk in text_chunks(chars):
            stdin.write(chunk)
            stdin.flush()
    return feed


def run_path(path: str, minutes: float, program: Program, work: Path, timeout_s: float | None,
             cmd: tuple[str, ...] = ("voxcli",), chat_output: bool = True,
             rss_log: Path | None = None) -> Measurement:
    """Build the input for `path` at `minutes` and run voxcli (`cmd`) on it."""
    total = int(minutes * 60 * program.rate)
    common = ["-q"]
    feed: Callable[[IO[bytes]], None] | None = None
    count_bytes = False
    if path in ("transcribe-file", "chat"):
        audio = work / f"input-{minutes:g}min.flac"
        write_flac(audio, program, total)
        if path == "transcribe-file":
            argv = [*cmd, "transcribe", str(audio), *common]
        else:
            argv = [*cmd, "chat", "--input", str(audio), "--llm", "local", "--max-tokens", "8",
                    *(["-o", str(work / "replies.wav")] if chat_output else []), "--no-log", "--json", *common]
    elif path == "transcribe-stdin":
        argv = [*cmd, "transcribe", "-", "--rate", str(program.rate), "--format", "s16le", *common]
        feed = _feed_pcm(program, total)
    elif path == "speak":
        argv = [*cmd, "speak", "-", "--raw", "--format", "s16le", *common]
        feed, count_bytes = _feed_text(int(minutes * 60 * CHARS_PER_S)), True
    else:
        raise ValueError(f"unknown path {path!r}; one of {', '.join(PATHS)}")
    try:
        res = run_measured(argv, feed=feed, count_bytes=count_bytes, timeout_s=timeout_s, env=offline_env(),
                           cwd=work, rss_log=rss_log)
    finally:
        for f in work.glob("input-*.flac"):
            f.unlink()
    n = res.stdout_count
    first = res.stdout_head.decode("utf-8", "replace").partition("\n")[0][:80]
    out = f"{n / 2 / VOICE_RATE:.0f} s of PCM" if count_bytes else f"{n} lines; first: {first!r}"
    return Measurement(path, minutes, round(res.peak_rss_mb, 1), round(res.sampled_hwm_mb, 1), round(res.wall_s, 1),
                       round(minutes * 60 / max(res.wall_s, 1e-9), 1), res.exit_code, out,
                       res.stderr_tail if res.exit_code else "")


def judge(rows: list[Measurement]) -> dict[str, dict[str, object]]:
    """Per path: growth of each run over the shortest, and whether all are within GOAL_MB."""
    verdicts: dict[str, dict[str, object]] = {}
    for path in dict.fromkeys(r.path for r in rows):
        mine = sorted((r for r in rows if r.path == path), key=lambda r: r.minutes)
        base = mine[0].peak_rss_mb
        for r in mine:
            r.growth_mb = round(r.peak_rss_mb - base, 1)
        ok = all(r.exit_code == 0 for r in mine)
        worst = max(r.growth_mb or 0.0 for r in mine)
        verdicts[path] = {"base_minutes": mine[0].minutes, "base_mb": base, "max_growth_mb": worst,
                          "flat": ok and worst <= GOAL_MB, "all_exit_0": ok}
    return verdicts


def _print_row(r: Measurement) -> None:
    growth = "" if r.growth_mb is None else f"{r.growth_mb:+8.1f}"
    print(f"{r.path:17s} {r.minutes:8g} {r.peak_rss_mb:9.1f} {r.sampled_hwm_mb:9.1f} {growth:>8s} "
          f"{r.wall_s:8.1f} {r.x_real_time:6.1f} {r.exit_code:4d}  {r.out}", flush=True)
    if r.exit_code and r.stderr_tail:
        print("    stderr: " + r.stderr_tail.strip().replace("\n", "\n    "), flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", default="1,3", help="comma-separated input lengths in minutes (default 1,3)")
    ap.add_argument("--hours", type=float, help="full run: lengths 1 min, 1 h and this many hours")
    ap.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)}")
    ap.add_argument("--rate", type=int, default=16000, help="sample rate of the generated audio (Hz)")
    ap.add_argument("--every-s", type=float, default=120.0, help="seconds between spoken sentences")
    ap.add_argument("--noise-dbfs", type=float, default=-70.0, help="level of the background noise")
    ap.add_argument("--timeout-min", type=float, help="kill a run after this many minutes (default: none)")
    ap.add_argument("--cmd", default="voxcli",
                    help="how to run voxcli, e.g. 'python -m voxcli' with PYTHONPATH at another checkout")
    ap.add_argument("--chat-no-output", action="store_true",
                    help="run chat without -o (tells the input side from the recorded replies)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="skip the unmeasured 6-second run per path that first builds any derived model cache")
    ap.add_argument("--json", action="store_true", help="JSON lines: one per run, then a summary")
    ap.add_argument("--rss-log", type=Path, help=f"append the process's RSS every {RSS_LOG_S:g} s to this file")
    args = ap.parse_args(argv)
    args.lengths = ([1.0, 60.0, args.hours * 60] if args.hours and args.hours > 1 else
                    [1.0, args.hours * 60] if args.hours else [float(m) for m in args.minutes.split(",")])
    args.cmd = tuple(shlex.split(args.cmd))
    args.path_list = [p.strip() for p in args.paths.split(",") if p.strip()]
    bad = [p for p in args.path_list if p not in PATHS]
    if bad:
        ap.error(f"unknown path(s) {', '.join(bad)}; choose from {', '.join(PATHS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    program = Program(args.rate, make_speech(args.rate, cmd=args.cmd), every_s=args.every_s, noise_dbfs=args.noise_dbfs)
    timeout = args.timeout_min * 60 if args.timeout_min else None
    if not args.json:
        print(f"{'path':17s} {'minutes':>8s} {'peak MB':>9s} {'HWM MB':>9s} {'growth':>8s} {'wall s':>8s} "
              f"{'x rt':>6s} {'exit':>4s}  out", flush=True)
    rows: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bench_memory-") as tmp:
        for path in args.path_list:
            if not args.no_warmup:  # a one-time cache build (derived graphs) must not inflate the 1-minute base
                run_path(path, WARMUP_MIN, program, Path(tmp), timeout, args.cmd, not args.chat_no_output)
            for minutes in sorted(args.lengths):
                r = run_path(path, minutes, program, Path(tmp), timeout, args.cmd, not args.chat_no_output,
                             args.rss_log)
                base = next((x.peak_rss_mb for x in rows if x.path == path), r.peak_rss_mb)
                r.growth_mb = round(r.peak_rss_mb - base, 1)
                rows.append(r)
                if args.json:
                    print(json.dumps({"event": "run", **asdict(r)}), flush=True)
                else:
                    _print_row(r)
    verdicts = judge(rows)
    if args.json:
        print(json.dumps({"event": "summary", "goal_mb": GOAL_MB, "paths": verdicts}), flush=True)
    else:
        for path, v in verdicts.items():
            print(f"{path}: peak {v['base_mb']} MB at {v['base_minutes']:g} min, max growth "
                  f"{v['max_growth_mb']:+} MB -> {'FLAT' if v['flat'] else 'NOT FLAT'} (goal <= {GOAL_MB:g} MB)")
    return 0 if all(v["flat"] for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
