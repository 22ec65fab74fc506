"""Issue 13: the chat's turns are timed by the ASR streamer's own endpoint (`UtteranceEdge`), not by a
second endpointer matched by time, so the streamer may count its hold from the last speech sample.

Real voice (whole synthesis, noise scales 0: the same audio every run), ASR and VAD; a loopback LLM server.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from tests.llm.chat_completions_server import ChatServer, Script
from voxcli.chat.turnlog import TurnRecord
from voxcli.events import Caption, SpeculationEnd, SpeculativeFinal, UtteranceEdge

SR = 16000
BLOCK = 512
QUESTIONS = ("What is the capital of France?", "How many legs does a spider have?")


@pytest.fixture(scope="module")
def spoken(voice_bundle) -> list[np.ndarray]:
    from voxcli.audio.pcm import resample

    engine = joe_engine(voice_bundle, deterministic=True)  # whole synthesis, noise scales 0
    return [resample(engine.synthesize(q), engine.sample_rate, SR).astype(np.float32) for q in QUESTIONS]


def _answer(messages: list[dict]) -> str:
    last = messages[-1]["content"].lower()
    return "Paris." if "france" in last else ("Eight." if "spider" in last else "Pardon?")


def _feed(agent, audio: np.ndarray) -> None:
    noise = np.random.default_rng(0).normal(0, 0.002, audio.size).astype(np.float32)  # a quiet room
    for block in np.array_split(audio + noise, max(1, audio.size // BLOCK)):
        agent.feed(block)
        time.sleep(block.size / SR)


def _wait_turn(agent, n: int, timeout: float = 60.0) -> None:
    """Silence until `n` turns are done and the reply has played (the next question is not an overlap)."""
    t0 = time.monotonic()
    while (agent.turns_done < n or agent.speaking) and time.monotonic() - t0 < timeout:
        _feed(agent, np.zeros(BLOCK, np.float32))


def test_turns_are_matched_and_stamped_by_the_streamers_utterance_edges(spoken, real_cache) -> None:
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models

    with ChatServer(Script(reply_fn=_answer)) as srv:
        models = open_chat_models(url=srv.url)
        assert models.asr.hold_from == "speech"  # the chat default: the hold counts from the last speech sample
        edges: list[UtteranceEdge] = []
        models.asr.subscribe(lambda e: edges.append(e) if isinstance(e, UtteranceEdge) else None)
        seen: list[object] = []
        agent = Agent(models.llm, models.asr, models.vad, models.voice.open_stream,
                      VirtualSpeaker(models.voice.sample_rate, keep=False), AgentConfig(log_turns=False),
                      on_event=seen.append).start()
        try:
            _feed(agent, np.zeros(int(0.3 * SR), np.float32))
            for i, q in enumerate(spoken, 1):
                _feed(agent, q)
                _wait_turn(agent, i)
        finally:
            agent.close()
            models.llm.close()
    assert agent.error is None, agent.error
    recs = [e for e in seen if isinstance(e, TurnRecord)]
    finals = [e for e in seen if isinstance(e, Caption) and e.is_final and e.stable]
    assert len(recs) == len(finals) == 2
    # matched by number: each turn is its own question, answered for it
    assert [r.user for r in recs] == [f.stable for f in finals]
    assert "france" in recs[0].user.lower() and recs[0].assistant == "Paris."
    assert "spider" in recs[1].user.lower() and recs[1].assistant == "Eight."
    ends = [e for e in edges if e.kind == "end"]
    assert [e.utterance for e in ends] == [f.utterance for f in finals]
    hold = models.asr.vad_config.endpoint_ms
    for e, r in zip(ends, recs):
        # the streamer's end: the hold counted from the last speech sample, before Silero's silence frame
        assert e.speech_end is not None and e.speech_end <= e.sample
        # the agent's origin is that last speech sample, its endpoint the streamer's (never before the hold)
        assert r.speech_end_ms == 0.0 and r.endpoint_ms is not None and r.endpoint_ms >= hold - 1
    assert not agent._utts  # every utterance found its final by number


def _edges_lockstep(asr_bundle, vad_bundle, audio: np.ndarray, block: int = 512, speculation: bool = False, **kw
                    ) -> tuple[list, list[Caption]]:
    """The streamer alone (lockstep unless told: deterministic), fed in `block`s: its edges and final captions."""
    import threading

    from voxcli.asr.streamer import ASRStreamer
    from voxcli.runtimes.moonshine import MoonshineASR
    from voxcli.runtimes.silero_vad import SileroVAD

    s = ASRStreamer(MoonshineASR.load(asr_bundle.path), SileroVAD.load(vad_bundle.file("silero_vad.onnx")),
                    **{"lockstep": True, **kw})
    edges: list = []  # UtteranceEdge, and the speculation events when asked for
    kinds = (UtteranceEdge, SpeculativeFinal, SpeculationEnd) if speculation else (UtteranceEdge,)
    s.subscribe(lambda e: edges.append(e) if isinstance(e, kinds) else None)
    finals: list[Caption] = []
    reader = threading.Thread(target=lambda: finals.extend(c for c in s.captions if c.is_final))
    reader.start()
    for i in range(0, audio.size, block):
        s.send(audio[i : i + block])
    s.finish(60)
    reader.join(10)
    return edges, finals


def test_a_short_hold_counts_from_the_last_speech_sample(spoken, asr_bundle, vad_bundle) -> None:
    """The semantic endpoint's 200 ms hold (shorter than the 200 ms end pad a speculative decode waits for):
    with hold_from="speech" it still counts from the last speech sample, so the utterance ends ~Silero's
    decay earlier than when counted from the VAD's first silence frame."""
    from voxcli.asr.endpointer import VADConfig

    a = spoken[0]
    true_end = (int(np.nonzero(np.abs(a) > 0.01)[0][-1]) + 1) / SR
    lead = 0.5
    x = np.concatenate([np.zeros(int(lead * SR), np.float32), a, np.zeros(int(1.2 * SR), np.float32)])
    x = x + np.random.default_rng(0).normal(0, 0.002, x.size).astype(np.float32)  # a quiet room
    got = {}
    for hold_from in ("vad", "speech"):
        edges, finals = _edges_lockstep(asr_bundle, vad_bundle, x, vad_config=VADConfig(endpoint_ms=200),
                                        hold_from=hold_from)
        end = next(e for e in edges if e.kind == "end")
        assert len(finals) == 1 and "france" in finals[0].stable.lower()
        assert finals[0].utterance == end.utterance
        assert abs(end.speech_end - (lead + true_end)) <= 0.03  # the edge carries the last speech sample
        got[hold_from] = finals[0].t_audio  # the audio heard when the endpoint was decided
    assert got["vad"] - got["speech"] >= 0.03  # Silero's decay is no longer in the hold
    assert got["speech"] - (lead + true_end) <= 0.2 + 0.07  # hold + about two frames


