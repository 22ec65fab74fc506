"""Moonshine (tiny and base, English) speech recognition on onnxruntime.

Tiny runs its `.ort` graphs as shipped; base runs int8 graphs built once from
its weight-compressed `.ort` files (`moonshine_int8`, catalog `derive = "int8"`).

Moonshine's encoder reads raw 16 kHz samples (no mel front end) and its cost
grows with the audio length, which is what makes re-decoding a growing buffer
every few hundred milliseconds affordable (see MODELS.md: 107 ms for 4 s).
The merged decoder carries its own KV cache: the first step computes the
cross-attention keys/values from the encoder output, later steps reuse them
(`use_cache_branch`) and only extend the self-attention cache.

Moonshine emits text without timestamps. `transcribe` therefore spreads the
words over the buffer in proportion to their character offsets: good enough
for display and for choosing a cut region, not for subtitles.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from voxcli.errors import ModelNotFoundError, UsageError
from voxcli.events import Word
from voxcli.runtimes.moonshine_draft import first_token
from voxcli.runtimes.onnx import session

SAMPLE_RATE: Final = 16000
ENCODER_FILE: Final = "encoder_model.ort"
DECODER_FILE: Final = "decoder_model_merged.ort"
TOKENIZER_FILE: Final = "tokenizer.json"

# Greedy decoding can loop ("fail again fail again ..."); speech rarely runs
# above ~4 tokens/s, so 6.5/s + 10 bounds a runaway without cutting real text.
TOKENS_PER_SECOND: Final[float] = 6.5
TOKEN_SLACK: Final[int] = 10
# The encoder's convolution stack needs at least this many samples (127 + 64*9).
MIN_SAMPLES: Final[int] = 1024


@dataclass(frozen=True)
class DecoderShape:
    """Geometry of the decoder KV cache, read from the graph's inputs."""

    layers: int
    heads: int
    head_dim: int


