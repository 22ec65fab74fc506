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


def _speak_into(agent, audio: np.ndarray, wait_s: float) -> None:
    """0.3 s of silence then `audio`, fed in real time like a mic; then silence until a turn is done."""
    lead = np.zeros(int(0.3 * 16000), np.float32)
    for block in np.array_split(np.concatenate([lead, audio]), max(1, (audio.size + lead.size) // BLOCK)):
        agent.feed(block)
        time.sleep(block.size / 16000)
    t_end = time.monotonic()
    while not agent.turns_done and time.monotonic() - t_end < wait_s:
        agent.feed(np.zeros(BLOCK, np.float32))
        time.sleep(BLOCK / 16000)


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
            _speak_into(agent, audio, wait_s=60)
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
    assert rec.detector == {}  # vad mode: no verdict in the turn log


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
    assert set(recs[0].detector) == {"score", "hold_ms", "score_ms", "held"}  # the verdict, in the turn log


def test_the_on_device_llm_is_warmed_up_while_the_user_speaks(spoken, real_cache, monkeypatch):
    """On-device LLM: each partial caption prefills the conversation and the words heard so far, so the
    reply's request reuses that prefix (a first turn's system prompt at least: a cold first turn reuses
    nothing). The reply waits for a warm-up still running, however slow the machine. The warm-up at the
    utterance's start edge always runs: nothing else owns the LLM then, its thread is started under the lock
    (so the reply's wait sees it alive), and the only cuts (lag, the end edge, the wait's limit) are patched."""
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat import preempt
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    monkeypatch.setattr(preempt, "WARM_WAIT_S", 120.0)  # never cancelled by a loaded machine: a law, not a race
    monkeypatch.setattr(preempt, "WARM_MAX_LAG_S", 1e9)  # nor skipped because the streamer lags on one
    monkeypatch.setattr(preempt.PreemptMixin, "_yield_warm_up", lambda self: None)  # nor cut at the endpoint
    models = open_chat_models(url=None, max_tokens=6)
    seen: list[object] = []
    agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream,
                  VirtualSpeaker(models.voice.sample_rate, keep=False), AgentConfig(log_turns=False),
                  on_event=seen.append, turn_detector=models.turn_detector).start()
    try:
        _speak_into(agent, spoken["whole"], wait_s=120)
    finally:
        agent.close()
        models.llm.cancel()  # the on-device client has no close() (no connection): stop what still generates
    assert agent.error is None, agent.error
    rec = next(e for e in seen if isinstance(e, TurnRecord))
    assert agent.warm_ups >= 1 and "france" in rec.user.lower()
    assert rec.llm_metrics["cached_tokens"] >= 20  # the system prompt and the user header, prefilled in the hold


def test_a_warm_up_runs_only_while_the_user_speaks_and_is_cancelled_alone(real_cache, monkeypatch):
    """A partial caption handled after the utterance's end edge (it was queued before it) starts no warm-up:
    the final decode has the cores. A warm-up's thread runs from the moment it is recorded (a reply waiting
    for it cannot see a not-yet-started thread as finished). Cancelling a warm-up stops its own generation,
    not another one of the same engine (a reply's). Edges are given to the agent directly; no timing."""
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat import preempt
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models
    from voxcli.events import UtteranceEdge

    monkeypatch.setattr(preempt, "WARM_MAX_LAG_S", 1e9)  # only silence is fed, but a loaded streamer may lag
    models = open_chat_models(url=None, max_tokens=4)
    engine = models.llm.engine
    agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream,
                  VirtualSpeaker(models.voice.sample_rate, keep=False), AgentConfig(log_turns=False)).start()
    try:
        agent.feed(np.zeros(2 * 16000, np.float32))  # silence: stamps for the edges' samples, no speech
        agent._on_asr_event(UtteranceEdge(kind="start", utterance=0, sample=0.3))
        assert agent.warm_ups == 1 and agent._warm.ident is not None  # started before it was visible
        agent._warm.join(120)
        agent._warm_up_on("What is the")  # in speech: a caption warms up
        assert agent.warm_ups == 2
        agent._warm.join(120)
        agent._on_asr_event(UtteranceEdge(kind="end", utterance=0, sample=1.5, speech_end=1.3))
        agent._warm_up_on("What is the capital")  # queued before the end edge, handled after it
        assert agent.warm_ups == 2
    finally:
        agent.close()
        models.llm.cancel()  # the on-device client has no close() (no connection): stop what still generates
    msgs = [{"role": "user", "content": "Hello"}]
    reply, warm = engine.start(msgs), engine.start(msgs)  # two generations of one engine, both registered
    preempt._cancel_generation(warm)
    assert list(warm) == [] and warm.stats.cancelled and warm.stats.t_first is None
    list(reply)
    assert not reply.stats.cancelled and reply.stats.t_first is not None  # the other one was not touched


def test_a_dropped_speculation_cancels_its_own_generation_alone(real_cache):
    """The reply started on a speculation that is then dropped stops its own on-device generation; another
    generation of the same engine (a warm-up's) goes on -- `llm.cancel()` would have stopped both. The state
    `_drop_speculation` reads is given directly; the generations are iterated after the drop: no timing."""
    import threading

    from voxcli.chat.preempt import PreemptMixin, Speculation
    from voxcli.chat.turn import Reply
    from voxcli.chat.turnlog import TurnClock
    from voxcli.llm.local import LocalLLMConfig, load_local_llm

    class Host(PreemptMixin):
        def __init__(self, llm) -> None:
            self.llm, self._lock, self._spec, self._reply = llm, threading.RLock(), None, None
            self.wasted_preemptive = 0

    class Tts:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    llm = load_local_llm(config=LocalLLMConfig(max_new_tokens=4))
    msgs = [{"role": "user", "content": "Hello"}]
    host = Host(llm)
    warm = llm.engine.start(msgs)  # another generation of the engine, registered like a warm-up's
    spec = Speculation(0, 0, "Hello", TurnClock())
    reply = Reply(turn=0, tts=Tts(), clock=spec.clock, speculation=spec)
    stream = host._reply_stream(reply, msgs)
    assert reply.generation is stream.generation is not None
    host._spec, host._reply = spec, reply
    host._drop_speculation(spec)
    assert spec.dropped and reply.dropped and reply.tts.cancelled and host.wasted_preemptive == 1
    deltas = list(stream)
    assert [d.text for d in deltas if not d.is_final] == [] and deltas[-1].metrics.get("cancelled") == 1.0
    assert list(warm) and not warm.stats.cancelled  # the other generation was not touched
