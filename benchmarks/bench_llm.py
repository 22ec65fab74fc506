"""Benchmark the on-device LLM: TTFT (60-token prompt), decode tokens/s, resident memory.

Targets on a 2-core CPU: TTFT <= 250 ms, decode >= 25 tokens/s, RSS <= 400 MB.
Each engine runs in its own subprocess so resident memory is its own:
  fast   -- LocalLLM, precision="fast" (shipped: decode with int8 MatMulNBits kernels run
            twice per token, grid + remainder, prefill with fp32 activations; ~0.015 off the reference)
  exact  -- LocalLLM, precision="exact" (fp32 activations everywhere; ~1.5e-4 off the reference)
  numpy  -- tests.llm.reference (plain float32 numpy; the test reference)

    python benchmarks/bench_llm.py                 # all three, table on stderr, JSON on stdout
    python benchmarks/bench_llm.py --engines fast --runs 10 --threads 2
    python benchmarks/bench_llm.py --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf --derived /tmp/llm_derived

TTFT = prompt submitted to first generated token (prefill of the 60-token
prompt + one sampling step), median over runs. Decode = (tokens - 1) / time
after the first token, greedy, 64 tokens with end-of-turn ignored (so every
run decodes the same number of steps). RSS = VmRSS after the runs; peak is
ru_maxrss (includes the one-time graph build if the cache was cold).
CPU ms/token = process CPU time per decoded token (all threads), best run:
unlike wall time it hardly moves when other processes share the cores, so
it is the number to compare engines on a busy machine.
release_free_memory = the glibc malloc_trim every generation ends with (issue 18,
`voxcli.runtimes.onnx`), ms per reply, median: its whole speed cost.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The numpy reference model lives with the tests (it is not part of the package).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT_TOKENS = 60
DECODE_TOKENS = 64


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _prompt_ids(encode) -> list[int]:
    """A chat prompt of exactly PROMPT_TOKENS ids (user text padded/trimmed to fit)."""
    from voxcli.runtimes.smollm.prompt import GENERATION_PROMPT, render_turn

    words = ("Please tell me a long and detailed story about a lighthouse keeper who finds "
             "a message in a bottle on a stormy night near the rocky northern coast and ").split() * 4
    head = encode(render_turn("system", "You are a helpful assistant."))
    tail = encode("<|im_end|>\n" + GENERATION_PROMPT)
    body = encode("<|im_start|>user\n" + " ".join(words))
    return (head + body)[: PROMPT_TOKENS - len(tail)] + tail


def _run_onnx(args, precision: str) -> dict:
    import numpy as np

    from voxcli.runtimes.onnx import release_free_memory
    from voxcli.runtimes.smollm.local import LocalLLM, LocalLLMConfig

    t = time.perf_counter()
    llm = LocalLLM.load(Path(args.gguf), Path(args.derived), LocalLLMConfig(precision=precision, threads=args.threads))
    load_s = time.perf_counter() - t
    ids = _prompt_ids(llm.tokenizer.encode)
    assert len(ids) == PROMPT_TOKENS
    ttfts, rates, cpu, releases = [], [], [], []
    for _ in range(args.runs + 1):  # first run warms up (allocations, thread pool)
        cache = llm._new_cache(len(ids) + DECODE_TOKENS)  # what LocalLLM.stream does, minus text decoding
        t0 = time.perf_counter()
        tok = int(np.argmax(llm._feed(cache, ids)))
        t1, c1 = time.perf_counter(), time.process_time()
        for _ in range(DECODE_TOKENS - 1):
            tok = int(np.argmax(llm._feed(cache, [tok])))
        t2, c2 = time.perf_counter(), time.process_time()
        ttfts.append(t1 - t0)
        rates.append((DECODE_TOKENS - 1) / (t2 - t1))
        cpu.append((c2 - c1) / (DECODE_TOKENS - 1))
        del cache
        t3 = time.perf_counter()
        release_free_memory()  # what every generation does at its end (issue 18): its cost per reply
        releases.append(time.perf_counter() - t3)
    ttfts, rates, cpu, releases = ttfts[1:], rates[1:], cpu[1:], releases[1:]
    return {
        "engine": precision, "load_s": load_s, "ttft_ms": 1000 * statistics.median(ttfts),
        "ttft_ms_min": 1000 * min(ttfts), "decode_tok_s": statistics.median(rates),
        "decode_tok_s_max": max(rates), "decode_cpu_ms": 1000 * min(cpu), "rss_mb": _rss_mb(),
        "release_ms": 1000 * statistics.median(releases),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def _run_numpy(args) -> dict:
    import numpy as np

    from voxcli.runtimes.smollm.gguf import GGUFModel
    from tests.llm.reference import ReferenceCache, ReferenceLlama
    from voxcli.runtimes.smollm.tokenizer import ChatTokenizer

    t = time.perf_counter()
    model = GGUFModel(Path(args.gguf))
    ref = ReferenceLlama(model)
    ids = _prompt_ids(ChatTokenizer.from_gguf(model).encode)
    load_s = time.perf_counter() - t
    ttfts, rates = [], []
    runs = max(1, min(args.runs, 3))  # slow: a few runs are enough
    for _ in range(runs):
        cache = ReferenceCache()
        t0 = time.perf_counter()
        tok = int(np.argmax(ref.forward(ids, cache)[-1]))
        t1 = time.perf_counter()
        n = 16
        for _ in range(n):
            tok = int(np.argmax(ref.forward([tok], cache)[-1]))
        t2 = time.perf_counter()
        ttfts.append(t1 - t0)
        rates.append(n / (t2 - t1))
    return {
        "engine": "numpy", "load_s": load_s, "ttft_ms": 1000 * statistics.median(ttfts),
        "ttft_ms_min": 1000 * min(ttfts), "decode_tok_s": statistics.median(rates),
        "decode_tok_s_max": max(rates), "rss_mb": _rss_mb(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def _default_paths() -> tuple[str, str]:
    from voxcli.runtimes.smollm.local import DEFAULT_MODEL, GGUF_FILE
    from voxcli.hub.resolve import resolve_model

    b = resolve_model(DEFAULT_MODEL, kind="llm")
    return str(b.file(GGUF_FILE)), str(b.derived_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="fast,exact,numpy")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gguf")
    ap.add_argument("--derived")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.gguf or not args.derived:
        g, d = _default_paths()
        args.gguf, args.derived = args.gguf or g, args.derived or d
    if args.child:
        res = _run_numpy(args) if args.child == "numpy" else _run_onnx(args, args.child)
        print(json.dumps(res))
        return 0
    results = []
    for eng in args.engines.split(","):
        cmd = [sys.executable, __file__, "--child", eng, "--runs", str(args.runs), "--threads", str(args.threads),
               "--gguf", args.gguf, "--derived", args.derived]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        res = json.loads(out.strip().splitlines()[-1])
        res["loadavg_1m"] = os.getloadavg()[0]
        results.append(res)
    load = os.getloadavg()[0]
    print(f"{'engine':8} {'TTFT ms median/best':>20} {'decode tok/s median/best':>25} {'CPU ms/tok':>10} "
          f"{'RSS MB':>7} {'peak MB':>8} {'load s':>7}   (load average {load:.1f} on {os.cpu_count()} cores)",
          file=sys.stderr)
    for r in results:
        cpu = f"{r['decode_cpu_ms']:10.1f}" if "decode_cpu_ms" in r else f"{'-':>10}"
        print(f"{r['engine']:8} {r['ttft_ms']:11.0f} / {r['ttft_ms_min']:5.0f} {r['decode_tok_s']:15.1f} / "
              f"{r['decode_tok_s_max']:6.1f} {cpu} {r['rss_mb']:7.0f} {r['peak_rss_mb']:8.0f} {r['load_s']:7.2f}"
              + (f"   release_free_memory {r['release_ms']:.2f} ms/reply" if "release_ms" in r else ""),
              file=sys.stderr)
    print("targets: TTFT <= 250 ms, decode >= 25 tok/s, RSS <= 400 MB (2 cores)", file=sys.stderr)
    for r in results:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
