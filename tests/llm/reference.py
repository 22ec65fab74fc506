"""A plain numpy forward pass of the llama decoder: the test reference.

Why it exists: the onnxruntime graph uses fused contrib kernels (4-bit
MatMulNBits, GroupQueryAttention with built-in RoPE); this file spells out the
same math with nothing but float32 numpy on fully dequantized weights, so a
test can check the graph's logits against it and a reader can check the math.

Per layer (pre-norm llama): h = x + Wo.attn(rope(Wq.n(x)), rope(Wk.n(x)), Wv.n(x));
x' = h + Wdown.(silu(Wgate.n(h)) * Wup.n(h)), with n = RMSNorm; logits = E.n(x).
RoPE is ggml's "normal" mode: rotate adjacent pairs (x[2i], x[2i+1]) by
pos * theta^(-2i/d) -- the GGUF converter already permuted Q/K rows for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from voxcli.runtimes.smollm.gguf import GGUFModel, LlamaConfig


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_adjacent(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Rotate adjacent pairs of x [heads, seq, d] by angle pos * theta^(-2i/d)."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [d/2]
    ang = positions[:, None].astype(np.float64) * inv[None, :]  # [seq, d/2]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


@dataclass
class _Layer:
    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ffn_norm: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray


@dataclass
class ReferenceCache:
    """Keys/values per layer, [kv_heads, seq, d] each, grown by `forward`."""

    keys: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    @property
    def length(self) -> int:
        return 0 if not self.keys else int(self.keys[0].shape[1])


class ReferenceLlama:
    """Float32 numpy llama; slow (about 10 tokens/s here) but obviously correct."""

    def __init__(self, model: GGUFModel) -> None:
        self.cfg: LlamaConfig = model.config
        f = model.float32
        self.embed = f("token_embd.weight")  # [vocab, hidden]
        self.lm_head = f("output.weight") if model.has("output.weight") else self.embed
        self.out_norm = f("output_norm.weight")
        self.layers = [
            _Layer(
                attn_norm=f(f"blk.{i}.attn_norm.weight"),
                wq=f(f"blk.{i}.attn_q.weight"),
                wk=f(f"blk.{i}.attn_k.weight"),
                wv=f(f"blk.{i}.attn_v.weight"),
                wo=f(f"blk.{i}.attn_output.weight"),
                ffn_norm=f(f"blk.{i}.ffn_norm.weight"),
                w_gate=f(f"blk.{i}.ffn_gate.weight"),
                w_up=f(f"blk.{i}.ffn_up.weight"),
                w_down=f(f"blk.{i}.ffn_down.weight"),
            )
            for i in range(self.cfg.n_layers)
        ]

    @classmethod
    def load(cls, gguf_path: Path) -> "ReferenceLlama":
        return cls(GGUFModel(gguf_path))

    def forward(self, ids: list[int], cache: ReferenceCache | None = None) -> np.ndarray:
        """Logits [len(ids), vocab] for `ids` appended after what `cache` holds."""
        c = self.cfg
        cache = cache if cache is not None else ReferenceCache()
        past = cache.length
        seq = len(ids)
        hd, nh, nkv = c.head_dim, c.n_heads, c.n_kv_heads
        pos = np.arange(past, past + seq)
        x = self.embed[np.asarray(ids)]
        scale = np.float32(1.0 / np.sqrt(hd))
        total = past + seq
        # causal mask: query at past+i sees keys 0..past+i
        mask = np.where(np.arange(total)[None, :] <= (past + np.arange(seq))[:, None], 0.0, -np.inf)
        mask = mask.astype(np.float32)
        first = not cache.keys
        for li, L in enumerate(self.layers):
            n = rms_norm(x, L.attn_norm, c.rms_eps)
            q = (n @ L.wq.T).reshape(seq, nh, hd).transpose(1, 0, 2)
            k = (n @ L.wk.T).reshape(seq, nkv, hd).transpose(1, 0, 2)
            v = (n @ L.wv.T).reshape(seq, nkv, hd).transpose(1, 0, 2)
            q = rope_adjacent(q, pos, c.rope_theta)
            k = rope_adjacent(k, pos, c.rope_theta)
            if first:
                cache.keys.append(k)
                cache.values.append(v)
            else:
                cache.keys[li] = np.concatenate([cache.keys[li], k], axis=1)
                cache.values[li] = np.concatenate([cache.values[li], v], axis=1)
            kk = np.repeat(cache.keys[li], nh // nkv, axis=0)  # GQA: share kv heads
            vv = np.repeat(cache.values[li], nh // nkv, axis=0)
            s = q @ kk.transpose(0, 2, 1) * scale + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ vv).transpose(1, 0, 2).reshape(seq, nh * hd)
            x = x + a @ L.wo.T
            n = rms_norm(x, L.ffn_norm, c.rms_eps)
            g = n @ L.w_gate.T
            u = n @ L.w_up.T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ L.w_down.T
        x = rms_norm(x, self.out_norm, c.rms_eps)
        return x @ self.lm_head.T

    def greedy(self, ids: list[int], max_new: int, stop: set[int] | None = None) -> list[int]:
        """Greedy continuation of `ids` (for tests and the benchmark)."""
        cache = ReferenceCache()
        logits = self.forward(ids, cache)[-1]
        out: list[int] = []
        for _ in range(max_new):
            nxt = int(np.argmax(logits))
            out.append(nxt)
            if stop and nxt in stop:
                break
            logits = self.forward([nxt], cache)[-1]
        return out
