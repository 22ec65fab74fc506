#!/usr/bin/env python3
"""Barge-in latency on real devices, isolated: the user's first word -> the reply's last sample.

    python benchmarks/bench_barge_in.py                 # 8 barge-ins, p50/p90 and the terms, the user's WER
    python benchmarks/bench_barge_in.py --compare       # interleaved with the pause on the VAD run only
    python benchmarks/bench_barge_in.py --self-turns 20 # 20 replies heard back at full level: false barge-ins
    python benchmarks/bench_barge_in.py --arms onset,onset-nomask  # with/without the first word's patch, interleaved
    python benchmarks/bench_barge_in.py --room [0.1]    # the echo through a room (room_relay.py); 0.1: less reverb

The room is a private PulseAudio null sink: the agent's reply (DeviceSpeaker,
with the echo canceller's tap) plays into it, its monitor is the microphone
(CancelledMic: AEC3 on), and the "user" (the speech-samples Two Cities
recording from its first word, `speech_onset`, as loud as the reply) is played into the
same sink by a second output stream that was opened before the session, so
opening it is not measured. With `--room` the microphone is a second sink's monitor, the reply reaches
it through `room_relay.RoomRelay` (a soft-clipped speaker, a 300 ms room response whose tail's level is
TAIL, 0.3 by default, a delay that drifts); the user plays into that second sink. Every time is a
PortAudio DAC stamp on the monotonic clock (`voxcli.audio.aec_ref.PlayHead`):

  user0   the user's first word reaches the sink
  onset   the double-talk detector (`voxcli.audio.doubletalk`, raw mic vs reference) tells the agent
  voice   the user first shows in the cancelled signal (a block's RMS above 0.02, fed at)
  fed     the audio that completes the VAD run (next line) reached `Agent.feed` (monitor, MicCapture, AEC)
  run     the VAD speech run reaches `barge_in_ms` (agent side: the ASR worker's VAD pass, which
          waits behind the worker's decode in progress)
  pause   the agent pauses the reply (on the onset, or on the run; no word yet)
  word    the first caption with a word that is not the reply's echo
  stop    the agent stops the speaker
  silent  the reply's last sample reaches the sink (what the user hears stop)

`latency = silent - user0` is the figure (the reply falls silent: paused, then stopped without
playing on in between; a pause that played on before the stop counts at the stop); the terms say
where it goes. Each row also has the capture -> `Agent.feed` lag of every block (p50, max), the
microphone's queue and the canceller's `frames_too_late` (a capture later than the reference it keeps).
With `--compare` every other barge-in pauses on the VAD run only, as before the double-talk
detector (the onset timed, not acted on). `--arms A,B,..` interleaves any of: `onset` (today's
agent), `onset-nomask` (the rebuilt first word (`voxcli.audio.echo_mask`) computed, not given to
the ASR), `onset-maskonly` (rebuilt by the mask alone, without `voxcli.audio.echo_path`'s linear
subtraction), `onset-final` / `onset-nofinal` (the utterances' finals decoded by moonshine-base-en, or by
chat's recognizer itself: `ASRStreamer.final_model`; the other arms as `voxcli chat` chooses here,
`asr.models.chat_final_asr`), `run-pause` (`--compare`'s); each row says what rebuilt it (`rebuilt_by`). `--share
0.2,0.1` runs them under each of those double-talk `SHARE`s in turn (`voxcli.audio.doubletalk`). `--save DIR`
keeps what the agent was fed in each trial (`trialNN.npz`: blocks, feed times, the user's first-word
time, the row, the first word's patch), to decode the same audio again offline without the live ASR's
scheduling: that tells a signal that lost the user's words from a decode that came out differently.
`--self-turns N` plays N whole replies with nobody talking and counts the barge-ins (the issue's
target: 0), the pauses (each one a false pause that played on), the detector's onsets, and the ERLE
(`voxcli.audio.aec.EchoLoss`: raw microphone over AEC3's output, after 2 s of the far end).
Each barge-in also records the user's turn as the agent heard it and its WER against `USER_TEXT`; the run starts
with the same clip played while no reply plays (the no-echo baseline). The load is printed with every figure.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from room_relay import Room, Sinks  # noqa: E402 - (benchmarks/ is the script's directory)

SR = 16000
QUESTION = "What is the weather like this week?"
LONG_REPLY = ("Tomorrow looks bright, with a gentle breeze from the west and a high of twenty two degrees. "
              "In the evening there may be a light shower, so an umbrella would not hurt. On Thursday the "
              "clouds come back, and the weekend should stay dry and a little cooler, good for a long walk.")
USER_END_S = 5.0
"""The user's clip ends here in the recording (one breath): `USER_TEXT`."""
USER_TEXT = "It was the best of times, it was the worst of times."
PLAY_BEFORE_S = 2.5
"""Reply heard before the user starts (past the canceller's warm-up second)."""


