"""The seed's instrument: five knobs that derive the ledger's terms.

The Streaming Speech lesson (Chapter 6, "The Latency Ledger") drives its
ledger with the knobs of the earlier chapters, not with raw milliseconds:

- ASR chunk size (Chapter 2). A chunk of C frames of 10 ms is also the update
  interval; the last chunk has to fill before it is encoded.
- Agreement n (Chapter 4, LocalAgreement-n). Each hypothesis beyond the first
  that must agree costs one update interval: "stability is bought with
  delay, at an exchange rate of one update interval per unit of agreement".
- TTS first chunk in words (Chapter 5): the first audio needs the whole first
  chunk synthesized.
- Endpoint hold: the silence timer.
- Network profile: uplink, downlink and the hops between services (the
  seed's default, webrtc and telephony, plus `device` for voxcli on-device).

The seed prints the terms and the outcomes, not its formula. The formula here
is the simplest one that reproduces every number it quotes:

    ASR tail        = chunk + (n - 1) x chunk + 70 ms compute (encode + decode the last chunk)
    TTS first audio = 60 ms per-call overhead + words x 400 ms (150 wpm) x RTF 0.1
    total           = uplink + max(endpoint hold, ASR tail) + hops + 375 ms LLM first token
                      + TTS first audio + downlink

Defaults (14-frame chunk, n = 2, 1 word, 250 ms hold, default network) give
the seed's reference turn: 95 + max(250, 350) + 30 + 375 + 100 + 95 = 1,045 ms.
Its four experiments come out as it says (`experiments()`): chunk size stops
mattering once the hold is the max; first chunk 1 -> 12 words adds 440 ms;
n = 3 with a 30-frame chunk is 300 ms of chunk + 600 ms of stability delay and
ends past 1,400 ms; the telephony worst case is past 2.5 s.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from voxcli.bench.ledger import LIMIT_MS, TurnBudget, total_ms

FRAME_MS: Final = 10.0
"""One encoder frame: the seed's "30-frame chunk" is 300 ms of audio."""


@dataclass(frozen=True)
class Network:
    """Transport terms of one network profile (ms, one way each)."""

    uplink_ms: float
    downlink_ms: float
    hops_ms: float
    source: str


NETWORKS: Final = {
    "default": Network(95, 95, 30, (
        "The seed's reference turn: 95 ms each way (20 ms capture/Opus frame + ~40 ms network + "
        "~35 ms jitter buffer), 30 ms of in-datacenter hops between ASR, LLM and TTS.")),
    "webrtc": Network(50, 70, 30, (
        "WebRTC transport: uplink 50 ms (20 ms Opus frame + ~10 ms encode/packetize + ~20 ms regional "
        "network), downlink 70 ms (~20 ms network + ~40 ms adaptive jitter buffer + ~10 ms playout).")),
    "telephony": Network(190, 190, 60, (
        "A phone call: 190 ms each way (the seed's 110 ms one-way network leg + 20 ms codec frame + "
        "60 ms fixed jitter buffer at the gateway), 60 ms of hops (the SIP gateway/media server "
        "adds a bridge). Assumed typical figures, not measured here.")),
    "device": Network(32, 0, 0, (
        "On-device, as `voxcli chat` runs (the network `ledger --measured` uses unless told otherwise): "
        "uplink 32 ms, one 512-sample microphone block at 16 kHz; no hops; downlink 0, the first audio "
        "handed to the sound device, as chat's turn log stamps it (the device's output buffer is not counted).")),
}


@dataclass(frozen=True)
class Constants:
    """The instrument's fixed numbers: what the knobs do not move."""

    asr_compute_ms: float = 70.0
    """Encode + decode of the last chunk (350 ms tail at the defaults = 140 + 140 + 70)."""
    llm_ttft_ms: float = 375.0
    """Request to the first token of a hosted LLM."""
    tts_overhead_ms: float = 60.0
    """Fixed cost per synthesis call (Chapter 5's 60 ms)."""
    tts_rtf: float = 0.1
    """Synthesis seconds per audio second (40 ms per word at 150 wpm: 1 -> 12 words = +440 ms)."""
    wpm: float = 150.0
    """Speaking rate (Chapter 5: 2.5 words per second, 400 ms per word)."""


