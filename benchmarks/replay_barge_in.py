#!/usr/bin/env python3
"""The barging-in user's words decoded again from what the agent was fed: streamed as chat does, and at once.

    python benchmarks/bench_barge_in.py --room 0.3 --trials 16 --arms onset --save DIR   # keep each trial
    python benchmarks/replay_barge_in.py DIR                                             # then, any number of times

Why: the live run gives one WER for audio and decoding together. Each saved trial holds the blocks the
agent fed its ASR and the first word's patch (where it goes, its audio, how much had been fed when it was
sent). Here each trial goes through a fresh `ASRStreamer` made as `voxcli chat` makes it (chat's
recognizer and thread budget, its endpoint settings), fed block by block at the live pace, the patch
announced at the onset (0.3 s after the span's start) and sent where it was sent; and the same audio with
the patch in place is decoded once, whole (4.4 s from 0.8 s before the onset, as `aec_session.py words`
does). A streamed WER above the one-shot one is lost by the decoding, not by the audio.

On 2026-12-03 this found the streamed decode losing "the" where the one-shot did not (16 trials: 0.089
streamed, 0.016 one-shot; the live run 0.083): an utterance that began at the patch was decoded from the
span's first sample. Since `PATCH_LEAD_S` the decoder gets silence before it (README: "The decode, not the audio").
With `--lockstep` (a re-decode at every step: the same words each run) it then found a barge-in's short first
decodes committing a guessed "a" the final did not hear (`PATCH_COMMIT_S`: 0.062 -> 0.054 over 88), and a
paced replay found six words lost to a final anchored on its second "it was" (`align_end`).
`--pace 0` feeds as fast as the worker takes (not chat's schedule: the figures differ). The streamed text
is the trial's last utterance (the trial's audio starts with the reply; a trial that gave more is printed).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

USER_SAYS = "It was the best of times, it was the worst of times."
"""What bench_barge_in.py's user says."""


FINAL = None
"""The streamer's `final_model` (`--final-model`)."""


def streamer(engine, scorer, lockstep: bool = False):  # type: ignore[no-untyped-def]
    """A fresh streamer as `voxcli chat` makes it (`chat_streamer`, on a shared VAD)."""
    from voxcli.chat.models import chat_streamer
    from voxcli.chat.shared_vad import SharedVAD

    return chat_streamer(engine, SharedVAD(scorer), lockstep=lockstep, final_engine=FINAL)


def replay(path: Path, engine, scorer, pace: float,  # type: ignore[no-untyped-def]
           lockstep: bool = False) -> tuple[str, str, str] | None:
    """(live text, one-shot text, streamed text: its last utterance) of one saved trial; None without a patch.

    `lockstep`: a re-decode at every step, unpaced (`ASRStreamer(lockstep=True)`): the same words each run."""
    z = np.load(path)
    if "patch_audio" not in z.files:
        return None
    fed, sizes = z["fed"], z["sizes"]
    at, audio, sent = int(z["patch_sample"]), z["patch_audio"], int(z["patch_at"])
    from voxcli.audio.echo_mask import PRE_S

    onset = at + int(PRE_S * 16000)  # the span starts PRE_S before the onset: the patch is announced there
    patched = fed.copy()
    patched[at : at + audio.size] = audio[: max(0, fed.size - at)]
    once = engine.text(patched[max(0, onset - 12800) : onset + 57600])
    s = streamer(engine, scorer, lockstep)
    n, announced, done = 0, False, False
    for size in sizes:
        s.send(fed[n : n + size], block=lockstep)  # paced as chat's capture sends: drop-behind, never waits
        n += int(size)
        if not announced and n >= onset:
            s.expect_patch()
            announced = True
        if announced and not done and n >= sent:
            s.patch(at, audio)
            done = True
        if pace and not lockstep:
            time.sleep(size / 16000 / pace)
    utterances = [u for u in s.finish(timeout=300).splitlines() if u.strip()]
    last = utterances[-1] if utterances else ""
    if len(utterances) > 1:
        print(f"{path.name}: {len(utterances)} utterances, the last scored: {utterances!r}")
    return str(json.loads(str(z["row"])).get("user_text") or ""), once, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("saved", nargs="+", help="directories written by bench_barge_in.py --save (trialNN.npz)")
    ap.add_argument("--pace", type=float, default=1.0, help="feed at this multiple of real time (0: unpaced)")
    ap.add_argument("--lockstep", action="store_true",
                    help="re-decode at every step, unpaced: deterministic (an idle machine's decodes), minutes faster")
    ap.add_argument("--final-model", default=None, help="the streamer's final_model (experiment)")
    ap.add_argument("--patch-commit", type=float, default=None, help="PATCH_COMMIT_S (experiment)")
    args = ap.parse_args()
    trials = []
    for saved in args.saved:
        if not (found := sorted(Path(saved).glob("trial*.npz"))):
            raise SystemExit(f"no saved trials in {saved}: run bench_barge_in.py ... --save {saved}")
        trials += found
    from voxcli.asr.models import chat_asr, load_asr, load_named
    from voxcli.bench.wer import word_errors
    from voxcli.chat.models import thread_budget

    engine, scorer = load_asr(chat_asr(), offline=True, threads=thread_budget(local_llm=True).asr)
    global FINAL
    if args.final_model:
        FINAL = load_named(args.final_model, offline=True, threads=thread_budget(local_llm=True).asr)
    if args.patch_commit is not None:
        import voxcli.asr.streamer as st

        st.PATCH_COMMIT_S = args.patch_commit
    errors: dict[str, list] = {"live": [], "one-shot": [], "streamed": []}
    for path in trials:
        got = replay(path, engine, scorer, args.pace, args.lockstep)
        if got is None:
            print(f"{path}: no patch (not replayed)")
            continue
        for name, text in zip(errors, got):
            errors[name].append(word_errors(USER_SAYS, text))
        pad = " " * (len(path.parent.name) + len(path.name) + 3)
        print(f"{path.parent.name}/{path.name}  live: {got[0]!r}\n{pad}one-shot: {got[1]!r}\n{pad}streamed: {got[2]!r}")
    for name, errs in errors.items():
        if errs:
            print(f"{name}: WER {sum(errs[1:], errs[0]).rate:.3f} over {len(errs)} barge-ins")


if __name__ == "__main__":
    main()
