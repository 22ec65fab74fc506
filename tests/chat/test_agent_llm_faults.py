"""The chat agent with an LLM server that stalls or echoes the key: the turn ends, the user is told, nothing leaks.

Real models (voice, ASR, VAD), a real loopback server (tests/llm/chat_completions_server.py) and the
user's question spoken by our own TTS, fed in real time; only the speaker is virtual.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.cli.test_chat import turns  # noqa: F401 - fixture: the user's question as speech
from tests.llm.chat_completions_server import ChatServer, Script
from voxcli.chat.turnlog import TurnRecord
from voxcli.events import Notice

KEY = "sk-agent-test-ECHOED-5e1f0a"
ENV = "VOX_AGENT_TEST_KEY"
BLOCK = 512


def _converse(url: str, question: Path, **llm_options: Any) -> tuple[list[Any], Any, float]:
    """One spoken question through a real Agent; (events, agent, seconds from end of speech to turn end)."""
    from voxcli.audio.files import read_audio
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    models = open_chat_models(url=url, **llm_options)
    seen: list[Any] = []
    speaker = VirtualSpeaker(models.voice.sample_rate, keep=False)
    agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream, speaker, AgentConfig(),
                  on_event=seen.append)
    audio, _ = read_audio(question, 16000)
    agent.start()
    try:
        for block in np.array_split(audio, max(1, audio.size // BLOCK)):
            agent.feed(block)
            time.sleep(block.size / 16000)
        t_spoken = time.monotonic()
        silence = np.zeros(BLOCK, np.float32)
        while not agent.records and time.monotonic() - t_spoken < 60:
            agent.feed(silence)  # the mic keeps hearing the room while the assistant answers
            time.sleep(BLOCK / 16000)
        took = time.monotonic() - t_spoken
    finally:
        agent.close()
        models.llm.close()
    assert agent.error is None, agent.error
    return seen, agent, took


def test_a_stalled_server_ends_the_turn_with_a_notice_after_the_progress_timeout(turns, real_cache):  # noqa: F811
    script = Script(replies=["Paris is the capital of France."], stall_after=3, stall_mode="comments")
    with ChatServer(script) as srv:
        seen, agent, took = _converse(srv.url, turns["q1"], progress_timeout=1.0)
    rec = next(e for e in seen if isinstance(e, TurnRecord))
    notices = [e for e in seen if isinstance(e, Notice) and e.kind == "cut_off"]
    assert rec.cut_off and rec.assistant.startswith("Paris is the")
    assert notices and "no new text for 1 s" in notices[0].message
    assert rec.llm_metrics["stalled"] == 1.0
    assert took < 30  # before: the turn never ended (keep-alive comments reset the read timeout)


def test_a_key_echoed_in_the_answer_is_masked_in_history_events_and_turn_log(turns, real_cache, monkeypatch,  # noqa: F811
                                                                               isolated_env):
    monkeypatch.setenv(ENV, KEY)
    script = Script(replies=["Paris. Your request said"], echo_header="Authorization")
    with ChatServer(script) as srv:
        seen, agent, _ = _converse(srv.url, turns["q1"], api_key_env=ENV)
    rec = next(e for e in seen if isinstance(e, TurnRecord))
    assert "Bearer <redacted>" in rec.assistant
    log = (isolated_env / "data" / "turns.jsonl").read_text()
    everything = json.dumps(agent.history.messages) + log + repr(seen)
    assert KEY not in everything and "<redacted>" in log
