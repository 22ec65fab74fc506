#!/usr/bin/env python3
"""A fair share of the cores (issue 13, item 7): each chat model alone, then all together.

Runs the models of `voxcli chat` -- Moonshine (ASR), SmolLM2 (LLM), Piper (TTS),
Silero (VAD) -- each alone for `--seconds`, then all at once for the same
time, in one process, and prints each model's speed together as a share of
its speed alone. Goal: >= 80 % for ASR, LLM and TTS.

Duty (default): each model works as in a conversation -- the ASR re-decodes a
3 s utterance every 300 ms, the voice renders one sentence per its own
duration (real time), the VAD scores 31 frames a second, the LLM writes as
`chat` lets it (`voxcli.chat.pacing`): its first BURST_CHARS flat out, then at
most CHARS_PER_S (3x the speech), waiting after each sentence. Speed = work done per second spent computing
it (the latency a model's calls take). `--llm-flat` lets the LLM write flat out
the whole time (chat before the pace); `--flat` runs every model flat out (the worst case).

    python benchmarks/bench_share.py                     # chat's thread budget for this machine
    python benchmarks/bench_share.py --threads 2         # every model 2 intra-op threads (for comparison)
    python benchmarks/bench_share.py --json
    python benchmarks/bench_share.py --nice asr=10       # and together again, the ASR thread niced (same run)
    python benchmarks/bench_share.py --llm-flat          # the LLM never paced (chat before voxcli.chat.pacing)

Units: ASR and TTS in seconds of audio per second computing (x real time),
LLM in tokens per second, VAD in frames per second. On a
shared machine the figures move with the neighbours' load: compare the ratios
of one run, not absolute speeds across runs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Callable

import numpy as np

SENTENCE = "The quick brown fox jumps over the lazy dog, and then it runs back home to sleep."
MESSAGES = [{"role": "user", "content": "Tell me a long story about a fox and a dog."}]
Work = Callable[[threading.Event], "tuple[float, float]"]
"""Runs until the event is set; returns (units done, seconds spent computing them)."""


def _models(threads: int | None, budget: str | None = None):
    from voxcli.asr.models import chat_asr, load_asr
    from voxcli.config import resolve
    from voxcli.chat.models import thread_budget
    from voxcli.llm.local import LocalLLMConfig, load_local_llm
    from voxcli.tts.streamer import load_voice

    b = thread_budget()
    if budget:  # "tts,asr,llm"
        from voxcli.chat.models import ThreadBudget

        tts, asr_n, llm_n = (int(x) for x in budget.split(","))
        b = ThreadBudget(tts=tts, asr=asr_n, llm=llm_n)
    asr, vad = load_asr(chat_asr(resolve("asr.model")), threads=threads or b.asr)  # chat's recognizer (the fast tier unless configured)
    llm = load_local_llm(config=LocalLLMConfig(threads=threads or b.llm, max_new_tokens=64)).engine
    voice = load_voice(threads=threads or b.tts)
    return asr, vad, llm, voice


def _paced(call: Callable[[], float], period: Callable[[float], float]) -> Work:
    """Call, then sleep until `period(units)` has passed since the call began (real-time duty)."""
    def run(stop: threading.Event) -> tuple[float, float]:
        units = busy = 0.0
        while not stop.is_set():
            t0 = time.perf_counter()
            u = call()
            dt = time.perf_counter() - t0
            units, busy = units + u, busy + dt
            stop.wait(max(0.0, period(u) - dt))
        return units, busy
    return run


def workloads(asr, vad, llm, voice, flat: bool, pace: tuple[int, float] | None = None) -> dict[str, Work]:
    """Each model's work as `chat` gives it (or flat out): speed = units / busy seconds.

    `pace`: (burst characters, characters per second) the LLM writes at most (None: flat out)."""
    import soxr

    speech = voice.synthesize(SENTENCE)
    clip = soxr.resample(speech, voice.sample_rate, 16000).astype(np.float32)
    frame = np.random.default_rng(0).normal(0, 0.05, 512 * 8).astype(np.float32)

    def asr_call() -> float:
        asr.transcribe(clip, prompt=None)
        return clip.size / 16000

    def tts_call() -> float:
        return voice.synthesize(SENTENCE).size / voice.sample_rate

    def vad_call() -> float:
        return float(len(vad.probs(frame)))

    from voxcli.chat.pacing import ends_sentence

    def run_llm(stop: threading.Event) -> tuple[float, float]:
        """Tokens per second spent generating: time waiting for the pace is not counted."""
        tokens, busy, written, t0 = 0, 0.0, 0, time.perf_counter()
        tok = llm.tokenizer
        while not stop.is_set():
            gen = iter(llm.start(MESSAGES))
            while not stop.is_set():
                t1 = time.perf_counter()
                token = next(gen, None)
                busy += time.perf_counter() - t1
                if token is None:
                    break
                tokens += 1
                piece = tok.decode([token])
                written += len(piece)
                if pace is not None and ends_sentence(piece):  # chat's pace: after a sentence, catch up
                    burst, rate = pace
                    over = written - burst - rate * (time.perf_counter() - t0)
                    if over > 0:
                        stop.wait(over / rate)
        return float(tokens), busy

    if flat:
        never = lambda u: 0.0  # noqa: E731
        return {"asr": _paced(asr_call, never), "llm": run_llm, "tts": _paced(tts_call, never),
                "vad": _paced(vad_call, never)}
    # chat: the streamer re-decodes the utterance every step (DEFAULT_STEP_MS), the voice keeps ahead of
    # real time (one sentence per its own duration), the VAD scores 31 frames a second, the LLM writes at
    # chat's pace.
    return {"asr": _paced(asr_call, lambda u: 0.3), "llm": run_llm, "tts": _paced(tts_call, lambda u: u),
            "vad": _paced(vad_call, lambda u: u * 512 / 16000)}


def measure(works: dict[str, Work], seconds: float, nice: dict[str, int] | None = None) -> dict[str, float]:
    """Run `works` at the same time for `seconds`; units per busy second of each.

    `nice`: a scheduling niceness per model, set on its thread (with 1 intra-op thread onnxruntime
    computes on the calling thread, so the model's work runs at that priority)."""
    stop = threading.Event()
    out: dict[str, tuple[float, float]] = {}

    def one(name: str, fn: Work) -> None:
        if nice and nice.get(name):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice[name])
        out[name] = fn(stop)

    threads = [threading.Thread(target=one, args=item) for item in works.items()]
    for th in threads:
        th.start()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    return {k: out[k][0] / max(out[k][1], 1e-9) for k in works}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each measurement (default 8)")
    ap.add_argument("--threads", type=int, help="intra-op threads of every model (default: chat's budget)")
    ap.add_argument("--budget", metavar="TTS,ASR,LLM", help="threads per model instead of chat's budget")
    ap.add_argument("--flat", action="store_true", help="every model flat out (worst case), not chat's duty")
    ap.add_argument("--only", help="comma-separated subset of asr,llm,tts,vad (e.g. llm,tts,vad: a reply "
                                   "while the user is silent)")
    ap.add_argument("--nice", metavar="MODEL=N,...", help="niceness per model thread, e.g. asr=10 (the voice "
                                                         "first while the ASR decodes over a reply)")
    ap.add_argument("--llm-flat", action="store_true",
                    help="the LLM writes flat out the whole time (chat paces it: voxcli.chat.pacing)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    nice = {k: int(v) for k, v in (kv.split("=") for kv in args.nice.split(","))} if args.nice else {}
    from voxcli.chat.pacing import BURST_CHARS, CHARS_PER_S

    pace = None if args.flat or args.llm_flat else (BURST_CHARS, CHARS_PER_S)
    works = workloads(*_models(args.threads, args.budget), args.flat, pace)
    if args.only:
        works = {k: v for k, v in works.items() if k in args.only.split(",")}
    measure(works, 1.0)  # warm-up: first runs allocate and optimize
    solo = {name: measure({name: fn}, args.seconds)[name] for name, fn in works.items()}
    together = measure(works, args.seconds)
    niced = measure(works, args.seconds, nice) if nice else None  # the same run: compare the shares
    rows = {k: {"solo": round(solo[k], 2), "together": round(together[k], 2),
                "share": round(together[k] / solo[k], 3) if solo[k] else None} for k in works}
    if niced is not None:
        for k, r in rows.items():
            r["together_niced"] = round(niced[k], 2)
            r["share_niced"] = round(niced[k] / solo[k], 3) if solo[k] else None
    if args.json:
        print(json.dumps({"threads": args.threads or args.budget or "budget", "flat": args.flat,
                          "llm_pace": pace, "seconds": args.seconds,
                          "nice": nice, "models": rows}))
    else:
        print(f"threads: {args.threads or args.budget or 'budget'}, {'flat out' if args.flat else 'chat duty'}, LLM "
              f"{'flat out' if pace is None else f'{pace[0]} characters, then {pace[1]:g} a second'} ({args.seconds:g} s each)")
        print(f"{'model':6s} {'alone':>10s} {'together':>10s} {'share':>7s}" + (f" {'niced':>10s} {'share':>7s}"
                                                                            if niced else ""))
        for k, r in rows.items():
            print(f"{k:6s} {r['solo']:10.2f} {r['together']:10.2f} {100 * (r['share'] or 0):6.1f}%" + (
                f" {r['together_niced']:10.2f} {100 * (r['share_niced'] or 0):6.1f}%" if niced else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
