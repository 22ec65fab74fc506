#!/usr/bin/env python3
"""A whole voice turn as a user feels it: end of the user's speech -> first reply audio.

Runs the CLI as installed (`voxcli chat --input ...`), fully on device
(SmolLM2 + Moonshine + Silero + Piper on the same cores), on questions spoken
by voxcli's own voice, and reads the per-turn stamps from the turn log that
`voxcli ledger --measured` uses. Prints percentiles per term and, with
--json, one JSON document.

    python benchmarks/bench_turn.py --turns 10
    python benchmarks/bench_turn.py --turns 10 --endpoint-ms 300 --json
    python benchmarks/bench_turn.py --turns 10 --rounds 5 --endpoint vad --endpoint semantic   # A/B
    python benchmarks/bench_turn.py --detector        # the turn detector on the labelled prefixes
    python benchmarks/bench_turn.py --turns 10 --rounds 2 \\
        --cmd "before=env PYTHONPATH=/tmp/head python -m voxcli" --cmd "after=voxcli"   # A/B in one run

Why questions from our TTS: the machine has no microphone and model hubs are
unreachable; the ASR still hears real synthesized speech, and the questions
are short, as in a voice agent.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
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
    """Precision/recall of "complete" on tests/chat/turn_prefixes.py (tuned on it, and 3-fold held out), the hold
    it sets, its latency."""
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
    folds = sets.cross_validate([s for lab, s in scored if lab], [s for lab, s in scored if not lab])
    htp, hfp = sum(f["tp"] for f in folds), sum(f["fp"] for f in folds)
    return {"n": len(scored), "threshold": thr, "threads": threads,
            "precision": tp / max(tp + fp, 1), "recall": tp / len(sets.COMPLETE), "false_alarms": fp,
            "vad_hold_ms": DEFAULT_ENDPOINT_MS,
            "mean_hold_complete_ms": float(np.mean(holds[True])), "mean_hold_incomplete_ms": float(np.mean(holds[False])),
            "mean_hold_saved_complete_ms": DEFAULT_ENDPOINT_MS - float(np.mean(holds[True])),
            "confident": det.policy.confident, "confident_share_complete": float(np.mean(
                [s >= det.policy.confident for lab, s in scored if lab])),
            "max_score_incomplete": max(s for lab, s in scored if not lab),
            "latency_p50_ms": _pct(lat, 50), "latency_p95_ms": _pct(lat, 95),
            "heldout_3fold_thresholds": [f["threshold"] for f in folds],
            "heldout_precision": htp / max(htp + hfp, 1), "heldout_recall": htp / len(sets.COMPLETE),
            "heldout_false_alarms": hfp}


def _arms(specs: list[str] | None, endpoints: list[str] | None) -> list[tuple[str, list[str], str | None]]:
    """`label=command` (the command that runs voxcli, e.g. "env PYTHONPATH=/tmp/head python -m voxcli"), each
    with each `--endpoint` (several: one arm per endpoint, labelled "<label>/<endpoint>")."""
    builds = []
    for spec in specs or ["voxcli=voxcli"]:
        label, sep, cmd = spec.partition("=")
        builds.append((label, shlex.split(cmd)) if sep else (spec, shlex.split(spec)))
    eps: list[str | None] = list(endpoints) if endpoints else [None]
    return [(label if len(eps) == 1 else (ep if len(builds) == 1 else f"{label}/{ep}"), cmd, ep)
            for label, cmd in builds for ep in eps]


def _chat(voxcli: list[str], inputs: list[Path], data: Path, args: argparse.Namespace,
          endpoint: str | None) -> str | None:
    """One `voxcli chat --input ...` run; its turns go to `data`'s turn log. An error message, or None."""
    env = dict(os.environ, VOXCLI_DATA_DIR=str(data))
    cmd = [*voxcli, "chat", "--llm", "local", "--max-tokens", str(args.max_tokens),
           "-o", str(data / "replies.wav"), "--quiet"]
    if args.endpoint_ms is not None:
        cmd += ["--endpoint-ms", str(args.endpoint_ms)]
    if endpoint is not None:
        cmd += ["--endpoint", endpoint]
    for p in inputs:
        cmd += ["--input", str(p)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60 * len(inputs) + 120,
                       cwd=data)  # not the repo: `python -m voxcli` must import the build the command names
    return None if r.returncode == 0 else f"{' '.join(voxcli)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}"


