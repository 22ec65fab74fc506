"""Full-duplex chat on real devices with the echo canceller: the assistant's reply plays into a PulseAudio
null sink whose monitor is the microphone (the loudest echo a room can give: the reply itself, at full
level), and the agent listens all the time. Its own voice coming back does not interrupt it; a user who
talks over it (a real recording, played into the same sink by another stream, not tapped) still does,
and is transcribed.

Real voice, ASR and VAD; a loopback chat-completions server; real PortAudio streams.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tests.audio.test_aec_device import echo_sink  # noqa: F401 - fixture: a private null sink
from tests.cli.test_chat import turns  # noqa: F401 - fixture: the user's question as speech
from tests.llm.chat_completions_server import ChatServer, Script
from voxcli.audio import aec
from voxcli.audio.files import read_audio
from voxcli.bench.wer import word_errors
from voxcli.events import BargeIn, Caption, Notice

SR = 16000
USER_S = 5.0
USER_TEXT = "It was the best of times, it was the worst of times."
"""The first 5 s of the speech-samples Two Cities recording (one breath: one turn)."""
USER_WORDS_HEARD = 4
"""Words of `USER_TEXT` the user's turn must have, aligned in order (of 12)."""
LONG_REPLY = ("Tomorrow looks bright, with a gentle breeze from the west and a high of twenty two degrees. "
              "In the evening there may be a light shower, so an umbrella would not hurt. On Thursday the "
              "clouds come back, and the weekend should stay dry and a little cooler, good for a long walk.")

pytestmark = [pytest.mark.device, pytest.mark.slow,
              pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))]


@pytest.mark.flaky(reruns=2, reason="real-time chat through PulseAudio on a shared CPU")
def test_own_voice_does_not_barge_in_and_the_user_still_does(echo_sink, real_cache, speech_samples) -> None:  # noqa: F811
    from voxcli.audio.aec import CancelledMic, EchoCanceller
    from voxcli.audio.devices import MicCapture
    from voxcli.audio.player import Player
    from voxcli.audio.virtual import DeviceSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    user, user_rate = read_audio(speech_samples["two_cities"])
    user = user[: int(USER_S * user_rate)]
    seen: list[object] = []
    with ChatServer(Script(replies=[LONG_REPLY, "Okay."], token_delay=0.01)) as srv:
        models = open_chat_models(url=srv.url)
        rate = models.voice.sample_rate
        reply = models.voice.synthesize(LONG_REPLY[:60])
        user = user * (_active_rms(reply) / _active_rms(user))  # the user as loud as the reply's echo
        canceller = EchoCanceller(SR)
        speaker = DeviceSpeaker(rate, "pulse", on_played=canceller.reference.tap)
        mic = CancelledMic(MicCapture(SR, "pulse"), canceller)
        agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream, speaker,
                      AgentConfig(log_turns=False, preemptive=False), on_event=seen.append).start()
        agent.hear_double_talk(canceller)  # as `voxcli chat` wires it: double talk pauses the reply
        listening = threading.Thread(target=lambda: [agent.feed(b) for b in mic], daemon=True)
        listening.start()
        try:
            agent.submit("What is the weather like this week?")
            # 1. the reply plays and comes back through the "room" for 4 s: nothing is heard as speech
            deadline = time.monotonic() + 90
            while speaker.played_samples() < 4 * rate:
                assert time.monotonic() < deadline and agent.error is None, (agent.error, seen[-5:])
                time.sleep(0.05)
            echo_phase = list(seen)
            # 2. the user talks over the reply
            t_user = time.monotonic()
            with Player(user_rate, "pulse") as voice_of_user:
                voice_of_user.write(user, timeout=10)
                while not any(isinstance(e, BargeIn) for e in seen) and time.monotonic() - t_user < 15:
                    time.sleep(0.02)
                t_barge = time.monotonic()
                voice_of_user.drain(timeout=15)
            assert srv.wait_for(lambda: len(srv.records) >= 2, 30), [e for e in seen if isinstance(e, Notice)]
        finally:
            agent.close()
            mic.close()
            speaker.close()
            models.llm.close()
    assert agent.error is None, agent.error
    heard = [f"{e.stable} {e.volatile}".split() for e in echo_phase if isinstance(e, Caption)]
    assert not any(isinstance(e, BargeIn) for e in echo_phase), echo_phase
    stats = (canceller.frames_without_reference, canceller.reanchors, canceller.reference.reanchors)
    # the ASR heard (almost) nothing of 4 s of the reply: at most a word or two in any caption
    assert max(map(len, heard), default=0) <= 2, (heard, stats)
    barge = [e for e in seen if isinstance(e, BargeIn)]
    assert len(barge) == 1 and barge[0].turn == 0
    print(f"barge-in {1000 * (t_barge - t_user):.0f} ms after the user's audio was queued; "
          f"AEC frames {canceller.frames}, reanchors capture {canceller.reanchors}, "
          f"reference {canceller.reference.reanchors}")
    asked = " ".join(r.body["messages"][-1]["content"] for r in srv.records[1:])
    w = word_errors(USER_TEXT, asked)
    print(f"the user's turn as heard: {asked!r} (WER {w.rate:.2f})")
    # The user's words, not the reply's. How many of the first ones AEC3 mangles before the reply pauses
    # depends on the load: 0.08-0.92 WER on a loaded box (benchmarks/bench_barge_in.py, which measures it;
    # the same speech with no reply: 0.00). What every run gives: a third of the user's words, in order.
    assert w.ref_words - w.substitutions - w.deletions >= USER_WORDS_HEARD, asked
    assert not {"breeze", "shower", "umbrella", "degrees"} & set(asked.lower().split()), asked


