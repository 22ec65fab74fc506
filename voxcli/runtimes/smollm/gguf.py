"""Read a llama-architecture GGUF file: hyper-parameters, tokenizer, weight blocks.

Why our own thin layer over the `gguf` package: the graph builder wants the
raw quantization blocks (codes, scales, minimums) to keep weights 4-bit in
onnxruntime, the numpy reference wants plain float32, and the tokenizer wants
the vocabulary -- all from one memory-mapped read of the file.

GGUF facts this relies on (ggml's layout):
- a tensor of GGUF shape [ne0, ne1] is stored row-major as ne1 rows of ne0
  values, i.e. a torch Linear weight [out, in] has ne0 = in, ne1 = out;
- Q4_1 block (32 values): fp16 d, fp16 m, 16 bytes; value j = d*q_j + m where
  q_j is the low nibble of byte j (j < 16) or the high nibble of byte j-16;
- Q8_0 block (32 values): fp16 d, 32 int8; value = d*q;
- the llama converter permutes Q/K rows so ggml's adjacent-pair RoPE applies.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from voxcli.errors import UsageError

QK: int = 32
"""Values per quantization block in Q4_1 and Q8_0."""


@dataclass(frozen=True)
class LlamaConfig:
    """Hyper-parameters of a llama decoder, read from `llama.*` metadata."""

    n_layers: int
    hidden: int
    ffn: int
    n_heads: int
    n_kv_heads: int
    vocab: int
    context: int
    rope_theta: float
    rms_eps: float

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_heads


@dataclass(frozen=True)
class Q4_1Blocks:
    """A Q4_1 matrix [rows=N, cols=K] split into codes, scales and minimums."""

    codes: np.ndarray
    """uint8 [N, K/32, 32], values 0..15 in natural element order."""
    scales: np.ndarray
    """float32 [N, K/32] (exact from fp16)."""
    mins: np.ndarray
    """float32 [N, K/32] (exact from fp16)."""


@dataclass(frozen=True)
class Q8_0Blocks:
    """A Q8_0 matrix [rows=N, cols=K] split into signed codes and scales."""

    codes: np.ndarray
    """int8 [N, K/32, 32]."""
    scales: np.ndarray
    """float32 [N, K/32]."""


class GGUFModel:
    """Memory-mapped GGUF file with typed accessors; nothing is read until asked."""

    def __init__(self, path: Path) -> None:
        from gguf import GGUFReader  # heavy-ish import, only when a model is opened

        self.path = Path(path)
        if not self.path.is_file():
            raise UsageError(f"GGUF file not found: {self.path}")
        try:
            self._reader = GGUFReader(str(self.path))
        except Exception as exc:  # corrupt or not GGUF: one clear line
            raise UsageError(f"cannot read GGUF file {self.path}: {exc}") from exc
        self._tensors = {t.name: t for t in self._reader.tensors}
        arch = self.meta("general.architecture")
        if arch != "llama":
            raise UsageError(f"{self.path.name}: architecture {arch!r} is not supported (llama only)")

    # -- metadata ---------------------------------------------------------
    def meta(self, key: str, default: Any = None) -> Any:
        field = self._reader.fields.get(key)
        if field is None:
            return default
        return field.contents()

    @cached_property
    def config(self) -> LlamaConfig:
        m = self.meta
        return LlamaConfig(
            n_layers=int(m("llama.block_count")),
            hidden=int(m("llama.embedding_length")),
            ffn=int(m("llama.feed_forward_length")),
            n_heads=int(m("llama.attention.head_count")),
            n_kv_heads=int(m("llama.attention.head_count_kv")),
            vocab=int(m("llama.vocab_size", len(m("tokenizer.ggml.tokens")))),
            context=int(m("llama.context_length")),
            rope_theta=float(m("llama.rope.freq_base", 10000.0)),
            rms_eps=float(m("llama.attention.layer_norm_rms_epsilon")),
        )

    # -- tensors ----------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._tensors

    def qtype(self, name: str) -> str:
        return self._tensors[name].tensor_type.name

    def _raw(self, name: str) -> np.ndarray:
        try:
            return self._tensors[name].data
        except KeyError:
            raise UsageError(f"{self.path.name}: tensor {name!r} missing") from None

    def float32(self, name: str) -> np.ndarray:
        """Dequantized float32 array in [ne1, ne0] (torch [out, in]) layout."""
        from gguf.quants import dequantize

        t = self._tensors[name]
        out = dequantize(t.data, t.tensor_type)
        return np.ascontiguousarray(out, dtype=np.float32)

    def q4_1(self, name: str) -> Q4_1Blocks:
        """Split a Q4_1 matrix into codes/scales/mins (see module docstring)."""
        if self.qtype(name) != "Q4_1":
            raise UsageError(f"{name} is {self.qtype(name)}, expected Q4_1")
        raw = self._raw(name)  # uint8 [N, nb*20]
        n = raw.shape[0]
        blocks = raw.reshape(n, -1, 4 + QK // 2)
        d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
        m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
        qs = blocks[..., 4:]
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.uint8)
        return Q4_1Blocks(codes=codes, scales=d, mins=m)

    def q8_0(self, name: str) -> Q8_0Blocks:
        """Split a Q8_0 matrix into int8 codes and scales."""
        if self.qtype(name) != "Q8_0":
            raise UsageError(f"{name} is {self.qtype(name)}, expected Q8_0")
        raw = self._raw(name)  # uint8 [N, nb*34]
        n = raw.shape[0]
        blocks = raw.reshape(n, -1, 2 + QK)
        d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
        codes = blocks[..., 2:].copy().view(np.int8)
        return Q8_0Blocks(codes=codes, scales=d)

    # -- tokenizer --------------------------------------------------------
    @cached_property
    def tokens(self) -> list[str]:
        return list(self.meta("tokenizer.ggml.tokens"))

    @cached_property
    def merges(self) -> list[str]:
        return list(self.meta("tokenizer.ggml.merges") or [])

    @cached_property
    def token_types(self) -> list[int]:
        return [int(t) for t in (self.meta("tokenizer.ggml.token_type") or [])]

    @property
    def bos_id(self) -> int | None:
        v = self.meta("tokenizer.ggml.bos_token_id")
        return None if v is None else int(v)

    @property
    def eos_id(self) -> int | None:
        v = self.meta("tokenizer.ggml.eos_token_id")
        return None if v is None else int(v)

    def fingerprint(self) -> str:
        return file_fingerprint(self.path)


def file_fingerprint(path: Path) -> str:
    """Cheap identity of a model file (size + mtime) for cache keys of derived artifacts."""
    try:
        st = Path(path).stat()
    except OSError:
        raise UsageError(f"GGUF file not found: {path}") from None
    return f"{st.st_size}-{int(st.st_mtime)}"