def _ledger(voxcli: list[str], data: Path, args: argparse.Namespace, endpoint: str | None) -> dict | None:
    env = dict(os.environ, VOXCLI_DATA_DIR=str(data))
    if endpoint is not None:
        env["VOXCLI_ASR_ENDPOINT"] = endpoint
    led = subprocess.run([*voxcli, "ledger", "--measured", "--json"] +
                         (["--endpoint-ms", str(args.endpoint_ms)] if args.endpoint_ms else []),
                         env=env, capture_output=True, text=True, timeout=600, cwd=data)
    return json.loads(led.stdout) if led.returncode == 0 and led.stdout.strip() else None


def _engine_ms(led: dict) -> float | None:
    """`ledger --measured`'s prediction of the turn on chat's own schedule (the `engine` measurement; the
    top-level `total_ms` is the seed's formula, hold and ASR tail in parallel and the rest in series)."""
    value = ((led.get("measurements") or {}).get("engine") or {}).get("value_ms")
    return float(value) if isinstance(value, (int, float)) else None


def _summary(turns: list[dict]) -> dict[str, dict[str, float | None]]:
    summary: dict[str, dict[str, float | None]] = {}
    for term in TERMS:
        vals = [t["terms"][term] for t in turns if t.get("terms", {}).get(term) is not None]
        summary[term] = {"n": len(vals), "p50": _pct(vals, 50), "p90": _pct(vals, 90), "p95": _pct(vals, 95),
                         "min": min(vals) if vals else None, "max": max(vals) if vals else None}
    return summary


ROW_STAMPS = ("endpoint_ms", "asr_final_ms", "llm_request_ms", "llm_first_token_ms", "first_audio_ms")


def _row(t: dict) -> dict:
    """One turn as the per-turn table shows it: the stamps (ms after the end of speech), the preemptive
    reply's hit/miss, and the semantic detector's verdict when the record carries one."""
    row = {k: t.get(k) for k in ("turn", "user", *ROW_STAMPS, "preemptive", "wasted_preemptive")}
    row.update({f"det_{k}": v for k, v in (t.get("detector") or {}).items()})
    return row


def _print_rows(rows: list[dict]) -> None:
    det = sorted({k for r in rows for k in r if k.startswith("det_")})
    heads = ["endpoint", "final", "request", "token", "audio", "pre", "waste", *[k[4:] for k in det]]
    print("  " + "".join(f"{h:>9}" for h in heads))
    for r in rows:
        cells = [r.get(k) for k in ROW_STAMPS] + [int(bool(r.get("preemptive"))), r.get("wasted_preemptive")]
        cells += [r.get(k) for k in det]
        print("  " + "".join(f"{'-':>9}" if c is None else (f"{c:9.0f}" if isinstance(c, float) and abs(c) >= 1
                                                            else f"{c:>9}" if not isinstance(c, float)
                                                            else f"{c:9.3f}") for c in cells)
              + f"  {r.get('user') or '-'}")


