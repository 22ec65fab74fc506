"""Issue 13, item 7: one Silero pass per frame in chat (the agent listens to the streamer's pass).

Before: the agent scored every frame with its own SileroVAD and the ASR streamer again with
another: two model runs per 32 ms frame.
"""
from __future__ import annotations

import time

import numpy as np

from tests.cli.test_chat import turns  # noqa: F401 - fixture: the user's question as speech
from tests.llm.chat_completions_server import ChatServer, Script
from voxcli.chat.shared_vad import SharedVAD
from voxcli.chat.turnlog import TurnRecord

BLOCK = 512


def test_listeners_get_exactly_the_scores_the_streamer_gets(real_cache):
    from voxcli.runtimes.silero_vad import SileroVAD

    heard: list[float] = []
    shared = SharedVAD(SileroVAD.resolve())
    shared.listen(lambda p: heard.extend(map(float, p)))
    rng = np.random.default_rng(0)
    got = np.concatenate([shared.probs(rng.normal(0, 0.1, n).astype(np.float32)) for n in (300, 512, 1000, 77)])
    assert got.size == (300 + 512 + 1000 + 77) // 512 == shared.passes
    assert heard == [float(x) for x in got]


def test_a_failing_listener_never_breaks_the_streamer(real_cache):
    from voxcli.runtimes.silero_vad import SileroVAD

    errors: list[BaseException] = []
    shared = SharedVAD(SileroVAD.resolve(), on_error=errors.append)
    shared.listen(lambda p: 1 / 0)
    assert shared.probs(np.zeros(1024, np.float32)).size == 2
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)


def test_chat_scores_each_frame_once_and_still_times_the_turn(turns, real_cache):  # noqa: F811
    from voxcli.audio.files import read_audio
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    with ChatServer(Script(replies=["Paris."])) as srv:
        models = open_chat_models(url=srv.url)
        assert isinstance(models.vad, SharedVAD) and models.asr.vad is models.vad
        seen: list[object] = []
        speaker = VirtualSpeaker(models.voice.sample_rate, keep=False)
        agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream, speaker,
                      AgentConfig(log_turns=False), on_event=seen.append).start()
        audio, _ = read_audio(turns["q1"], 16000)
        fed = 0
        try:
            for block in np.array_split(audio, max(1, audio.size // BLOCK)):
                agent.feed(block)
                fed += block.size
                time.sleep(block.size / 16000)
            t_end = time.monotonic()
            silence = np.zeros(BLOCK, np.float32)
            while not agent.turns_done and time.monotonic() - t_end < 60:
                agent.feed(silence)
                fed += BLOCK
                time.sleep(BLOCK / 16000)
            models.asr.finish(10.0)
        finally:
            agent.close()
            models.llm.close()
    assert agent.error is None, agent.error
    assert models.vad.passes == fed // 512  # one pass per frame, not two
    rec = next(e for e in seen if isinstance(e, TurnRecord))
    assert rec.speech_end_ms == 0.0
    hold = models.asr.vad_config.endpoint_ms
    assert hold <= rec.endpoint_ms <= hold + 400  # the agent's stamps come from the shared pass
