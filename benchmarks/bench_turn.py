#!/usr/bin/env python3
"""A whole voice turn as a user feels it: end of the user's speech -> first reply audio.

Runs the CLI as installed (`voxcli chat --input ...`), fully on device
(SmolLM2 + Moonshine + Silero + Piper on the same cores), on questions spoken
by voxcli's own voice, and reads the per-turn stamps from the turn log that
`voxcli ledger --measured` uses. Prints percentiles per term and, with
--json, one JSON document.

    python benchmarks/bench_turn.py --turns 10
    python benchmarks/bench_turn.py --turns 10 --endpoint-ms 300 --json
    python benchmarks/bench_turn.py --turns 10 --endpoint semantic
    python benchmarks/bench_turn.py --detector        # the turn detector on the labelled prefixes

Why questions from our TTS: the machine has no microphone and model hubs are
unreachable; the ASR still hears real synthesized speech, and the questions
are short, as in a voice agent.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

QUESTIONS = [
    "What is the capital of France?",
    "How many legs does a spider have?",
    "What colour is the sky on a clear day?",
    "Name a fruit that is yellow.",
    "What is two plus two?",
    "Which planet is closest to the sun?",
    "What do bees make?",
    "How many days are in a week?",
    "What is the opposite of hot?",
    "Where do penguins live?",
    "What is frozen water called?",
    "Which animal says moo?",
]

TERMS = ("endpoint_ms", "asr_tail_ms", "hops_ms", "llm_ttft_ms", "tts_first_audio_ms", "total_ms")


def _speak_questions(out: Path, n: int) -> list[Path]:
    import soundfile as sf

    import voxcli

    voice = voxcli.load_voice()
    paths = []
    for i in range(n):
        q = QUESTIONS[i % len(QUESTIONS)]
        audio = voice.synthesize(q)
        # a little silence around the question, as a microphone would deliver it
        pad = np.zeros(int(0.3 * voice.sample_rate), np.float32)
        path = out / f"q{i:02d}.wav"
        sf.write(path, np.concatenate([pad, audio, pad]), voice.sample_rate)
        paths.append(path)
    return paths


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def detector_report(threads: int = 1) -> dict:
    """Precision/recall of "complete" on tests/chat/turn_prefixes.py, the hold it sets, its latency."""
    import importlib.util

    from voxcli.chat.turn_detector import load_turn_detector
    from voxcli.config import DEFAULT_ENDPOINT_MS

    path = Path(__file__).resolve().parents[1] / "tests" / "chat" / "turn_prefixes.py"
    spec = importlib.util.spec_from_file_location("turn_prefixes", path)
    sets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sets)  # type: ignore[union-attr]
    det = load_turn_detector(threads=threads)
    lat, scored = [], []
    for label, texts in ((True, sets.COMPLETE), (False, sets.INCOMPLETE)):
        for text in texts:
            t0 = time.perf_counter()
            scored.append((label, det.score(text)))
            lat.append((time.perf_counter() - t0) * 1000)
    thr = det.policy.threshold
    tp = sum(1 for lab, s in scored if lab and s >= thr)
    fp = sum(1 for lab, s in scored if not lab and s >= thr)
    holds = {lab: [det.policy.hold_ms(s) for l2, s in scored if l2 == lab] for lab in (True, False)}
    return {"n": len(scored), "threshold": thr, "threads": threads,
            "precision": tp / max(tp + fp, 1), "recall": tp / len(sets.COMPLETE), "false_alarms": fp,
            "vad_hold_ms": DEFAULT_ENDPOINT_MS,
            "mean_hold_complete_ms": float(np.mean(holds[True])), "mean_hold_incomplete_ms": float(np.mean(holds[False])),
            "mean_hold_saved_complete_ms": DEFAULT_ENDPOINT_MS - float(np.mean(holds[True])),
            "latency_p50_ms": _pct(lat, 50), "latency_p95_ms": _pct(lat, 95)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--endpoint-ms", type=int, default=None)
    ap.add_argument("--endpoint", choices=("vad", "semantic"), default=None)
    ap.add_argument("--detector", action="store_true", help="evaluate the semantic turn detector only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.detector:
        rep = detector_report()
        print(json.dumps(rep, indent=2) if args.json else "\n".join(
            f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}" for k, v in rep.items()))
        return 0

    with tempfile.TemporaryDirectory(prefix="vox-turn-") as tmp:
        tmpdir = Path(tmp)
        inputs = _speak_questions(tmpdir, args.turns)
        env = dict(os.environ, VOXCLI_DATA_DIR=str(tmpdir / "data"))
        cmd = ["voxcli", "chat", "--llm", "local", "--max-tokens", str(args.max_tokens),
               "-o", str(tmpdir / "replies.wav"), "--quiet"]
        if args.endpoint_ms is not None:
            cmd += ["--endpoint-ms", str(args.endpoint_ms)]
        if args.endpoint is not None:
            cmd += ["--endpoint", args.endpoint]
        for p in inputs:
            cmd += ["--input", str(p)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60 * args.turns + 120)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return r.returncode
        log = tmpdir / "data" / "turns.jsonl"
        turns = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        led = subprocess.run(["voxcli", "ledger", "--measured", "--json"] +
                             (["--endpoint-ms", str(args.endpoint_ms)] if args.endpoint_ms else []),
                             env=env, capture_output=True, text=True, timeout=600)
        ledger = json.loads(led.stdout) if led.returncode == 0 and led.stdout.strip() else None

    summary: dict[str, dict[str, float | None]] = {}
    for term in TERMS:
        vals = [t["terms"][term] for t in turns if t.get("terms", {}).get(term) is not None]
        summary[term] = {"n": len(vals), "p50": _pct(vals, 50), "p95": _pct(vals, 95),
                         "min": min(vals) if vals else None, "max": max(vals) if vals else None}
    doc = {"turns": len(turns), "wall_s": round(wall, 1), "summary": summary,
           "ledger_total_ms": (ledger or {}).get("total_ms"),
           "users": [t.get("user") for t in turns]}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{len(turns)} turns, {wall:.1f} s wall (voxcli chat --llm local --max-tokens {args.max_tokens}"
          f"{' --endpoint ' + args.endpoint if args.endpoint else ''})")
    print(f"{'term':<20}{'p50':>9}{'p95':>9}{'min':>9}{'max':>9}")
    for term, s in summary.items():
        cells = "".join(f"{s[k]:9.0f}" if s[k] is not None else f"{'-':>9}" for k in ("p50", "p95", "min", "max"))
        print(f"{term:<20}{cells}")
    if doc["ledger_total_ms"] is not None:
        print(f"ledger --measured predicts {doc['ledger_total_ms']:.0f} ms")
    print("heard:", "; ".join(u or "-" for u in doc["users"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