def _print_arm(label: str, doc: dict) -> None:
    print(f"[{label}] {doc['turns']} turns, {doc['wall_s']:.1f} s wall")
    print(f"{'term':<20}{'p50':>9}{'p90':>9}{'p95':>9}{'min':>9}{'max':>9}")
    for term, s in doc["summary"].items():
        cells = "".join(f"{s[k]:9.0f}" if s[k] is not None else f"{'-':>9}" for k in ("p50", "p90", "p95", "min", "max"))
        print(f"{term:<20}{cells}")
    _print_rows(doc["rows"])
    led, p50 = doc.get("ledger") or {}, doc["summary"]["total_ms"]["p50"]
    eng = _engine_ms(led)
    if eng is not None:
        err = f" ({100 * (eng - p50) / p50:+.1f} % of the measured p50)" if p50 else ""
        print(f"ledger --measured predicts {eng:.0f} ms on chat's schedule{err}; the seed's formula on its "
              f"terms {led['total_ms']:.0f} ms")
    print("heard:", "; ".join(u or "-" for u in doc["users"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--endpoint-ms", type=int, default=None)
    ap.add_argument("--endpoint", choices=("vad", "semantic"), action="append",
                    help="chat's end of turn; repeat (--endpoint vad --endpoint semantic) to A/B them in one run")
    ap.add_argument("--cmd", action="append", metavar="LABEL=COMMAND",
                    help="compare voxcli builds in one run (repeatable; default: the installed voxcli)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="split the turns into this many chat runs per build, interleaved A B A B ...")
    ap.add_argument("--no-ledger", action="store_true", help="skip `voxcli ledger --measured`")
    ap.add_argument("--detector", action="store_true", help="evaluate the semantic turn detector only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.detector:
        rep = detector_report()
        print(json.dumps(rep, indent=2) if args.json else "\n".join(
            f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}" for k, v in rep.items()))
        return 0

    arms = _arms(args.cmd, args.endpoint)
    load_before = os.getloadavg()
    docs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="vox-turn-") as tmp:
        tmpdir = Path(tmp)
        inputs = _speak_questions(tmpdir, args.turns)
        rounds = max(1, min(args.rounds, len(inputs)))
        groups = [list(g) for g in np.array_split(np.array(inputs, dtype=object), rounds)]
        walls = {label: 0.0 for label, _, _ in arms}
        for group in groups:  # interleaved: each build hears the same questions under the same load
            for label, voxcli, endpoint in arms:
                data = tmpdir / f"data-{label.replace('/', '-')}"
                data.mkdir(exist_ok=True)
                t0 = time.perf_counter()
                err = _chat(voxcli, group, data, args, endpoint)
                walls[label] += time.perf_counter() - t0
                if err:
                    print(err, file=sys.stderr)
                    return 1
        for label, voxcli, endpoint in arms:
            data = tmpdir / f"data-{label.replace('/', '-')}"
            log = data / "turns.jsonl"
            turns = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            docs[label] = {"turns": len(turns), "wall_s": round(walls[label], 1), "summary": _summary(turns),
                           "ledger": None if args.no_ledger else _ledger(voxcli, data, args, endpoint),
                           "users": [t.get("user") for t in turns], "rows": [_row(t) for t in turns]}
    load = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]}
    first = docs[arms[0][0]]
    out = dict(first) if len(arms) == 1 else {"arms": docs}
    out["loadavg_1_5_15"] = load
    if len(arms) == 1:
        out["ledger_total_ms"] = (first.get("ledger") or {}).get("total_ms")
        out["ledger_engine_ms"] = _engine_ms(first.get("ledger") or {})
    else:
        base = first["summary"]["total_ms"]["p50"]
        out["total_p50_ratio_to_first"] = {k: (d["summary"]["total_ms"]["p50"] / base if base else None)
                                          for k, d in docs.items()}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"voxcli chat --llm local --max-tokens {args.max_tokens}"
          f"; {args.turns} questions, {rounds} round(s); arms {', '.join(a[0] for a in arms)}")
    print(f"load average (1/5/15 min) before {load['before']}, after {load['after']} on {os.cpu_count()} cores")
    for label, doc in docs.items():
        _print_arm(label, doc)
    for label, r in (out.get("total_p50_ratio_to_first") or {}).items():
        print(f"total p50 {label} / {arms[0][0]}: {r:.3f}" if r is not None else f"{label}: -")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
