"""Byte-level BPE tokenizer rebuilt from GGUF metadata with the `tokenizers` library.

Why: the GGUF file is the only artifact we ship, and it carries the whole
vocabulary (`tokenizer.ggml.tokens`, GPT-2 byte-level strings such as "Ġthe")
and the merge list; rebuilding the HF tokenizer from them avoids a second
download and guarantees ids match the weights. Control tokens (token_type 3,
e.g. <|im_start|>) are added as special tokens so the chat template's markers
encode to single ids and are never split by BPE.
"""
from __future__ import annotations

from dataclasses import dataclass

from voxcli.runtimes.smollm.gguf import GGUFModel

CONTROL: int = 3
"""GGUF token_type of control tokens (llama.cpp's LLAMA_TOKEN_TYPE_CONTROL)."""


@dataclass
class ChatTokenizer:
    """Encode/decode text; `IncrementalDecoder` turns generated ids into text pieces safely."""

    tok: "object"  # tokenizers.Tokenizer (typed loosely: no import at module load)
    eos_id: int
    im_end_id: int

    @classmethod
    def from_gguf(cls, model: GGUFModel) -> "ChatTokenizer":
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        vocab = {t: i for i, t in enumerate(model.tokens)}
        merges = [tuple(m.split(" ", 1)) for m in model.merges]
        bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
        tok = Tokenizer(bpe)
        # SmolLM2's pre-tokenizer: digits split one by one, then GPT-2 byte-level regex.
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        specials = [
            AddedToken(t, special=True, normalized=False)
            for t, ty in zip(model.tokens, model.token_types)
            if ty == CONTROL
        ]
        tok.add_special_tokens(specials)
        eos = model.eos_id if model.eos_id is not None else vocab["<|endoftext|>"]
        return cls(tok=tok, eos_id=eos, im_end_id=vocab.get("<|im_end|>", eos))

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)  # type: ignore[attr-defined]

    @property
    def stop_ids(self) -> set[int]:
        return {self.eos_id, self.im_end_id}


class IncrementalDecoder:
    """Turn generated ids into text deltas without splitting UTF-8 characters.

    A byte-level token can end in the middle of a multi-byte character (an "É"
    or an emoji spans two or more tokens). `tokenizers.decoders.DecodeStream`
    holds such bytes back until the character is complete and decodes only the
    few ids since the last emitted piece, so each token costs the same however
    long the reply is (re-decoding every id so far made a reply quadratic).
    The concatenated deltas equal `ChatTokenizer.decode` of all ids.
    """

    def __init__(self, tokenizer: ChatTokenizer) -> None:
        from tokenizers.decoders import DecodeStream

        self._tok = tokenizer.tok
        self._stream = DecodeStream(skip_special_tokens=True)

    def push(self, token_id: int) -> str:
        """The text that `token_id` completes ("" while a character is still incomplete)."""
        return self._stream.step(self._tok, int(token_id)) or ""