CONSTANTS: Final = Constants()


@dataclass(frozen=True)
class Knobs:
    """The five knobs of the seed's instrument."""

    chunk_ms: float = 140.0
    """ASR chunk = update interval, ms (the seed's default 14 frames)."""
    agreement: int = 2
    """LocalAgreement n: hypotheses that must agree before a word is stable."""
    first_chunk_words: int = 1
    """Words in the first TTS chunk."""
    endpoint_ms: float = 250.0
    """Silence hold before the turn is declared over."""
    network: str = "default"
    """default | webrtc | telephony | device."""

    def __post_init__(self) -> None:
        if not (self.chunk_ms > 0) or self.chunk_ms == float("inf"):
            raise ValueError(f"chunk must be a finite number of ms > 0, got {self.chunk_ms!r}")
        if int(self.agreement) != self.agreement or self.agreement < 1:
            raise ValueError(f"agreement must be a whole number >= 1, got {self.agreement!r}")
        if int(self.first_chunk_words) != self.first_chunk_words or self.first_chunk_words < 1:
            raise ValueError(f"first chunk must be a whole number of words >= 1, got {self.first_chunk_words!r}")
        if not (self.endpoint_ms >= 0) or self.endpoint_ms == float("inf"):
            raise ValueError(f"endpoint hold must be a finite number of ms >= 0, got {self.endpoint_ms!r}")
        if self.network not in NETWORKS:
            raise ValueError(f"unknown network {self.network!r} (known: {', '.join(NETWORKS)})")

    def with_(self, **changes: Any) -> "Knobs":
        """A copy with the given knobs replaced (None means keep)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Which terms each knob moves (for the sources column: a term derived from a flag is "flag").
KNOB_TERMS: Final = {
    "chunk_ms": ("asr_tail_ms",),
    "agreement": ("asr_tail_ms",),
    "first_chunk_words": ("tts_first_audio_ms",),
    "endpoint_ms": ("endpoint_ms",),
    "network": ("uplink_ms", "downlink_ms", "hops_ms"),
}


def asr_tail_parts(k: Knobs, c: Constants = CONSTANTS) -> dict[str, float]:
    """The ASR tail split as the seed tells it: chunk + stability delay + compute."""
    return {"chunk_ms": k.chunk_ms, "stability_ms": (k.agreement - 1) * k.chunk_ms, "compute_ms": c.asr_compute_ms}


def tts_first_audio_parts(k: Knobs, c: Constants = CONSTANTS) -> dict[str, float]:
    """TTS first audio: per-call overhead + RTF x the first chunk's audio."""
    audio_ms = k.first_chunk_words * 60_000.0 / c.wpm
    return {"overhead_ms": c.tts_overhead_ms, "synthesis_ms": c.tts_rtf * audio_ms, "audio_ms": audio_ms}


def derive(k: Knobs, c: Constants = CONSTANTS) -> TurnBudget:
    """The seven terms from the knobs (the instrument's formula, see the module docstring)."""
    net = NETWORKS[k.network]
    tts = tts_first_audio_parts(k, c)
    return TurnBudget(
        uplink_ms=net.uplink_ms,
        endpoint_ms=k.endpoint_ms,
        asr_tail_ms=sum(asr_tail_parts(k, c).values()),
        hops_ms=net.hops_ms,
        llm_ttft_ms=c.llm_ttft_ms,
        tts_first_audio_ms=tts["overhead_ms"] + tts["synthesis_ms"],
        downlink_ms=net.downlink_ms,
    )


