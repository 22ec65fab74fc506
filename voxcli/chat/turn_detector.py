"""Semantic end of turn: has the user finished a thought, or paused mid-phrase?

A silence hold alone cannot tell "What is the capital of France" (reply now)
from "I'd like to order a ..." (the user is thinking). Open-source turn
detectors built on SmolLM2-135M read the language model's probability of the
end-of-turn token `<|im_end|>` right after the transcript so far; voxcli
already ships SmolLM2-135M-Instruct on-device, so the detector reuses it.

The score: those detectors fine-tune the model on unpunctuated transcripts;
the stock instruct model we ship puts almost no mass on `<|im_end|>` straight
after an unpunctuated sentence -- it expects the full stop or question mark
first. So the score is P(`<|im_end|>`) plus P(a sentence-ending punctuation
token) after `<|im_start|>user\\n{text}`, with the transcript's own trailing
punctuation stripped (an ASR's guessed full stop must not decide the turn),
and 0 after a filler ("um", "uh": the user is still thinking).
On the labelled set in tests/chat/turn_prefixes.py complete utterances score
0.1-0.9 and mid-phrase prefixes mostly below 0.01.

The hold: `HoldPolicy` maps the score to the silence to wait before replying
-- the short `min_ms` for a complete thought, up to `max_ms` mid-phrase (a
ramp below the threshold, `max_ms` from a quarter of it down). One score costs one prefill of ~15 tokens:
about 45 ms on one core (measured, see benchmarks/bench_turn.py), well within
the shortest hold; a streamer's speculative final (decoded during the hold)
is scored ahead (`TurnGate.prefetch`), so the final finds its score ready.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

END_OF_TURN: Final = "<|im_end|>"
PROMPT: Final = "<|im_start|>user\n"
DEFAULT_THRESHOLD: Final = 0.03
"""Score at or above which the words so far are a complete thought (chosen on the labelled set:
benchmarks/bench_turn.py --detector; 0.03 kept every mid-phrase prefix below it)."""
FILLERS: Final = frozenset({"um", "uh", "er", "erm", "hmm", "mm", "ah", "eh"})
"""A transcript ending in a filler is a user still thinking: score 0 (the stock model scores
"So, uh" like a finished sentence)."""
SEMANTIC_MIN_HOLD_MS: Final = 200.0
"""Hold after a complete thought (the ASR streamer's own hold in semantic mode)."""
SEMANTIC_MAX_HOLD_MS: Final = 1200.0
"""Hold after a clearly unfinished phrase."""
SCORES_KEPT: Final = 16
"""Recent scores remembered: the final transcript usually repeats the last caption scored during the hold."""
_END_PUNCT = re.compile(r"^[.?!]+\s*$")
_TRAILING = re.compile(r"[\s.?!,;:…-]+$")


def normalize(text: str) -> str:
    """The transcript as scored: whitespace collapsed, trailing punctuation removed."""
    return _TRAILING.sub("", " ".join(text.split()))


@dataclass(frozen=True)
class HoldPolicy:
    """Score -> hold: `min_ms` at or above `threshold`, `max_ms` at or below a quarter of it, linear between.

    (A plain ramp down to 0 gave "I'd like to order a" -- score 0.003 -- only 1.1 s.)"""

    threshold: float = DEFAULT_THRESHOLD
    min_ms: float = SEMANTIC_MIN_HOLD_MS
    max_ms: float = SEMANTIC_MAX_HOLD_MS

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1 or not 0 <= self.min_ms <= self.max_ms:
            raise ValueError("need 0 < threshold <= 1 and 0 <= min_ms <= max_ms")

    def hold_ms(self, score: float) -> float:
        if score >= self.threshold:
            return self.min_ms
        floor = self.threshold / 4
        f = min(max((score - floor) / (self.threshold - floor), 0.0), 1.0)
        return self.max_ms - (self.max_ms - self.min_ms) * f


class TurnDetector:
    """`score(text)`: how likely the user's turn ends after `text` (see the module docstring).

    `engine` is a `voxcli.runtimes.smollm.local.LocalLLM` (shared with the chat's
    on-device LLM when there is one: each score uses a private KV cache, so it can
    run while a reply is generated).
    """

    def __init__(self, engine: Any, policy: HoldPolicy | None = None) -> None:
        self.engine = engine
        self.policy = policy or HoldPolicy()
        tok = engine.tokenizer
        self._encode = tok.encode
        self._eot = int(tok.im_end_id)
        self._prompt = list(self._encode(PROMPT))
        self._ends: np.ndarray | None = None
        self._lock = threading.Lock()
        self._scores: OrderedDict[str, float] = OrderedDict()

    def _end_ids(self, vocab: int) -> np.ndarray:
        with self._lock:
            if self._ends is None:
                dec = self.engine.tokenizer.decode
                self._ends = np.array([i for i in range(vocab) if _END_PUNCT.match(dec([i]) or "")], dtype=np.int64)
            return self._ends

    def score(self, text: str) -> float:
        """P(end of turn) + P(end punctuation) after the normalized transcript; 0.0 for no words."""
        words = normalize(text)
        if not words or words.rsplit(None, 1)[-1].lower().strip(",") in FILLERS:
            return 0.0
        with self._lock:
            if words in self._scores:
                return self._scores[words]
        logits = self.engine.logits_for(self._prompt + list(self._encode(words)))[0].astype(np.float64)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        score = float(min(1.0, p[self._eot] + p[self._end_ids(p.size)].sum()))
        with self._lock:
            self._scores[words] = score
            while len(self._scores) > SCORES_KEPT:
                self._scores.popitem(last=False)
        return score

    def complete(self, text: str) -> bool:
        return self.score(text) >= self.policy.threshold

    def hold_ms(self, text: str) -> float:
        """The silence to wait after `text` before the reply may start."""
        return self.policy.hold_ms(self.score(text))


def load_turn_detector(llm: Any = None, *, threads: int = 1, offline: bool | None = None,
                       policy: HoldPolicy | None = None) -> TurnDetector:
    """A detector on the chat's own on-device model (`llm.engine`), else on a freshly loaded SmolLM2."""
    engine = getattr(llm, "engine", None)
    if engine is None or not hasattr(engine, "logits_for"):
        from voxcli.llm.local import LocalLLMConfig, load_local_llm

        engine = load_local_llm(config=LocalLLMConfig(threads=threads), offline=offline).engine
    detector = TurnDetector(engine, policy)
    detector.score("Hello there")  # warm up: the end-punctuation table and the session, not in a live turn
    return detector
