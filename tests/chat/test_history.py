"""Issue 18: an endless chat keeps a bounded conversation (history, records, and so the LLM's KV cache).

Before: `Agent.history` kept every message forever; with the on-device model every kept token
also stayed resident in the KV cache (`chat --input` without -o grew ~1.7 MB/min).
"""
from __future__ import annotations

import time

from tests.llm.chat_completions_server import ChatServer, Script
from voxcli.chat.history import DEFAULT_MAX_CHARS, History, budget_for


def test_history_is_cut_oldest_first_in_steps_and_never_starts_with_a_reply():
    h = History(max_chars=100)
    for k in range(40):
        h.append("user", f"question {k:02d} " + "x" * 10)  # 22 chars
        h.append("assistant", f"answer {k:02d}")  # 9 chars
        assert h.chars <= 100 and h.chars == sum(len(m["content"]) for m in h.messages)
        assert h.messages[0]["role"] == "user"
    assert h.messages[-1]["content"] == "answer 39"
    assert h.dropped + len(h) == 80


def test_a_cut_leaves_half_the_budget_so_the_prompt_start_stays_stable_between_cuts():
    """KV-cache reuse: the first kept message changes only at a cut, not every turn."""
    h = History(max_chars=200)
    firsts = []
    for k in range(60):
        h.append("user", f"u{k:03d}" + "y" * 16)  # 20 chars
        h.append("assistant", "z" * 20)
        firsts.append(h.messages[0]["content"])
    changes = sum(a != b for a, b in zip(firsts, firsts[1:]))
    assert 5 <= changes <= 60 // 2  # a cut every few turns, not one per turn


def test_the_newest_message_stays_even_when_alone_over_budget():
    h = History(max_chars=10)
    h.append("user", "a" * 50)
    assert [m["content"] for m in h.messages] == ["a" * 50]


def test_budget_is_sized_to_the_on_device_context_else_a_server_default():
    class _Cfg:
        context_window = 2048

    class _Local:
        config = _Cfg()

    assert budget_for(_Local()) == 2048
    assert budget_for(object()) == DEFAULT_MAX_CHARS


def test_an_endless_conversation_sends_a_bounded_prompt(real_cache):
    """30 long turns through a real Agent (real voice, ASR, VAD; loopback LLM server):
    the messages sent, the history and the records stay bounded; every turn is counted."""
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    with ChatServer(Script(replies=["Okay."])) as srv:
        models = open_chat_models(url=srv.url)
        speaker = VirtualSpeaker(models.voice.sample_rate, keep=False, max_ahead_s=5.0)
        agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream, speaker,
                      AgentConfig(log_turns=False, max_history_chars=3000)).start()
        try:
            for k in range(30):
                agent.submit(f"Turn {k}: " + "tell me more about that " * 20)  # ~490 chars
                deadline = time.monotonic() + 30
                while agent.turns_done <= k and agent.error is None and time.monotonic() < deadline:
                    time.sleep(0.01)
        finally:
            agent.close()
            models.llm.close()
        assert agent.error is None, agent.error
        sizes = [sum(len(m["content"]) for m in r.body["messages"]) for r in srv.records]
    assert agent.turns_done == 30 and len(sizes) == 30
    assert max(sizes) <= 3000 + 600  # the budget, plus the newest turn over it
    assert sizes[-1] < sizes[5] * 2  # it stopped growing
    assert agent.history.chars <= 3000 and agent.history.dropped > 0
    assert agent.history.messages[-1] == {"role": "assistant", "content": "Okay."}
