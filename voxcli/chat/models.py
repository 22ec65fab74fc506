"""The four models of a conversation, loaded with a thread budget that fits the cores.

Why a budget: in `chat` the LLM writes while the voice speaks the previous
clause and the mic keeps feeding the VAD (and the ASR, for barge-in). Each
onnxruntime session left to its defaults sizes its own pool to the whole
machine, so on 2 cores four pools of 2 fight over the same cores and every
stage gets slower than it would be alone. `thread_budget` gives each model
its share instead (the session policy in `voxcli.runtimes.onnx` turns
spinning off, so a pool that is idle costs nothing).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from typing import Any, Final

from voxcli.config import DEFAULT_ENDPOINT_MS

@dataclass(frozen=True)
class ThreadBudget:
    """Intra-op threads per model of a conversation."""

    tts: int
    """The voice: runs while the LLM writes, so it shares the cores with it."""
    asr: int
    """Speech recognition: mostly while the user speaks (the LLM and voice idle), also during replies for barge-in."""
    llm: int
    """The on-device LLM (0 when a server answers)."""
    vad: int = 1
    """Silero on 32 ms frames: a pool gains nothing, always 1."""


MAX_THREADS: Final[int] = 4
"""No model gains much beyond 4 intra-op threads at these sizes."""


def thread_budget(cores: int | None = None, *, local_llm: bool = True) -> ThreadBudget:
    """Split `cores` (default: os.cpu_count()) among the models of `chat`.

    The LLM and the voice run at the same time, so they split the cores between
    them (the LLM gets the smaller half: it is fed one token per run, the vocoder
    blocks of ~64 frames); the ASR runs mostly while those two are idle and gets
    half; the VAD gets one. Every share is at least 1 and at most MAX_THREADS.
    """
    n = max(1, cores if cores is not None else (os.cpu_count() or 1))

    def share(k: int) -> int:
        return max(1, min(MAX_THREADS, k))

    llm = share(n // 2) if local_llm else 0
    return ThreadBudget(tts=share(n - llm), asr=share(n // 2), llm=llm)


@dataclass
class ChatModels:
    """What `voxcli.chat.agent.Agent` talks with, loaded by `open_chat_models`."""

    llm: Any
    """An `LLMClient` (voxcli.llm.base)."""
    voice: Any
    """A `voxcli.tts.streamer.Voice`; `voice.open_stream` is the agent's TTS factory."""
    asr: Any
    """A started `voxcli.asr.streamer.ASRStreamer`."""
    vad: Any
    """The one VAD of the conversation (`voxcli.chat.shared_vad.SharedVAD`): the streamer scores each frame
    once and the agent listens to the same scores (barge-in and turn timing)."""
    budget: ThreadBudget
    turn_detector: Any = None
    """`voxcli.chat.turn_detector.TurnDetector` with `endpoint="semantic"`, else None (VAD hold only)."""

    @property
    def reply_first_words(self) -> int:
        """Words in the first TTS chunk of a reply: `LOCAL_FIRST_WORDS` with the on-device LLM, else the
        chunker's default."""
        from voxcli.tts.chunker import ChunkerConfig

        return LOCAL_FIRST_WORDS if self.budget.llm else ChunkerConfig().first_words

    def open_reply_stream(self, *, max_buffer_flush_ms: float | None = None) -> Any:
        """The agent's TTS factory: a stream on the voice whose first chunk is `reply_first_words` long.

        With the on-device LLM the agent's `send` waits (and with it the LLM) past the pace of
        `voxcli.chat.pacing` (first sentence flat out, then 3x the speech), and once `LOCAL_LEAD_CHARS`
        wait to be synthesized."""
        from voxcli.tts.chunker import ChunkerConfig
        from voxcli.tts.streamer import StreamerConfig

        cfg = StreamerConfig(chunker=ChunkerConfig(first_words=self.reply_first_words))
        if not self.budget.llm:
            return self.voice.open_stream(cfg, max_buffer_flush_ms=max_buffer_flush_ms)
        from voxcli.chat.pacing import PacedReplyStream

        cfg = replace(cfg, max_pending_chars=LOCAL_LEAD_CHARS)
        return PacedReplyStream(self.voice.open_stream(cfg, max_buffer_flush_ms=max_buffer_flush_ms))


LOCAL_FIRST_WORDS: Final = 2
"""The first TTS chunk of a reply written by the on-device LLM (the chunker's default is 4). Each word
of the first chunk is LLM time before the voice can start: SmolLM2 writes ~20-25 ms a token on the
shared 2 cores, and a word is complete only when the next token begins, so 4 words cost ~4 tokens
after the first. Measured (benchmarks/bench_turn.py --endpoint semantic, first token -> first audio
p50, one interleaved run, load 13-15): 4 words 470 ms, 3 words 410, 2 words 317. A clause or a
sentence that ends sooner still cuts sooner ("Yes, " / "Paris. ")."""


LOCAL_LEAD_CHARS: Final = 240
"""Text the on-device LLM may have waiting to be synthesized before the reply's TTS stream pushes back
(beyond the sentences the stream has already synthesized and queued: ~40 s of speech ahead in all,
measured). It bounds how far a long reply runs ahead; `voxcli.chat.pacing` keeps the LLM at 3x the
speech until then. 240 is above the chunker's `long_chars` (160), so a long sentence still reaches a
clause to cut at."""