class MoonshineASR:
    """The `ASREngine` for Moonshine: `transcribe(audio) -> list[Word]`.

    Not thread-safe per instance in the sense that one decode runs at a time;
    the streamer owns a single worker that calls it serially.
    """

    sample_rate: int = SAMPLE_RATE
    name: str = "moonshine-tiny-en"
    bos_id: int = 1
    eos_id: int = 2
    agreement: int | None = None
    """LocalAgreement n to stream with when the caller gives none (the catalog's `agreement`; None: the default)."""
    drafts: bool = True
    """`transcribe` takes `draft=` (the streamer passes its caption to the unforced decodes)."""
    step_ms: int | None = None
    """Re-decode interval to stream at when the caller gives none (the catalog's `step_ms`; None: the default)."""

    def __init__(self, encoder, decoder, tokenizer, name: str = "moonshine-tiny-en", beam: int = 1) -> None:
        self.beam = beam
        """Beams of the search after the prefix (1 = greedy, the default; see moonshine_beam)."""
        self.encoder = encoder
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.name = name
        self._enc_inputs = {i.name for i in encoder.get_inputs()}
        self._dec_inputs = {i.name for i in decoder.get_inputs()}
        self._cache_names = sorted(
            (i.name for i in decoder.get_inputs() if i.name.startswith("past_key_values.")),
            key=_cache_key,
        )
        first = next(i for i in decoder.get_inputs() if i.name.startswith("past_key_values."))
        layers = len({n.split(".")[1] for n in self._cache_names})
        self.shape = DecoderShape(layers=layers, heads=int(first.shape[1]), head_dim=int(first.shape[3]))
        self._out_names = [o.name for o in decoder.get_outputs()]

    @classmethod
    def load(cls, directory: Path, *, threads: int | None = None, name: str = "moonshine-tiny-en",
             beam: int = 1, int8_dir: Path | None = None) -> "MoonshineASR":
        """Load the two `.ort` graphs and `tokenizer.json` from one directory.

        `int8_dir`: run the int8 graphs built from the `.ort` files into this
        derived directory instead (`moonshine_int8`: the catalog's `derive = "int8"`).
        """
        from tokenizers import Tokenizer

        directory = Path(directory)
        missing = [f for f in (ENCODER_FILE, DECODER_FILE, TOKENIZER_FILE) if not (directory / f).is_file()]
        if missing:
            raise ModelNotFoundError(
                f"{name}: missing {', '.join(missing)} in {directory}",
                hint=f"voxcli pull {name}",
            )
        graphs = (directory / ENCODER_FILE, directory / DECODER_FILE)
        if int8_dir is not None:
            from voxcli.runtimes.moonshine_int8 import int8_graphs

            try:
                graphs = int8_graphs(directory, int8_dir)
            except OSError as exc:  # a read-only or full cache: the .ort graphs give the same words, slower
                logging.getLogger(__name__).warning("%s: running the .ort graphs (%s)", name, exc)
        return cls(
            session(graphs[0], threads=threads),
            session(graphs[1], threads=threads),
            Tokenizer.from_file(str(directory / TOKENIZER_FILE)),
            name=name,
            beam=beam,
        )

    @staticmethod
    def max_tokens(samples: int) -> int:
        """Token budget for a buffer: about 6.5 per second of audio plus slack."""
        return int(math.ceil(TOKENS_PER_SECOND * samples / SAMPLE_RATE)) + TOKEN_SLACK

    def encode(self, audio: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(audio, dtype=np.float32)[None, :]
        feeds = {"input_values": x}
        if "attention_mask" in self._enc_inputs:
            feeds["attention_mask"] = np.ones_like(x, dtype=np.int64)
        return self.encoder.run(None, feeds)[0]

    def generate(self, audio: np.ndarray, prefix: list[int] | None = None, draft: list[int] | None = None) -> list[int]:
        """Greedy token ids (without BOS/EOS) for one buffer of 16 kHz audio.

        `prefix`: tokens the transcript is known to start with. They go through
        the decoder in one call (teacher forcing) instead of one call per
        token, which is most of the cost of re-decoding a growing buffer.
        `draft` (without a prefix): tokens the transcript probably is; checked a chunk per decoder
        call (`moonshine_draft`): the model's own greedy tokens (a near-tie may round the other way),
        in fewer calls when the guess is good.
        """
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        if audio.size < MIN_SAMPLES:
            audio = np.pad(audio, (0, MIN_SAMPLES - audio.size))
        hidden = self.encode(audio)
        s = self.shape
        empty = np.zeros((1, s.heads, 0, s.head_dim), dtype=np.float32)
        cache = {name: empty for name in self._cache_names}
        mask = None
        if "encoder_attention_mask" in self._dec_inputs:
            # The graph downsamples this mask itself: it is per audio sample, not per frame.
            mask = np.ones((1, audio.size), dtype=np.int64)
        tokens: list[int] = list(prefix or [])
        ids = np.array([[self.bos_id, *tokens]], dtype=np.int64)
        budget = max(0, self.max_tokens(audio.size) - len(tokens))
        if draft and not tokens and self.beam == 1:
            return self._draft_generate(hidden, mask, cache, draft, budget)
        if self.beam > 1:
            return self._beam_search(self._feeds(ids, hidden, mask, cache, False), tokens, budget)
        for step in range(budget):
            logits, *present = self.decoder.run(self._out_names, self._feeds(ids, hidden, mask, cache, step > 0))
            token = first_token(logits[0, -1], self.eos_id) if not tokens else int(logits[0, -1].argmax())
            if token == self.eos_id:
                break
            tokens.append(token)
            cut = repeated_tail(tokens)
            if cut:  # a loop ("of its nuts, none of its nuts, ..."): keep one copy, stop
                del tokens[len(tokens) - cut :]
                break
            ids = np.array([[token]], dtype=np.int64)
            # The encoder (cross-attention) cache is computed on the first step only.
            for name, value in zip(self._cache_names, present):
                if step == 0 or ".decoder." in name:
                    cache[name] = value
        return tokens

    @staticmethod
    def _feeds(ids: np.ndarray, hidden: np.ndarray, mask: np.ndarray | None, cache: dict, cached: bool) -> dict:
        """The decoder's inputs for one call (greedy, beam and drafted decoding alike)."""
        feeds = {"input_ids": ids, "encoder_hidden_states": hidden, "use_cache_branch": np.array([cached]), **cache}
        if mask is not None:
            feeds["encoder_attention_mask"] = mask
        return feeds

    def _beam_search(self, feeds0: dict, prefix: list[int], budget: int) -> list[int]:
        from voxcli.runtimes.moonshine_beam import beam_generate

        def run(feeds: dict) -> tuple[np.ndarray, dict]:
            logits, *present = self.decoder.run(self._out_names, feeds)
            return logits[:, -1], dict(zip(self._cache_names, present))

        return beam_generate(run, feeds0, prefix, budget, self.beam, self.eos_id, repeated_tail)

    def _draft_generate(self, hidden: np.ndarray, mask: np.ndarray | None, empty: dict, draft: list[int],
                        budget: int) -> list[int]:
        from voxcli.runtimes.moonshine_draft import draft_generate

        def run(ids: np.ndarray, cache: dict, cached: bool) -> tuple[np.ndarray, list[np.ndarray]]:
            logits, *present = self.decoder.run(self._out_names, self._feeds(ids, hidden, mask, cache, cached))
            return logits, present

        return draft_generate(run, self._cache_names, empty, self.bos_id, self.eos_id, draft, budget,
                              repeated_tail, self._is_punct)

    def _is_punct(self, token: int) -> bool:
        """A token with no letter or digit (",", "."): the model inserted it rather than replaced a draft word."""
        text = self.tokenizer.decode([token], skip_special_tokens=True)
        return not any(ch.isalnum() for ch in text)

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def text(self, audio: np.ndarray, prompt: str | None = None, draft: str | None = None) -> str:
        prefix = self.encode_text(prompt) if prompt else None
        guess = self.encode_text(draft) if draft and not prompt else None
        return self.tokenizer.decode(self.generate(audio, prefix, guess), skip_special_tokens=True).strip()

    def transcribe(self, audio: np.ndarray, prompt: str | None = None, draft: str | None = None) -> list[Word]:
        """Words of one buffer (up to ~30 s).

        `prompt`: text the buffer is known to start with (the streamer passes
        the words already stable); it is forced as the decoder's prefix, so
        the result starts with it and only the rest is decoded token by token.

        Word times are estimates: the buffer duration split in proportion to
        character offsets (Moonshine gives no timestamps). `prob` is 1.0.
        `draft` (unforced decodes only): text the buffer probably says (the streamer's caption);
        it only makes the greedy decode faster (`generate`), the words are the model's own.
        """
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise UsageError("ASR input must be mono (one channel)")
        return words_with_estimated_times(self.text(audio, prompt, draft), audio.size / SAMPLE_RATE)


def repeated_tail(tokens: list[int], max_block: int = 12) -> int:
    """Tokens to drop when the sequence ends in a loop: a block repeated 3 times (4 for one token).

    Returns (repeats - 1) * block length, i.e. what to remove to keep one copy; 0 if no loop.
    """
    n = len(tokens)
    for size in range(1, max_block + 1):
        repeats = 4 if size == 1 else 3
        if n < size * repeats:
            break
        block = tokens[n - size :]
        if all(tokens[n - size * (r + 1) : n - size * r] == block for r in range(1, repeats)):
            return size * (repeats - 1)
    return 0


def words_with_estimated_times(text: str, duration: float) -> list[Word]:
    """Split text into Words placed over `duration` by character offset."""
    parts = text.split()
    total = sum(len(p) + 1 for p in parts) or 1
    out: list[Word] = []
    pos = 0
    for p in parts:
        start = duration * pos / total
        pos += len(p) + 1
        out.append(Word(text=p, start=round(start, 3), end=round(duration * pos / total, 3)))
    return out


def _cache_key(name: str) -> tuple[int, int, int]:
    # past_key_values.{layer}.{decoder|encoder}.{key|value}, ordered like the outputs present.*
    _, layer, part, kv = name.split(".")
    return int(layer), 0 if part == "decoder" else 1, 0 if kv == "key" else 1
