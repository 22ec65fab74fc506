"""Issue 13, item 2: the reply starts on the speculative final during the hold; nothing plays before the
endpoint; a pause mid-question cancels the early reply cleanly and is counted.

Real voice, ASR, VAD; a loopback LLM server that answers differently when it gets only part of the question.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from tests.llm.chat_completions_server import ChatServer, Script
from voxcli.chat.turnlog import TurnRecord

BLOCK = 512


def _answer(messages: list[dict]) -> str:
    last = messages[-1]["content"].lower()
    if "pizza" in last:
        return "One large pizza, coming up."
    return "Paris is the capital." if "france" in last else "Wrong early reply."


@pytest.fixture(scope="module")
def spoken(voice_bundle) -> dict[str, np.ndarray]:
    from voxcli.audio.pcm import resample

    engine = joe_engine(voice_bundle, deterministic=True)  # whole synthesis, noise scales 0: the same audio every run

    def say(text: str) -> np.ndarray:
        return resample(engine.synthesize(text), engine.sample_rate, 16000).astype(np.float32)

    gap = np.zeros(int(0.3 * 16000), np.float32)  # ~370 ms of VAD silence: past onset + pad + decode, short of the hold
    think = np.zeros(int(0.7 * 16000), np.float32)  # past the semantic short hold, short of its long one
    return {"whole": say("What is the capital of France?"),
            "paused": np.concatenate([say("What is the capital"), gap, say("of France?")]),
            "order": np.concatenate([say("I'd like to order a"), think, say("large pizza, please.")])}


def _talk(audio: np.ndarray, endpoint: str = "vad", **config) -> tuple[list[object], object, ChatServer]:
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    with ChatServer(Script(reply_fn=_answer)) as srv:
        models = open_chat_models(url=srv.url, endpoint=endpoint)
        seen: list[object] = []
        speaker = VirtualSpeaker(models.voice.sample_rate, keep=False)
        agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream, speaker,
                      AgentConfig(log_turns=False, **config), on_event=seen.append,
                      turn_detector=models.turn_detector).start()
        try:
            lead = np.zeros(int(0.3 * 16000), np.float32)
            for block in np.array_split(np.concatenate([lead, audio]), max(1, (audio.size + lead.size) // BLOCK)):
                agent.feed(block)
                time.sleep(block.size / 16000)
            t_end = time.monotonic()
            while not agent.turns_done and time.monotonic() - t_end < 60:
                agent.feed(np.zeros(BLOCK, np.float32))
                time.sleep(BLOCK / 16000)
        finally:
            agent.close()
            models.llm.close()
        assert agent.error is None, agent.error
        return seen, agent, srv


def test_the_reply_is_asked_during_the_hold_and_heard_only_after_the_endpoint(spoken, real_cache):
    seen, agent, srv = _talk(spoken["whole"])
    rec = next(e for e in seen if isinstance(e, TurnRecord))
    assert rec.preemptive and rec.assistant == "Paris is the capital."
    assert rec.llm_request_ms < rec.endpoint_ms  # the LLM worked during the hold ...
    assert rec.endpoint_ms <= rec.first_audio_ms  # ... and nothing played before the endpoint
    assert len(srv.records) == 1 and agent.wasted_preemptive == 0


def test_a_pause_mid_question_cancels_the_early_reply_and_counts_it(spoken, real_cache):
    seen, agent, srv = _talk(spoken["paused"])
    recs = [e for e in seen if isinstance(e, TurnRecord)]
    assert len(recs) == 1 and "france" in recs[0].user.lower() and "capital" in recs[0].user.lower()
    assert recs[0].assistant == "Paris is the capital."  # the early answer was never heard
    assert "Wrong" not in repr(agent.history.messages)
    assert agent.wasted_preemptive == recs[0].wasted_preemptive == 1
    assert len(srv.records) == 2 and "france" not in srv.records[0].body["messages"][-1]["content"].lower()
    assert srv.wait_for(lambda: srv.records[0].client_gone or srv.records[0].t_end is not None, 5)


def test_no_preemption_when_turned_off(spoken, real_cache):
    seen, agent, srv = _talk(spoken["whole"], preemptive=False)
    rec = next(e for e in seen if isinstance(e, TurnRecord))
    assert not rec.preemptive and rec.asr_final_ms <= rec.llm_request_ms


def test_semantic_waits_out_a_pause_mid_phrase_and_never_plays_the_early_reply(spoken, real_cache):
    """--endpoint semantic: "I'd like to order a" ... 0.7 s ... "large pizza, please." is one turn; the reply
    started on the first part while the detector scored it is cancelled unheard and counted."""
    seen, agent, srv = _talk(spoken["order"], endpoint="semantic")
    recs = [e for e in seen if isinstance(e, TurnRecord)]
    assert len(recs) == 1 and "order" in recs[0].user.lower() and "pizza" in recs[0].user.lower()
    assert recs[0].assistant == "One large pizza, coming up." and not recs[0].interrupted
    assert "Wrong" not in repr(agent.history.messages)
    assert agent._gate.joined == 1
    assert len(srv.records) == 1 + agent.wasted_preemptive and agent.wasted_preemptive <= 1