HOLD_FROM: Final = "speech"
"""Where chat's streamer counts the endpoint hold from: the last speech sample (`ASRStreamer.hold_from`)."""


def chat_streamer(engine: Any, vad: Any, endpoint_ms: float = DEFAULT_ENDPOINT_MS,
                  hold_from: str = HOLD_FROM, lockstep: bool = False, final_engine: Any = None) -> Any:
    """Chat's ASRStreamer on `engine` and `vad` (the shared one): also what benchmarks replay chat's decode with
    (`lockstep`: theirs, deterministic; chat's own is paced by the microphone)."""
    from voxcli.asr.endpointer import VADConfig
    from voxcli.asr.streamer import ASRStreamer

    return ASRStreamer(engine, vad, vad_config=VADConfig(endpoint_ms=endpoint_ms), hold_from=hold_from,
                       tail_from_speech=hold_from == "speech", lockstep=lockstep, final_model=final_engine)


def _final_engine(name: str, optional: bool, first: str, offline: bool | None, threads: int) -> Any:
    """The second pass's engine (`open_chat_models`' `final_asr`); None when `optional` and it cannot load."""
    from voxcli.asr.models import load_named

    try:
        return load_named(name, offline=offline, threads=threads)
    except Exception as e:  # noqa: BLE001 - a second pass chosen for the user must never stop the chat
        if not optional:
            raise
        logging.getLogger("voxcli").info("finals on %s alone: %s did not load (%s: %s)", first, name,
                                         type(e).__name__, e)
        return None


def open_chat_models(
    *,
    url: str | None = None,
    llm_model: str | None = None,
    voice: str | None = None,
    asr_model: str | None = None,
    final_asr: str | None = None,
    final_optional: bool = False,
    endpoint_ms: float = DEFAULT_ENDPOINT_MS,
    endpoint: str = "vad",
    hold_from: str = HOLD_FROM,
    offline: bool | None = None,
    budget: ThreadBudget | None = None,
    **llm_options: Any,
) -> ChatModels:
    """Load the LLM client (HTTP when `url` is a URL, else on-device), the voice, the ASR and the VAD.

    Each model gets its share of `budget` (default: `thread_budget()` for this machine).
    `endpoint`: "vad" (the turn ends after `endpoint_ms` of silence) or "semantic" (the
    streamer holds the short `HoldPolicy.min_ms` and the SmolLM2 turn detector -- the chat's
    own on-device model when it is local -- lengthens the hold mid-phrase: `voxcli.chat.turn_gate`).
    `hold_from`: where the streamer's hold starts ("speech": the last speech sample; "vad": Silero's
    first silence frame, ~60-150 ms later).
    `final_asr`: a second recognizer for the finals of the utterances (`ASRStreamer.final_model`), e.g.
    moonshine-base-en under the fast tier: the captions keep the fast model's pace, the LLM reads the
    accurate one's words (benchmarks/bench_barge_in.py --arms onset,onset-final). `final_optional` (chosen, not
    configured): one that cannot load is a warning and the first recognizer decodes the finals, as before.
    `llm_options` go to `voxcli.llm.open_llm` as they are (api_key_env, max_tokens,
    first_token_timeout, ...).
    """
    from voxcli.asr.models import chat_asr, load_asr
    from voxcli.chat.shared_vad import SharedVAD
    from voxcli.llm import LOCAL, open_llm
    from voxcli.tts.streamer import load_voice

    from voxcli.chat.turn_gate import ENDPOINT_MODES
    from voxcli.errors import UsageError

    if endpoint not in ENDPOINT_MODES:
        raise UsageError(f"endpoint must be one of {', '.join(ENDPOINT_MODES)}, not {endpoint!r}")
    local = not url or url == LOCAL
    budget = budget or thread_budget(local_llm=local)
    if local:
        llm_options["threads"] = budget.llm
    llm = open_llm(url, llm_model, offline=offline, **llm_options)
    voice_obj = load_voice(voice, offline=offline, threads=budget.tts)
    engine, scorer = load_asr(chat_asr(asr_model), offline=offline, threads=budget.asr)  # unset: the fast tier
    vad = SharedVAD(scorer)  # one Silero pass per frame: the streamer's, shared with the agent
    detector = None
    if endpoint == "semantic":
        from voxcli.chat.turn_detector import load_turn_detector

        detector = load_turn_detector(llm, threads=max(1, budget.llm), offline=offline)
        endpoint_ms = detector.policy.min_ms  # the short hold; the detector lengthens it mid-phrase
    # the hold counts from the last speech sample (not Silero's later silence frame): the agent times
    # its turns from this streamer's own endpoint (UtteranceEdge), so nothing else has to agree with it
    # (and so does the final's end pad: the speculative final, and the reply started on it, come sooner)
    final = _final_engine(final_asr, final_optional, chat_asr(asr_model), offline, budget.asr) if final_asr else None
    asr = chat_streamer(engine, vad, endpoint_ms, hold_from, final_engine=final)
    return ChatModels(llm=llm, voice=voice_obj, asr=asr, vad=vad, budget=budget, turn_detector=detector)