def turn_ms(k: Knobs, c: Constants = CONSTANTS) -> float:
    """The ledger's total for these knobs."""
    return total_ms(derive(k, c))


PRESETS: Final = {
    "default": Knobs(),
    "webrtc": Knobs(network="webrtc"),
    "telephony": Knobs(chunk_ms=300.0, agreement=3, first_chunk_words=12, endpoint_ms=1200.0, network="telephony"),
}

PRESET_SOURCES: Final = {
    "default": "The seed's reference turn (14-frame chunk, n=2, 1-word first chunk, 250 ms hold, "
               "default network): 1,045 ms.",
    "webrtc": "The default knobs over WebRTC (network webrtc): 975 ms.",
    "telephony": "The seed's telephony worst case: network telephony, a conservative 1,200 ms hold (callers "
                 "pause on noisy lines) and a conservative configuration (n=3, 300 ms chunk, 12-word first "
                 "chunk): 2,555 ms, past 2.5 s with no model changed.",
}


def preset(name: str) -> Knobs:
    """The knobs of that preset; ValueError listing the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})") from None


@dataclass(frozen=True)
class Experiment:
    """One of the seed's four experiments, run on the instrument."""

    name: str
    claim: str
    """What the seed says happens."""
    figures: dict[str, Any]
    holds: bool
    """The claim checked on the figures."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _find_the_max(base: Knobs) -> Experiment:
    chunks = [140.0 - 10.0 * i for i in range(11)]  # 14 -> 4 frames
    at250 = {int(c): turn_ms(base.with_(chunk_ms=c)) for c in chunks}
    at500 = {int(c): turn_ms(base.with_(chunk_ms=c, endpoint_ms=500.0)) for c in chunks}
    bottom = [v for c, v in at250.items() if c <= 90]
    holds = (at250[140] > at250[40] and len(set(bottom)) == 1 and len(set(at500.values())) == 1)
    return Experiment("find the max",
                      "Chunk 14 -> 4 frames: the total stops moving once the ASR tail drops under the 250 ms hold; "
                      "with a 500 ms hold chunk size does nothing at all.",
                      {"total_ms_by_chunk_ms_hold_250": at250, "total_ms_by_chunk_ms_hold_500": at500}, holds)


def _first_chunk(base: Knobs) -> Experiment:
    one, twelve = turn_ms(base.with_(first_chunk_words=1)), turn_ms(base.with_(first_chunk_words=12))
    return Experiment("first chunk", "TTS first chunk 1 -> 12 words: the total climbs by roughly 440 ms.",
                      {"total_ms_1_word": one, "total_ms_12_words": twelve, "added_ms": twelve - one},
                      abs((twelve - one) - 440.0) <= 20.0)


def _stability(base: Knobs) -> Experiment:
    k = base.with_(agreement=3, chunk_ms=300.0)
    parts, total = asr_tail_parts(k), turn_ms(k)
    return Experiment("cost of stability",
                      "Agreement n=3 with a 30-frame chunk: 300 ms of chunk + 600 ms of stability delay, past the "
                      "hold and past the 1,400 ms limit.",
                      {"asr_tail_parts": parts, "asr_tail_ms": sum(parts.values()), "total_ms": total},
                      parts["chunk_ms"] == 300.0 and parts["stability_ms"] == 600.0
                      and sum(parts.values()) > k.endpoint_ms and total > LIMIT_MS)


def _telephony() -> Experiment:
    total = turn_ms(PRESETS["telephony"])
    return Experiment("telephony worst case",
                      "Network telephony, the endpoint hold and a conservative configuration alone push the turn "
                      "past 2.5 s.", {"knobs": PRESETS["telephony"].to_dict(), "total_ms": total}, total > 2500.0)


def experiments(base: Knobs = PRESETS["default"]) -> list[Experiment]:
    """The seed's four experiments on these knobs (the seed starts each from the defaults)."""
    return [_find_the_max(base), _first_chunk(base), _stability(base), _telephony()]