def user_speech(rate_like: np.ndarray, path: Any = None) -> tuple[np.ndarray, int]:
    """The user's clip (the Two Cities recording, `path` or the speech-samples bundle's) at the level of `rate_like`."""
    from voxcli.audio.files import read_audio
    from voxcli.hub.resolve import resolve_model

    user, rate = read_audio(path or resolve_model("speech-samples", kind=None).file("two_cities.wav"))
    act = lambda a: float(np.sqrt(np.mean(a[np.abs(a) > 0.01] ** 2)))  # noqa: E731
    first = speech_onset(user, rate, act(user))  # the first sample is speech: user0 is its DAC time
    user = user[first : int(USER_END_S * rate)]
    return (user * (act(rate_like) / act(user))).astype(np.float32), rate


def speech_onset(audio: np.ndarray, rate: int, level: float) -> int:
    """First sample of the speech: the first 10 ms at half the active level, back to where it rises.

    Not the first sample above a threshold: the recording opens with a lip click 0.55 s in
    and its first word ("It") starts 0.66 s later (Silero: 0.15 on the click, 0.9 from 1.18 s);
    timed from the click, every latency here was 0.66 s too long.
    """
    f = rate // 100
    r = np.sqrt(np.mean(audio[: audio.size // f * f].reshape(-1, f) ** 2, axis=1))
    k = int(np.argmax(r >= 0.5 * level))
    while k > 0 and r[k - 1] >= 0.1 * level:
        k -= 1
    return k * f


class Probe:
    """Times of the agent's barge-in steps (wrapped around its methods; the benchmark's own clock)."""

    def __init__(self, agent: Any, speaker: Any) -> None:
        from voxcli.asr.endpointer import FRAME, SAMPLE_RATE
        from voxcli.chat.heard import non_echo_words

        self.marks: dict[str, float] = {}
        self.armed = False
        self.pauses = 0
        self.onsets = 0
        self.act_on_onset = True
        self.forward_patch = True  # arm onset-nomask: the patch is recorded, not given to the ASR
        self.patches: list[tuple[int, int, np.ndarray]] = []  # (fed count at the call, fed sample, audio)
        near_speech = agent.near_speech
        patch = getattr(agent.asr, "patch", None)

        def patch_asr(sample: int, audio: np.ndarray) -> None:  # the capture thread (Agent.feed), once fitted
            self.patches.append((agent._fed, sample + agent._dropped(), np.array(audio, np.float32)))
            if self.forward_patch:
                patch(sample, audio)
            else:  # onset-nomask: an empty patch still ends the wait the onset announced, as chat's own does
                patch(0, np.zeros(0, np.float32))

        if patch is not None:
            agent.asr.patch = patch_asr

        def onset() -> None:  # the canceller's callback (capture thread)
            self.onsets += 1
            if self.armed:
                self.marks.setdefault("onset", time.monotonic())
            if self.act_on_onset:
                near_speech()

        self.on_near_speech = onset
        check, stop, pause = agent._maybe_barge_in, speaker.stop, getattr(speaker, "pause", None)

        def maybe_barge_in(decoded: bool = False) -> None:
            if self.armed:
                now = time.monotonic()
                if agent._run_frames * FRAME * 1000 >= agent.config.barge_in_ms * SAMPLE_RATE:
                    if "run" not in self.marks and (ep := getattr(agent.asr, "_ep", None)) is not None:
                        self.marks["fed"] = agent._wall_of(ep.frame_index * FRAME)  # that audio reached feed()
                    self.marks.setdefault("run", now)
                if non_echo_words(agent._utt_words, agent._recent):
                    self.marks.setdefault("word", now)
            check(decoded)

        def stop_speaker() -> int:
            if self.armed:
                self.marks.setdefault("stop", time.monotonic())
            return stop()

        def pause_speaker(*args: float) -> None:
            self.pauses += 1
            if self.armed:
                self.marks.setdefault("pause", time.monotonic())
            pause(*args)

        agent._maybe_barge_in, speaker.stop = maybe_barge_in, stop_speaker
        if pause is not None:  # (a tree before the pause: the same benchmark, counting barge-ins only)
            speaker.pause = pause_speaker


def wait(cond: Any, timeout: float, step: float = 0.01) -> bool:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(step)
    return True


def session(args: argparse.Namespace, sinks: Any) -> list[dict[str, Any]]:
    from tests.llm.chat_completions_server import ChatServer, Script
    from voxcli.asr.models import ACCURATE_ASR, chat_asr, chat_final_asr
    from voxcli.audio import doubletalk
    from voxcli.audio.aec import CancelledMic, EchoCanceller
    from voxcli.audio.devices import MicCapture
    from voxcli.audio.player import Player
    from voxcli.audio.virtual import DeviceSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models
    from voxcli.events import BargeIn

    reply_of = lambda msgs: LONG_REPLY if msgs[-1]["content"] == QUESTION else "Okay."  # noqa: E731
    seen: list[tuple[float, Any]] = []
    rows: list[dict[str, Any]] = []
    with ChatServer(Script(reply_fn=reply_of, token_delay=0.01)) as srv:
        arms = args.arms.split(",") if args.arms else ["onset", "run-pause"] if args.compare else ["onset"]
        default_final = chat_final_asr(None, chat_asr())  # chat's own choice here (`voxcli chat`)
        models = open_chat_models(url=srv.url, final_asr=default_final or (
            ACCURATE_ASR if "onset-final" in arms else None))
        final = models.asr.final_model
        models.asr.final_model = final if default_final else None  # the baseline: as chat runs
        rate = models.voice.sample_rate
        user, user_rate = user_speech(models.voice.synthesize(LONG_REPLY[:60]))
        canceller = EchoCanceller(SR)
        speaker = DeviceSpeaker(rate, "pulse", on_played=canceller.reference.tap)
        with sinks.user_sink():  # the microphone's sink: with --room, the user is in the room, not in the speaker
            voice_of_user = Player(user_rate, "pulse")  # opened now: not part of any barge-in
        mic = CancelledMic(MicCapture(SR, "pulse"), canceller)
        agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream, speaker,
                      AgentConfig(log_turns=False, preemptive=False),
                      on_event=lambda e: seen.append((time.monotonic(), e)), clock=time.monotonic).start()
        probe = Probe(agent, speaker)
        agent.hear_double_talk(canceller)  # as `voxcli chat` wires it (then the probe listens in between)
        canceller.on_near_speech = probe.on_near_speech
        lags: list[float] = []  # capture -> feed lag of every block (MicCapture stamp to Agent.feed)
        levels: list[tuple[float, float]] = []  # (fed at, RMS) of every cancelled block
        fed: list[np.ndarray] = []  # this trial's cancelled blocks (--save)

        def listen() -> None:
            for b in mic:
                now = time.monotonic()
                lags.append(now - mic.mic.block_time)
                levels.append((now, float(np.sqrt(np.mean(b * b)))))
                if args.save:  # (fed at, the agent's fed count before it, the block)
                    fed.append(np.concatenate([[now, agent._fed], b]))
                agent.feed(b)

        (listener := threading.Thread(target=listen, daemon=True)).start()
        try:
            if not args.self_turns:  # the same speech through the same path with no reply: the WER baseline
                n0 = len(srv.records)
                voice_of_user.write(user, timeout=10)
                base = {"baseline_no_echo": heard_turn(srv, n0, 1), "load": round(os.getloadavg()[0], 2)}
                base["user_wer"] = wer_of(base["baseline_no_echo"])
                print(json.dumps(base), flush=True)
                rows.append(base)
                wait(lambda: not agent.busy(), 30)
                time.sleep(0.5)
            trials = args.self_turns or args.trials
            shares = args.share or [doubletalk.SHARE]
            for k in range(trials):
                del lags[:], levels[:], fed[:], probe.patches[:]
                n0 = len(srv.records)
                arm = arms[k % len(arms)]
                doubletalk.SHARE = shares[k // len(arms) % len(shares)]  # each arm under each share in turn
                old = arm == "run-pause"
                probe.act_on_onset = not old  # the old agent paused on the VAD run only
                agent._double_talk = not old  # and stopped on the run and a word alone
                probe.forward_patch = arm in ("onset", "onset-maskonly", "onset-final", "onset-nofinal")
                models.asr.final_model = final if arm == "onset-final" or (
                    default_final and arm != "onset-nofinal") else None
                canceller.mask.linear, canceller.mask.rebuilt_by = arm != "onset-maskonly", None
                loss0 = dataclasses.replace(canceller.loss)  # ERLE over this turn (from 2 s of far end on)
                row = self_turn(agent, probe, seen) if args.self_turns else barge_in(
                    agent, speaker, voice_of_user, user, probe, seen, BargeIn)
                t0 = None
                if "t_user0" in row:  # the user's voice in the cancelled signal: RMS above 0.02, fed at
                    row["user_text"] = heard_turn(srv, n0, 2)  # the question, then the user's words
                    row["user_wer"] = wer_of(row["user_text"])
                    t0 = row.pop("t_user0")
                    loud = [t for t, r in list(levels) if t > t0 and r > 0.02]
                    row["voice_fed_ms"] = round(1000 * (loud[0] - t0)) if loud else None
                row.update(stop=arm, share=doubletalk.SHARE, load=round(os.getloadavg()[0], 2),
                           final_asr=getattr(models.asr.final_model, "name", None),
                           patches=len(probe.patches),
                           rebuilt_by=canceller.mask.rebuilt_by, raw_kept_s=canceller.mask.raw_kept_s,
                           echo_delay_ms=None if (d := canceller.detector.delay.lag) is None else round(1000 * d / SR, 1),
                           erle_db=canceller.loss.db(since=loss0) if args.self_turns else None,  # user-free
                           aec_frames_too_late=getattr(canceller, "frames_too_late", None),  # cumulative
                           mic_queue_s=round(mic.mic._queue.qsize() * 0.032, 2),
                           asr_dropped_s=round(agent.asr.stats.dropped_s, 2),  # cumulative
                           feed_lag_ms_p50_max=[round(1000 * float(np.percentile(lags, 50))),
                                                round(1000 * max(lags))] if lags else None)
                print(json.dumps(row), flush=True)
                rows.append(row)
                if args.save and fed:  # what the agent was fed this trial, for an offline decode
                    np.savez(Path(args.save) / f"trial{k:02d}.npz", t=np.array([b[0] for b in fed]),
                             fed=np.concatenate([b[2:] for b in fed]).astype(np.float32),
                             sizes=np.array([b.size - 2 for b in fed]), t_user0=np.nan if t0 is None else t0,
                             row=json.dumps(row), **patch_arrays(probe.patches, int(fed[0][1])))
                wait(lambda: not agent.busy(), 30)
                time.sleep(0.5)
        finally:
            for closable in (agent, mic, voice_of_user, speaker, models.llm):
                closable.close()
            listener.join(2.0)  # it ends within a read of the closed mic
    return rows


def patch_arrays(patches: list[tuple[int, int, np.ndarray]], fed0: int) -> dict[str, Any]:
    """This trial's first patch in its saved samples (the first saved one was fed sample `fed0`): the
    samples fed when it was sent, where it goes, its audio."""
    if not patches:
        return {}
    at, sample, audio = patches[0]
    return {"patch_at": at - fed0, "patch_sample": sample - fed0, "patch_audio": audio}


def heard_turn(srv: Any, n0: int, k: int) -> str | None:
    """The user message of the `k`-th chat request after the first `n0` (None: it never came)."""
    if not wait(lambda: len(srv.records) >= n0 + k, 30):
        return None
    return str(srv.records[n0 + k - 1].body["messages"][-1]["content"])


def wer_of(text: str | None) -> float | None:
    from voxcli.bench.wer import word_errors
    return None if text is None else round(word_errors(USER_TEXT, text).rate, 3)


def barge_in(agent: Any, speaker: Any, voice_of_user: Any, user: np.ndarray, probe: Probe,
             seen: list, barge_cls: type) -> dict[str, Any]:
    n_seen = len(seen)
    base = speaker.played_samples()  # cumulative over the stream's replies: count this reply's only
    agent.submit(QUESTION)
    rate = speaker.sample_rate
    if not wait(lambda: agent.speaking and speaker.played_samples() - base >= PLAY_BEFORE_S * rate, 60):
        return {"error": "the reply did not play"}
    probe.marks.clear()
    probe.armed = True
    player = speaker._player  # the reply's stream (the old stop swaps in another one)
    first = voice_of_user.played_samples  # nothing queued: the clip's sample 0 is the next one played
    voice_of_user.write(user, timeout=10)
    stamp: list[float] = []

    def barged() -> bool:
        if not stamp and (t := voice_of_user._head.time_of(first)) is not None:
            stamp.append(t)  # taken while the play head still holds that block
        return any(isinstance(e, barge_cls) for _, e in seen[n_seen:])

    got = wait(barged, 15, step=0.005)
    time.sleep(0.3)  # what the device still had plays out
    probe.armed = False
    blocks = list(player._head._blocks)
    t_user0 = stamp[0] if stamp else None
    if not got or t_user0 is None:
        return {"error": "no barge-in" if not got else "user audio not stamped"}
    t_silent = blocks[-1][1] + blocks[-1][2] / player.device_rate  # the reply's last sample at the DAC
    ms = lambda t: None if t is None else round(1000 * (t - t_user0))  # noqa: E731
    return {"t_user0": t_user0, "latency_ms": ms(t_silent), "onset_ms": ms(probe.marks.get("onset")),
            "fed_ms": ms(probe.marks.get("fed")), "run_ms": ms(probe.marks.get("run")),
            "pause_ms": ms(probe.marks.get("pause")), "word_ms": ms(probe.marks.get("word")),
            "stop_ms": ms(probe.marks.get("stop"))}


def self_turn(agent: Any, probe: Probe, seen: list) -> dict[str, Any]:
    from voxcli.events import BargeIn, Caption

    n_seen, pauses, onsets = len(seen), probe.pauses, probe.onsets
    agent.submit(QUESTION)
    wait(lambda: agent.speaking, 60)
    wait(lambda: not agent.speaking, 90)
    evs = [e for _, e in seen[n_seen:]]
    words = max((len(f"{e.stable} {e.volatile}".split()) for e in evs if isinstance(e, Caption)), default=0)
    return {"barge_ins": sum(isinstance(e, BargeIn) for e in evs), "pauses": probe.pauses - pauses,
            "onsets": probe.onsets - onsets,
            "barge_in_words": [e.user_words for e in evs if isinstance(e, BargeIn)],
            "longest_caption_words": words}


def summary(rows: list[dict[str, Any]], self_turns: bool) -> None:
    from voxcli.bench.metrics import percentile

    if self_turns:
        false = sum(r.get("barge_ins", 0) for r in rows)
        paused = sum(r.get("pauses", 0) for r in rows)
        onsets = sum(r.get("onsets", 0) for r in rows)
        erle = [r["erle_db"] for r in rows if r.get("erle_db") is not None] or [np.nan]
        print(f"self-interruptions: {false} over {len(rows)} turns, false pauses (resumed) {paused}, double-talk "
              f"onsets {onsets}, ERLE min {min(erle):.1f} median {np.median(erle):.1f} dB "
              f"(reply at full level into the mic, AEC on); "
              f"load {min(r['load'] for r in rows)}-{max(r['load'] for r in rows)}")
        return
    for r in rows:
        if "baseline_no_echo" in r:
            print(f"the same speech with no reply: WER {r['user_wer']} [{r['baseline_no_echo']}] (load {r['load']})")
    for kind, share in dict.fromkeys((r["stop"], r.get("share")) for r in rows if "stop" in r):
        ok = [r for r in rows if (r.get("stop"), r.get("share")) == (kind, share) and "latency_ms" in r]
        if not ok:
            continue
        line = [f"{kind:6s} SHARE {share} n={len(ok)}"]
        for key in ("latency_ms", "onset_ms", "fed_ms", "run_ms", "pause_ms", "word_ms", "stop_ms"):
            vals = [r[key] for r in ok if r[key] is not None]
            if vals:
                line.append(f"{key[:-3]} p50 {percentile(vals, 50):.0f} p90 {percentile(vals, 90):.0f}")
        wers = [r["user_wer"] for r in ok if r.get("user_wer") is not None]
        if wers:
            line.append(f"user WER mean {np.mean(wers):.3f} max {max(wers):.3f}")
        print("  ".join(line) + f"  (ms from the user's first sample; load {min(r['load'] for r in ok)}-"
              f"{max(r['load'] for r in ok)})")
    failed = [r for r in rows if "error" in r]
    if failed:
        print(f"{len(failed)} trials failed: {failed}")


def shares(text: str) -> list[float]:
    """`--share`: shares of the microphone's power, each in (0, 1]."""
    try:
        xs = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not all(0 < x <= 1 for x in xs):
        raise argparse.ArgumentTypeError(f"each share is in (0, 1]: {text}")
    return xs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--compare", action="store_true", help="interleave the old pause (on the VAD run only)")
    ap.add_argument("--self-turns", type=int, default=0, help="count false barge-ins over this many replies")
    ap.add_argument("--arms", default=None,
                    help="interleave: onset, onset-nomask, onset-maskonly, onset-final, onset-nofinal, run-pause")
    ap.add_argument("--share", type=shares, default=None,
                    help="interleave the double-talk detector's SHARE, e.g. 0.2,0.1 (with --trials)")
    ap.add_argument("--save", default=None, help="directory: each trial's cancelled audio as fed (trialNN.npz)")
    ap.add_argument("--room", type=float, nargs="?", const=0.3, default=None, metavar="TAIL",
                    help="the echo through a room (room_relay.py); TAIL: its reverberation's level (aec_room.Room)")
    args = ap.parse_args()
    if args.share and args.self_turns:  # its summary adds all replies up: the shares' figures would be one
        ap.error("--share interleaves barge-in trials (--trials), not --self-turns")
    if args.save:  # made before the session: a missing directory lost a 6-minute run at its first trial
        Path(args.save).mkdir(parents=True, exist_ok=True)
    sinks = Sinks(room=None if args.room is None else Room(delay_s=0.0, tail=args.room))
    try:
        rows = session(args, sinks)
        gc.collect()  # the session's cycles (agent <-> probe) go now, not after the bindings' leak check at exit
    finally:
        sinks.close()
    summary(rows, bool(args.self_turns))


if __name__ == "__main__":
    main()
