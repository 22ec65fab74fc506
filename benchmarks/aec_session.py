#!/usr/bin/env python3
"""Record what the echo canceller got in a device run, and replay it offline: one session, many cancellers.

    python benchmarks/aec_session.py record S.npz -- --room 0.3 --self-turns 8   # bench_barge_in.py's arguments
    python benchmarks/aec_session.py replay S.npz                                 # the canceller as it is
    python benchmarks/aec_session.py replay S.npz --no-gate                       # without the residual gate
    python benchmarks/aec_session.py words T.npz                                  # T: recorded with --trials
    python benchmarks/aec_session.py tail S.npz                                   # the echo's tail the fit leaves
    python benchmarks/aec_session.py onsets T.npz... --self S.npz... --share 0.1  # the detector's onsets

Why: the ERLE of one reply through the room fixture swings by 10-20 dB from run
to run (the relay's queue, the sound server's skips, the load), so two versions
of the canceller compared on two device runs tell little. Recorded, the same
microphone blocks and reference taps, with their stamps and in their order,
go through any canceller: a deterministic A/B on real device audio. `record`
runs `bench_barge_in.py` with `ReferenceTimeline.tap` and
`EchoCanceller.process` wrapped; `replay` feeds them to a fresh
`EchoCanceller` and prints its ERLE over the session and per 15 s (frames where
the reply plays, from 2 s of reply on, as chat's report counts it), the median
of the echo delay's raw measurements per 15 s (not only the agreeing ones it
locks on), and how many frames the residual gate took down. A tap that came
in just after a capture block was recorded is replayed after it: the live run
may have seen it a block earlier.

`words` replays a session recorded with `--trials` and transcribes each
barge-in offline (chat's recognizer, moonshine-tiny-en, as the live run had,
unless `--model` names another; 4.4 s from 0.8 s before the onset, whole) as
AEC3 gave it and with the first word's span patched as chat patches it
(`voxcli.chat.listening`; the output latency taken as 50 ms; `--mask-only`:
rebuilt by the mask alone, as `bench_barge_in.py --arms onset-maskonly`):
what the span itself is worth, apart from the streaming decode. On four
sessions (2026-12-02, 8 barge-ins each) live against offline: 0.125/0.135,
0.146/0.146, 0.083/0.031 (mask) and 0.052/0.062 (the room's fit); a larger
model, moonshine-base-en, the default before, hid most errors (0.010 against
0.135 on the first).

`--place seamless` puts each span where AEC3's output holds its samples: AEC3
hands them back `EchoCanceller.output_delay` (128) samples late, and chat puts
the span at the output's own numbering of the mask's (input) samples, so its
start skips 8 ms and the join at its end plays 8 ms twice. `--place blank`
silences the span instead. Seven sessions, 80 barge-ins (2026-12-02/03): WER
0.057 as chat places it, 0.092 seamless, 0.246 blank.

`onsets` replays the double-talk detector over sessions recorded with
`--trials` (and, after `--self`, with `--self-turns`: nobody talks there) and
says how soon after the user's first sample in the microphone each barge-in's
first onset came, and how many onsets came with no user talking, over how
many minutes of reply; `--share` sets `doubletalk.SHARE` for the run. In a
`--trials` session each trial's first onset is taken as the user's (the count
of barge-ins it prints should be the session's trials: a false onset before a
user would show as one more) and the 5 s after it as theirs. Over 13 sessions
recorded with `--room 0.3 --trials 8|16|24 --arms onset` (192 barge-ins,
2026-12-02/03: each gave its own trial count) and 4 of self-turns
(2026-12-03, one of them with two busy loops beside it for 200 s), 19.5 min
of reply: SHARE 0.2, p50/p90 64/223 ms, 36 later than 150 ms; 0.1: 59/82 ms,
17; 2 onsets with no user either way.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import aec_diagnose  # noqa: E402 - next to this file


@contextlib.contextmanager
def recording(events: list[tuple]) -> Iterator[None]:
    """Within it, every `ReferenceTimeline.tap` and `EchoCanceller.process` call is appended to `events`
    ("tap", block, t, rate, 0) / ("cap", block, t, rate, the timeline's t0), in the order they came."""
    from voxcli.audio import aec, aec_ref

    tap, process = aec_ref.ReferenceTimeline.tap, aec.EchoCanceller.process

    def tapped(self, played, t_play, device_rate):  # type: ignore[no-untyped-def]
        events.append(("tap", np.array(played, np.float32), t_play, device_rate, 0.0))
        return tap(self, played, t_play, device_rate)

    def processed(self, block, t_capture):  # type: ignore[no-untyped-def]
        t = float("nan") if t_capture is None else t_capture
        events.append(("cap", np.array(block, np.float32), t, self.rate, self.reference.t0))
        return process(self, block, t_capture)

    aec_ref.ReferenceTimeline.tap, aec.EchoCanceller.process = tapped, processed  # type: ignore[method-assign]
    try:
        yield
    finally:
        aec_ref.ReferenceTimeline.tap, aec.EchoCanceller.process = tap, process  # type: ignore[method-assign]


def save(out: str | Path, events: list[tuple]) -> None:
    """`recording`'s events as a session file (what `feed` reads); nothing is written when nothing was recorded."""
    if not events:
        print(f"nothing recorded: no {out} written")
        return
    kinds = np.array([e[0] == "cap" for e in events], bool)
    sizes = np.array([e[1].size for e in events])
    np.savez_compressed(out, cap=kinds, sizes=sizes, audio=np.concatenate([e[1] for e in events]),
                        t=np.array([e[2] for e in events]), rate=np.array([e[3] for e in events]),
                        t0=np.array([e[4] for e in events]))
    print(f"recorded {int(kinds.sum())} capture blocks and {int((~kinds).sum())} taps -> {out}")


def record(out: str, bench_args: list[str]) -> None:
    events: list[tuple] = []
    with recording(events):
        import bench_barge_in

        sys.argv = ["bench_barge_in.py", *bench_args]
        try:
            bench_barge_in.main()
        finally:
            save(out, events)


def canceller_for(path: str, **config: bool):  # type: ignore[no-untyped-def]
    """A fresh `EchoCanceller` at the session's rate and start (`AECConfig(**config)`)."""
    from voxcli.audio.aec import AECConfig, EchoCanceller
    from voxcli.audio.aec_ref import ReferenceTimeline

    z = np.load(path)
    first = int(np.argmax(z["cap"]))
    t0, rate = float(z["t0"][first]), int(z["rate"][first])
    return EchoCanceller(rate, AECConfig(**config), reference=ReferenceTimeline(rate, clock=lambda: t0))


def feed(path: str, c, after=None) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    """The session's taps and capture blocks through `c`, in their recorded order; `after()` after each block.
    Returns what `c.process` gave."""
    z = np.load(path)
    cap, sizes, audio, ts, rates = z["cap"], z["sizes"], z["audio"], z["t"], z["rate"]
    out, ends = [], np.cumsum(sizes)
    for k in range(cap.size):
        block = audio[ends[k] - sizes[k] : ends[k]]
        if not cap[k]:
            c.reference.tap(block, float(ts[k]), int(rates[k]))
            continue
        out.append(c.process(block, None if np.isnan(ts[k]) else float(ts[k])))
        if after is not None:
            after()
    return out


def replay(path: str, gate: bool) -> None:
    from voxcli.audio import echo_delay
    from voxcli.audio.aec import ERLE_AFTER_S

    c = canceller_for(path, residual_gate=gate)
    rate = c.rate
    frames: list[tuple[bool, float, float]] = []
    add = c.loss.add

    def counted(playing: bool, near: np.ndarray, y: np.ndarray) -> None:
        frames.append((playing, float(np.dot(near, near)), float(np.dot(y, y))))
        add(playing, near, y)

    c.loss.add = counted  # type: ignore[method-assign]
    lags: list[tuple[int, int]] = []
    measure = echo_delay.EchoDelay._measure

    def measured(self) -> None:  # type: ignore[no-untyped-def]
        measure(self)
        if self.measured is not None:
            lags.append((self._frames, self.measured))

    echo_delay.EchoDelay._measure = measured  # type: ignore[method-assign]
    started = time.process_time()
    feed(path, c)
    cpu = time.process_time() - started
    f = np.array(frames)
    playing, heard = f[:, 0] > 0, np.cumsum(f[:, 0] > 0)
    counted_ = playing & (heard > ERLE_AFTER_S * 100)
    per = []
    for lo in range(0, len(f), 1500):
        m = counted_[lo : lo + 1500]
        raw, out = f[lo : lo + 1500, 1][m].sum(), f[lo : lo + 1500, 2][m].sum()
        per.append(f"{10 * np.log10(raw / max(out, 1e-20)):.1f}" if m.sum() > 300 else "-")
    lag = np.array(lags, float)
    delays = []
    for lo in range(0, len(f), 1500):
        sel = (lag[:, 0] >= lo) & (lag[:, 0] < lo + 1500) if lag.size else np.zeros(0, bool)
        delays.append(f"{np.median(lag[sel, 1]) * 1000 / rate:.0f}" if sel.any() else "-")
    gated = c.gate.gated if c.gate is not None else 0
    print(f"{path}: {len(f) / 100:.0f} s, reply {playing.sum() / 100:.0f} s; ERLE {c.loss.db()} dB "
          f"({'with' if gate else 'without'} the residual gate; {gated} frames gated); "
          f"{1e6 * cpu / max(len(f), 1):.0f} us of CPU per 10 ms frame")
    print(f"  ERLE per 15 s: {' '.join(per)}")
    print(f"  echo delay after the placement, median of the raw measurements per 15 s (ms): {' '.join(delays)}")


USER_SAYS = "It was the best of times, it was the worst of times."
"""What bench_barge_in.py's user says (the Two Cities recording's first sentence)."""


def words(path: str, pre_s: float | None, post_extra_s: float, model: str | None, mask_only: bool = False,
          place: str = "chat") -> None:
    from voxcli.asr.models import chat_asr, load_asr
    from voxcli.audio.echo_mask import POST_S, PRE_S, TRAIL_S
    from voxcli.bench.wer import word_errors
    from voxcli.chat.listening import LATE_ECHO_MAX_S
    from voxcli.errors import VoxError

    try:  # first: a missing model is one line at once, not after the replay
        asr, _ = load_asr(model or chat_asr(), offline=True)
    except VoxError as e:
        raise SystemExit(str(e)) from None
    pre_s = PRE_S if pre_s is None else pre_s
    c = canceller_for(path)
    c.mask.linear = not mask_only
    rate = c.rate
    rebuilt_by: list[str | None] = []
    onsets: list[int] = []
    pending: list[tuple[int, int]] = []  # (onset sample, span samples after it)
    patches: list[tuple[int, np.ndarray]] = []

    def told() -> None:  # the first onset of each trial pauses the reply (trials are > 6 s apart)
        p = c.mask.count * c.mask.frame
        if not onsets or p - onsets[-1] >= 6 * rate:
            onsets.append(p)
            post = POST_S + 0.05 + min(LATE_ECHO_MAX_S, max(0.0, c.late_echo_s)) + post_extra_s
            pending.append((p, int(round(post * rate))))

    c.on_near_speech = told

    def patch_due() -> None:  # the span is rebuilt once its audio and `TRAIL_S` more were recorded, as chat does
        for p, post in [x for x in pending if c.mask.count * c.mask.frame >= x[0] + x[1] + TRAIL_S * rate]:
            pending.remove((p, post))
            patches.append(c.mask.audio(p - int(pre_s * rate), p + post))
            rebuilt_by.append(c.mask.rebuilt_by)

    out = feed(path, c, patch_due)
    aec3 = np.concatenate(out)
    patched = aec3.copy()
    delay = c.output_delay
    if place == "seamless" and delay is None:
        raise SystemExit("the canceller's output delay could not be measured: no seamless placement")
    shift = delay if place == "seamless" else 0  # the mask numbers input samples, and chat patches them so
    for lo, a in patches:  # "seamless": where the output holds them (AEC3 hands them back `output_delay` late)
        a = a[: max(0, patched.size - lo - shift)]
        patched[lo + shift : lo + shift + a.size] = 0.0 if place == "blank" else a
    print(f"transcribed by {asr.name}; spans rebuilt by {', '.join(map(str, rebuilt_by))}; placed: {place} "
          f"(AEC3's output lags its input by {delay} samples)")
    label = {"chat": "span patched", "seamless": "span patched seamless", "blank": "span silenced"}[place]
    near, user = aec_diagnose.captured(path), aec_diagnose.user_clip(rate)
    leads = [1000 * aec_diagnose.user_lead(near, p, user, rate) / rate for p in onsets]
    for name, y in (("AEC3's output", aec3), (f"{label} (pre {pre_s:g} s)", patched)):
        errors = []
        for p, lead in zip(onsets, leads):
            text = asr.text(y[max(0, p - int(0.8 * rate)) : p + int(3.6 * rate)].astype(np.float32))
            errors.append(word_errors(USER_SAYS, text))
            print(f"  {name} (user started {lead:3.0f} ms before the onset): {text}")
        total = sum(errors[1:], errors[0]) if errors else None
        print(f"{name}: WER {total.rate:.3f} over {len(onsets)} barge-ins" if total else f"{name}: no onsets")
        if errors:
            print(f"  {aec_diagnose.split_by_lead(leads, errors)}")


@dataclass
class Onsets:
    """What `onsets` found over its sessions."""

    leads_ms: list[float]
    """Per barge-in: its first onset after the user's first sample in the microphone."""
    false: int
    """Onsets with no user talking."""
    reply_s: float
    """Reply heard over all the sessions (the far end playing), in seconds."""


def onsets(paths: list[str], self_turns: list[str], share: float | None = None,
           user: np.ndarray | None = None) -> Onsets:
    """The double-talk detector's onsets over recorded sessions, told as chat would be told (a fresh canceller;
    `share`: `doubletalk.SHARE` for this run): per barge-in, how long after the user's first sample in the
    microphone the first onset came (`aec_diagnose.user_lead`; a trial's first onset is the user's, and so
    are those within 5 s after it); and the onsets where no user talked (`self_turns`: sessions recorded with
    --self-turns, where every onset is false; in the others, the rest). `user`: the barging-in user's clip at
    the sessions' rate (default: bench_barge_in.py's, from the speech-samples bundle)."""
    from voxcli.audio import doubletalk

    was = doubletalk.SHARE
    if share is not None:
        doubletalk.SHARE = share  # type: ignore[misc]  # a Final the detector reads per frame: this run's
    found = Onsets([], 0, 0.0)
    try:
        for path, nobody in [*((p, False) for p in paths), *((p, True) for p in self_turns)]:
            c = canceller_for(path)
            told: list[int] = []
            c.on_near_speech = lambda: told.append(c.mask.count * c.mask.frame)
            feed(path, c)
            found.reply_s += c.loss.far_frames * c.frame / c.rate  # the frames the reply played in (`EchoLoss`)
            rate, starts = c.rate, []
            if not nobody:
                near = aec_diagnose.captured(path)
                user = aec_diagnose.user_clip(rate) if user is None else user
                for p in told:  # a trial's first onset (trials are > 6 s apart): the user is in the 0.5 s before
                    if not starts or p - starts[-1][1] >= 6 * rate:
                        starts.append((p - aec_diagnose.user_lead(near, p, user, rate), p))
            mine = [1000 * (p - s) / rate for s, p in starts]
            wrong = [p for p in told if not any(-0.2 * rate <= p - s <= 5 * rate for s, _ in starts)]
            found.leads_ms += mine
            found.false += len(wrong)
            late = sum(ms > aec_diagnose.LATE_MS for ms in mine)
            print(f"  {path}: {len(mine)} barge-in(s) ({late} detected late, > {aec_diagnose.LATE_MS} ms), "
                  f"{len(wrong)} onset(s) with no user", flush=True)
        ms = np.array(found.leads_ms)
        head = (f"onset after the user's first sample p50 {np.median(ms):.0f} p90 {np.percentile(ms, 90):.0f} ms "
                f"over {ms.size}, {int((ms > aec_diagnose.LATE_MS).sum())} late; ") if ms.size else ""
        print(f"SHARE {doubletalk.SHARE:g}: {head}{found.false} onset(s) with no user over "
              f"{found.reply_s / 60:.1f} min of reply")
    finally:
        doubletalk.SHARE = was  # type: ignore[misc]
    return found


def one_share(text: str) -> float:
    """`--share`: one share, checked as bench_barge_in.py checks its list."""
    import bench_barge_in

    xs = bench_barge_in.shares(text)
    if len(xs) != 1:
        raise argparse.ArgumentTypeError(f"one share, not {text}")
    return xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="run bench_barge_in.py (arguments after --) and save what the canceller got")
    r.add_argument("out")
    r.add_argument("bench_args", nargs=argparse.REMAINDER)
    p = sub.add_parser("replay", help="a recorded session through the canceller as it is now")
    p.add_argument("session")
    p.add_argument("--no-gate", action="store_true", help="without the residual echo gate")
    w = sub.add_parser("words", help="a session recorded with --trials: each barge-in transcribed offline")
    w.add_argument("session")
    w.add_argument("--pre", type=float, default=None, help="seconds rebuilt before the onset (default: chat's)")
    w.add_argument("--post-extra", type=float, default=0.0, help="seconds added to the span after the pause")
    w.add_argument("--model", default=None, help="recognizer (default: chat's, as the live run had)")
    w.add_argument("--mask-only", action="store_true", help="spans rebuilt by the mask alone (no fit)")
    w.add_argument("--place", choices=("chat", "seamless", "blank"), default="chat",
                   help="chat: each span as chat patches it (output_delay early); seamless: where AEC3's output "
                        "holds its samples; blank: silenced (what the span is worth to the recognizer)")
    t = sub.add_parser("tail", help="the room's fit where the reply falls silent on its own: the echo's tail")
    t.add_argument("session")
    o = sub.add_parser("onsets", help="the double-talk detector's onsets: how soon after the user, and with none")
    o.add_argument("session", nargs="*", help="sessions recorded with --trials")
    o.add_argument("--self", dest="self_turns", nargs="+", action="extend", default=[], metavar="S",
                   help="sessions recorded with --self-turns (nobody talks: every onset is false)")
    o.add_argument("--share", type=one_share, default=None, help="doubletalk.SHARE for this run (default: as is)")
    args = ap.parse_args()
    if args.cmd == "record":
        sessions = []
    elif args.cmd == "onsets":
        sessions = [*args.session, *args.self_turns]
        if not sessions:
            raise SystemExit("no session given: onsets T.npz ... [--self S.npz ...]")
        if len(set(sessions)) < len(sessions):
            raise SystemExit("a session given twice (with --trials or after --self: once)")
    else:
        sessions = [args.session]
    missing = [s for s in sessions if not Path(s).is_file()]
    if missing:
        raise SystemExit(f"no recorded session at {missing[0]}: record one with "
                         f"`{Path(__file__).name} record S.npz -- ...`")
    if args.cmd == "record":
        record(args.out, [a for a in args.bench_args if a != "--"])
    elif args.cmd == "onsets":
        onsets(args.session, args.self_turns, args.share)
    elif args.cmd == "tail":
        aec_diagnose.tail(args.session, canceller_for, feed)
    elif args.cmd == "words":
        words(args.session, args.pre, args.post_extra, args.model, args.mask_only, args.place)
    else:
        replay(args.session, not args.no_gate)


if __name__ == "__main__":
    main()