def _active_rms(a: np.ndarray) -> float:
    a = np.asarray(a, np.float64)
    return float(np.sqrt(np.mean(a[np.abs(a) > 0.01] ** 2)))


@pytest.mark.flaky(reruns=2, reason="real-time chat through PulseAudio on a shared CPU")
def test_chat_on_the_speaker_is_full_duplex_and_does_not_answer_itself(echo_sink, turns, real_cache) -> None:  # noqa: F811
    """`voxcli chat --device pulse` without --half-duplex: the CLI wires the tap and the canceller; the
    question is answered once and the reply, heard back at full level, neither interrupts nor re-asks."""
    with ChatServer(Script(replies=[LONG_REPLY], token_delay=0.01)) as srv:
        env = {**os.environ, "VOXCLI_CACHE_DIR": str(real_cache), "NO_COLOR": "1"}
        p = subprocess.Popen([sys.executable, "-m", "voxcli", "chat", "--llm-url", srv.url, "--device", "pulse",
                              "--json", "--no-log"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            deadline = time.monotonic() + 90
            assert p.stderr is not None
            for line in p.stderr:  # models loaded, mic open
                assert "warning" not in line, line  # no fallback to half-duplex here
                if "Ctrl-C to end" in line:
                    break
                assert time.monotonic() < deadline
            subprocess.run(["paplay", "-d", echo_sink, str(turns["q1"])], check=True, timeout=30)
            assert srv.wait_for(lambda: srv.records and srv.records[0].t_end is not None, 60)
            time.sleep(14)  # the reply plays (~12 s) into the mic; a self-heard echo would make a second turn
        finally:
            p.send_signal(signal.SIGINT)
            rc = p.wait(timeout=15)
        evs = [json.loads(x) for x in (p.stdout.read() if p.stdout else "").splitlines() if x.startswith("{")]
        rest = p.stderr.read()
    assert rc == 130, rest[-800:]
    # one question, one answer (the question's exact words are the ASR's business: "capital of friends" happens)
    assert len(srv.records) == 1 and "capital of" in srv.records[0].body["messages"][-1]["content"].lower()
    print([e for e in evs if e["event"] in ("notice", "barge_in", "turn_start")])
    assert not any(e["event"] == "barge_in" for e in evs), [e for e in evs if e["event"] != "caption"]
    assert not any(r["interrupted"] for r in evs if r["event"] == "turn")