def test_a_short_holds_final_does_not_depend_on_how_the_audio_arrives(spoken, asr_bundle, vad_bundle) -> None:
    """The endpoint of a hold shorter than the end pad falls mid-chunk: the final decodes the audio the VAD
    had scored at the endpoint (a function of the audio), not whatever the worker's chunk held. A law: the
    same final text from lockstep steps and from unpaced input taken in chunks of any size."""
    from voxcli.asr.endpointer import VADConfig

    x = np.concatenate([np.zeros(8000, np.float32), spoken[1], np.zeros(int(1.2 * SR), np.float32)])
    x = x + np.random.default_rng(1).normal(0, 0.002, x.size).astype(np.float32)
    texts = set()
    for kw in ({}, {"lockstep": False, "block": 4000}, {"lockstep": False, "block": 160}):
        _, finals = _edges_lockstep(asr_bundle, vad_bundle, x, vad_config=VADConfig(endpoint_ms=200),
                                    hold_from="speech", **kw)
        assert len(finals) == 1
        texts.add(finals[0].stable)
    assert len(texts) == 1 and "spider" in texts.pop().lower()


def test_chats_final_pad_counts_from_the_speech_so_its_reply_starts_sooner(spoken, asr_bundle, vad_bundle) -> None:
    """`tail_from_speech` (chat's streamer): the speculative final's end pad counts from the last speech
    sample, not from the VAD's silence onset ~100 ms later, so the final -- and the reply started on it --
    exists sooner; it is still confirmed without decoding again (the same span at the endpoint)."""
    from voxcli.asr.endpointer import VADConfig

    x = np.concatenate([np.zeros(8000, np.float32), spoken[0], np.zeros(int(1.2 * SR), np.float32)])
    x = x + np.random.default_rng(2).normal(0, 0.002, x.size).astype(np.float32)
    spec_at = {}
    for tail in (False, True):
        evs, finals = _edges_lockstep(asr_bundle, vad_bundle, x, speculation=True, hold_from="speech",
                                      tail_from_speech=tail, vad_config=VADConfig(endpoint_ms=500))
        specs = [e for e in evs if isinstance(e, SpeculativeFinal)]
        ends = [e for e in evs if isinstance(e, SpeculationEnd)]
        assert len(specs) == len(ends) == 1 and ends[0].outcome == "confirmed"
        assert len(finals) == 1 and finals[0].stable == specs[0].text and "france" in specs[0].text.lower()
        spec_at[tail] = specs[0].t_audio  # the audio heard when the speculative decode was ready
    assert spec_at[False] - spec_at[True] >= 0.03
    with pytest.raises(Exception, match="tail_from_speech"):
        from voxcli.asr.streamer import ASRStreamer

        ASRStreamer(None, None, tail_from_speech=True)  # type: ignore[arg-type]
