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
-- `complete_ms` (200 ms, the streamer's own hold) for a complete thought, up
to `max_ms` mid-phrase (a ramp below the threshold, `max_ms` from a quarter of
it down). A shorter tier for a confidently complete thought (score at or above
`confident`, 3.5x the highest mid-phrase score of the labelled set) exists as
a knob (`min_ms` < `complete_ms`) but is off by default: `min_ms` is also the
streamer's hold, and a 120 ms one made the streamer finalise at every pause of
128 ms or more -- never measured on natural speech (a clause said before a
pause would be answered 120 ms into it) and no consistent end-to-end gain.
One score costs one prefill of ~15 tokens: about 45 ms on one core (measured,
see benchmarks/bench_turn.py), well within the shortest hold; a streamer's speculative final (decoded during the hold)
is scored ahead (`TurnGate.prefetch`), so the final finds its score ready.
Scores are shared: a text already being scored (the prefetch of a speculative
final and the final caption arrive together) is not scored a second time at
once -- the later caller waits for the first one's result (`_InFlight`).
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
"""The shortest hold: the ASR streamer's own hold in semantic mode (chat/models.py), and the confident tier's.
Equal to `SEMANTIC_COMPLETE_HOLD_MS`, so the confident tier is off: a shorter streamer hold splits natural
speech at short pauses (120 ms was tried: a final at every pause >= 128 ms, not validated on real speech)."""
DEFAULT_CONFIDENT: Final = 0.1
"""Score at or above which the thought is confidently complete, for a policy whose `min_ms` is below its
`complete_ms` (the labelled set: every mid-phrase prefix scores below 0.029, 77 % of complete utterances score
0.1 or more)."""
SEMANTIC_COMPLETE_HOLD_MS: Final = 200.0
"""Hold after a complete thought (the streamer's 200 ms hold before today's tiers; by default every complete one)."""
SEMANTIC_MAX_HOLD_MS: Final = 1200.0
"""Hold after a clearly unfinished phrase."""
SCORES_KEPT: Final = 16
"""Recent scores remembered: the final transcript usually repeats the last caption scored during the hold."""
SHARED_WAIT_S: Final = 1.0
"""Longest wait for a score another thread is computing (one takes 45-800 ms, loaded or not) before scoring
it here: the caller (the caption thread) must not sit behind a stuck prefetch."""
_END_PUNCT = re.compile(r"^[.?!]+\s*$")
_TRAILING = re.compile(r"[\s.?!,;:…-]+$")


def normalize(text: str) -> str:
    """The transcript as scored: whitespace collapsed, trailing punctuation removed."""
    return _TRAILING.sub("", " ".join(text.split()))


@dataclass(frozen=True)
class HoldPolicy:
    """Score -> hold: `min_ms` at or above `confident`, `complete_ms` at or above `threshold`, `max_ms` at or
    below a quarter of the threshold, linear between (`complete_ms` below `min_ms` counts as `min_ms`).
    By default `min_ms` == `complete_ms` (200 ms): one hold for every complete thought, the streamer's own.

    (A plain ramp down to 0 gave "I'd like to order a" -- score 0.003 -- only 1.1 s.)"""

    threshold: float = DEFAULT_THRESHOLD
    min_ms: float = SEMANTIC_MIN_HOLD_MS
    max_ms: float = SEMANTIC_MAX_HOLD_MS
    confident: float = DEFAULT_CONFIDENT
    complete_ms: float = SEMANTIC_COMPLETE_HOLD_MS

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1 or not 0 <= self.min_ms <= self.max_ms or self.complete_ms > self.max_ms:
            raise ValueError("need 0 < threshold <= 1 and 0 <= min_ms <= max_ms, complete_ms <= max_ms")

    def hold_ms(self, score: float) -> float:
        complete = max(self.complete_ms, self.min_ms)
        if score >= max(self.confident, self.threshold):
            return self.min_ms
        if score >= self.threshold:
            return complete
        floor = self.threshold / 4
        f = min(max((score - floor) / (self.threshold - floor), 0.0), 1.0)
        return self.max_ms - (self.max_ms - complete) * f


class _InFlight:
    """One score being computed: later callers for the same text wait for it instead of scoring again."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.score: float | None = None
        self.waiters = 0
        """Callers waiting for this score (tests read it to know the second caller is waiting)."""


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
        self._inflight: dict[str, _InFlight] = {}
        self.computed = 0
        """Scores computed (one prefill each); cache hits and shared in-flight scores are not counted."""

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
        with self._lock:  # the cache and the in-flight map are checked in one step: one prefill per text
            if words in self._scores:
                return self._scores[words]
            mine = self._inflight.get(words)
            if mine is None:
                self._inflight[words] = job = _InFlight()
            else:
                mine.waiters += 1
        if mine is not None:  # scored by another thread right now: its result is ours
            if mine.done.wait(SHARED_WAIT_S) and mine.score is not None:
                return mine.score
            return self._compute(words)  # that one failed (or is stuck): score it here
        try:
            score = self._compute(words)
            job.score = score
            with self._lock:
                self._scores[words] = score
                while len(self._scores) > SCORES_KEPT:
                    self._scores.popitem(last=False)
        finally:
            with self._lock:
                self._inflight.pop(words, None)
            job.done.set()
        return score

    def _compute(self, words: str) -> float:
        logits = self.engine.logits_for(self._prompt + list(self._encode(words)))[0].astype(np.float64)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        with self._lock:
            self.computed += 1
        return float(min(1.0, p[self._eot] + p[self._end_ids(p.size)].sum()))

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
