"""Build the SmolLM2 (llama) decoder as an onnxruntime graph with a KV cache.

Why build instead of ship: the only artifact on the package index is the GGUF
file; onnxruntime has fused CPU kernels for everything a llama layer needs, so
we translate the GGUF weights once into an ONNX graph and cache it in the
model bundle's `derived_dir` (atomic temp + os.replace, under a file lock).

Graph (one pass for the whole prompt, then one token per call):
  ids -> Gather(E) -> 30 x [SkipSimplifiedLayerNorm -> QKV MatMulNBits ->
  GroupQueryAttention(rotary, interleaved, KV cache) -> O MatMulNBits ->
  SkipSimplifiedLayerNorm -> gate|up MatMulNBits -> SiLU(g)*u -> down] ->
  last position -> RMSNorm -> E^T head -> logits [1, vocab].

Q4_1 weights (value = d*q + m per 32-block) stay 4-bit: MatMulNBits computes
A @ (d*q)^T exactly with zero points 0, and the minimum term is added as
blocksum(A) @ m^T (m is constant over a block, so A.(m*1) = m*sum(A_block)).
Measured on one 1536x576 projection (2 cores, random weights):
  split, fp32 activations (level 0): max err 6.6e-6, 0.06 ms/token, 1.0 ms per 60-token prefill;
  float zero points -m/d:            max err 2.5e-6, 0.89 ms/token (slow fallback kernel);
  split, int8 activations (level 4): max err 3.4e-2, 0.03 ms/token, 0.6 ms per prefill.
  (fp32 dequantized weights would need 424 MB: over the memory target.)
Whole model, France prompt + 8 greedy steps vs the numpy reference (logits
span about +-28): level 0 max diff 1.5e-4, level 4 max diff 2.6 (per-block
int8 activations, as llama.cpp's Q8_1 dot products), same greedy tokens; level
4 decodes 3-4x faster, so it is LocalLLM's default ("fast") and level 0 is
"exact", the one the reference test holds to 5e-3.
The Q8_0 embedding is tied to the LM head (no output.weight):
- level 4 ("fast"): kept as Q8_0 codes (uint8 = q + 128, zero point 128: exact)
  for GatherBlockQuantized and an 8-bit MatMulNBits head with int8
  activations: 1.7 ms per token, 28 MB, adds <0.1 to the logits' deviation;
- level 0 ("exact"): dequantized to float32 (exact, 113 MB) and shared by Gather
  and a Gemm head, 6.4 ms per token; 8-bit MatMulNBits at fp32 level took
  120+ ms per token (no fast kernel). The table is not stored in the derived
  graph but fed as a graph input (`EMBED_NAME`; onnxruntime wraps a numpy
  input without a copy), dequantized from the GGUF at load.

RoPE: GroupQueryAttention's `rotary_interleaved=1` rotates adjacent pairs,
which is ggml's mode for GGUF llama weights (the converter permuted Q/K rows).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Final

import numpy as np

from voxcli.runtimes.smollm.gguf import QK, GGUFModel, LlamaConfig, file_fingerprint

GRAPH_VERSION: Final = 2
"""Bump when the graph layout changes so cached builds are rebuilt."""
EMBED_NAME: Final = "token_embd"
"""Graph input carrying the float32 [vocab, hidden] embedding/LM-head table."""
MAX_POSITIONS: Final = 8192
"""Rows of the cos/sin caches (the model's trained context)."""


def graph_filename(fingerprint: str, level: int = 0) -> str:
    return f"decoder-v{GRAPH_VERSION}-l{level}-{fingerprint}.onnx"


class _Builder:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.h = helper
        self.nh = numpy_helper
        self.nodes: list = []
        self.inits: list = []

    def init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(self.nh.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs) -> list[str]:
        name = f"{op}_{len(self.nodes)}"
        self.nodes.append(self.h.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs


def _q4_1_linear(
    b: _Builder, model: GGUFModel, names: list[str], x: str, k: int, prefix: str, level: int = 0
) -> str:
    """x @ W^T for the row-concatenation W of the Q4_1 tensors `names` (exact, see module doc)."""
    blocks = [model.q4_1(n) for n in names]
    codes = np.concatenate([q.codes for q in blocks], axis=0)  # [N, nb, 32]
    scales = np.concatenate([q.scales for q in blocks], axis=0)  # [N, nb]
    mins = np.concatenate([q.mins for q in blocks], axis=0)
    n, nb = scales.shape
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)  # low nibble = even element
    zp = np.zeros((n, (nb + 1) // 2), dtype=np.uint8)
    w = b.init(f"{prefix}.qweight", packed)
    s = b.init(f"{prefix}.scales", scales)
    z = b.init(f"{prefix}.zp", zp)
    m = b.init(f"{prefix}.minsT", np.ascontiguousarray(mins.T))  # [nb, N]
    (y0,) = b.node(
        "MatMulNBits", [x, w, s, z], [f"{prefix}.dq"], domain="com.microsoft",
        K=k, N=n, bits=4, block_size=QK, accuracy_level=level,
    )
    shape = b.init(f"{prefix}.bshape", np.array([0, 0, nb, QK], dtype=np.int64))
    (xr,) = b.node("Reshape", [x, shape], [f"{prefix}.xblocks"])
    axes = "const.axes_last"
    (xs,) = b.node("ReduceSum", [xr, axes], [f"{prefix}.xsum"], keepdims=0)
    (y1,) = b.node("MatMul", [xs, m], [f"{prefix}.minterm"])
    (y,) = b.node("Add", [y0, y1], [f"{prefix}.out"])
    return y


def build_decoder(model: GGUFModel, level: int = 0):
    """Return the onnx ModelProto of the decoder (weights inline, embedding external)."""
    from onnx import TensorProto as TP

    c: LlamaConfig = model.config
    b = _Builder()
    h = b.h
    hd = c.head_dim
    b.init("const.axes_last", np.array([-1], dtype=np.int64))

    inputs = [
        h.make_tensor_value_info("input_ids", TP.INT64, [1, "seq"]),
        h.make_tensor_value_info("seqlens_k", TP.INT32, [1]),
        h.make_tensor_value_info("total_sequence_length", TP.INT32, []),
    ]
    outputs = [h.make_tensor_value_info("logits", TP.FLOAT, [1, c.vocab])]
    for i in range(c.n_layers):
        for kv in ("key", "value"):
            inputs.append(h.make_tensor_value_info(f"past.{i}.{kv}", TP.FLOAT, [1, c.n_kv_heads, "past", hd]))
            outputs.append(h.make_tensor_value_info(f"present.{i}.{kv}", TP.FLOAT, [1, c.n_kv_heads, "total", hd]))

    # rotary caches: angle[p, i] = p * theta^(-2i/d), computed in float64 like the reference
    inv = c.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(MAX_POSITIONS, dtype=np.float64)[:, None] * inv[None, :]
    b.init("rope.cos", np.cos(ang).astype(np.float32))
    b.init("rope.sin", np.sin(ang).astype(np.float32))

    q8_head = level == 4 and model.qtype("token_embd.weight") == "Q8_0" and not model.has("output.weight")
    if q8_head:  # int8 activations anyway: keep the tied table as Q8_0 codes (28 MB, not 113)
        e8 = model.q8_0("token_embd.weight")
        codes = (e8.codes.astype(np.int16) + 128).astype(np.uint8)  # uint8 with zero point 128: exact
        zp = np.full(e8.scales.shape, 128, dtype=np.uint8)
        b.init("embed.codes", codes.reshape(c.vocab, c.hidden))
        b.init("embed.scales", e8.scales)
        b.init("embed.zp", zp)
        (x,) = b.node(
            "GatherBlockQuantized", ["embed.codes", "input_ids", "embed.scales", "embed.zp"], ["embed"],
            domain="com.microsoft", gather_axis=0, quantize_axis=1, block_size=QK, bits=8,
        )
    else:
        (x,) = b.node("Gather", [EMBED_NAME, "input_ids"], ["embed"], axis=0)
    residual = x
    pending: str | None = None  # output of the previous sub-block, not yet added to residual
    for i in range(c.n_layers):
        p = f"blk.{i}"
        gamma = b.init(f"{p}.attn_norm", model.float32(f"{p}.attn_norm.weight"))
        if pending is None:
            (n,) = b.node("SimplifiedLayerNormalization", [residual, gamma], [f"{p}.n1"], axis=-1, epsilon=c.rms_eps)
        else:
            n, _, _, residual = b.node(
                "SkipSimplifiedLayerNormalization", [pending, residual, gamma],
                [f"{p}.n1", "", "", f"{p}.res1"], domain="com.microsoft", epsilon=c.rms_eps,
            )
        qkv = _q4_1_linear(b, model, [f"{p}.attn_q.weight", f"{p}.attn_k.weight", f"{p}.attn_v.weight"], n, c.hidden, f"{p}.qkv", level)
        (att, _, _) = b.node(
            "GroupQueryAttention",
            [qkv, "", "", f"past.{i}.key", f"past.{i}.value", "seqlens_k", "total_sequence_length", "rope.cos", "rope.sin"],
            [f"{p}.att", f"present.{i}.key", f"present.{i}.value"],
            domain="com.microsoft", num_heads=c.n_heads, kv_num_heads=c.n_kv_heads,
            do_rotary=1, rotary_interleaved=1, scale=float(1.0 / np.sqrt(hd)),
        )
        o = _q4_1_linear(b, model, [f"{p}.attn_output.weight"], att, c.hidden, f"{p}.o", level)
        gamma2 = b.init(f"{p}.ffn_norm", model.float32(f"{p}.ffn_norm.weight"))
        n2, _, _, residual = b.node(
            "SkipSimplifiedLayerNormalization", [o, residual, gamma2],
            [f"{p}.n2", "", "", f"{p}.res2"], domain="com.microsoft", epsilon=c.rms_eps,
        )
        gu = _q4_1_linear(b, model, [f"{p}.ffn_gate.weight", f"{p}.ffn_up.weight"], n2, c.hidden, f"{p}.gu", level)
        g, u = b.node("Split", [gu], [f"{p}.g", f"{p}.u"], axis=-1, num_outputs=2)
        (sg,) = b.node("Sigmoid", [g], [f"{p}.sg"])
        (silu,) = b.node("Mul", [g, sg], [f"{p}.silu"])
        (act,) = b.node("Mul", [silu, u], [f"{p}.act"])
        pending = _q4_1_linear(b, model, [f"{p}.ffn_down.weight"], act, c.ffn, f"{p}.down", level)

    # only the last position's logits are needed to generate: slice before the final norm
    assert pending is not None
    (xf,) = b.node("Add", [pending, residual], ["final.res"])
    b.init("const.m1", np.array([-1], dtype=np.int64))
    b.init("const.big", np.array([2**31 - 1], dtype=np.int64))
    b.init("const.ax1", np.array([1], dtype=np.int64))
    (last,) = b.node("Slice", [xf, "const.m1", "const.big", "const.ax1"], ["final.last"])
    b.init("const.flat", np.array([1, c.hidden], dtype=np.int64))
    (last2,) = b.node("Reshape", [last, "const.flat"], ["final.last2d"])
    gamma_out = b.init("output_norm", model.float32("output_norm.weight"))
    (nf,) = b.node("SimplifiedLayerNormalization", [last2, gamma_out], ["final.norm"], axis=-1, epsilon=c.rms_eps)
    head = "output.weight" if model.has("output.weight") else EMBED_NAME
    if q8_head:
        b.init("head.codes", codes.reshape(c.vocab, c.hidden // QK, QK))
        b.node(
            "MatMulNBits", [nf, "head.codes", "embed.scales", "embed.zp"], ["logits"], domain="com.microsoft",
            K=c.hidden, N=c.vocab, bits=8, block_size=QK, accuracy_level=4,
        )
    else:
        if head != EMBED_NAME:
            b.init(head, model.float32(head))
        b.node("Gemm", [nf, head], ["logits"], transB=1)

    graph = h.make_graph(
        b.nodes, "smollm2_decoder", inputs, outputs, b.inits,
        value_info=[],
    )
    if not q8_head:
        graph.input.append(h.make_tensor_value_info(EMBED_NAME, TP.FLOAT, [c.vocab, c.hidden]))
    onnx_model = h.make_model(
        graph, opset_imports=[h.make_opsetid("", 21), h.make_opsetid("com.microsoft", 1)],
        producer_name="voxcli",
    )
    onnx_model.ir_version = 10
    return onnx_model


def ensure_decoder(
    gguf_path: Path, derived_dir: Path, level: int = 0, model: GGUFModel | None = None
) -> Path:
    """Path of the built decoder graph in `derived_dir`, building it once (locked, atomic).

    A cached graph is found from the GGUF file's size and mtime alone, without
    parsing the GGUF (that parse costs ~2 s and ~160 MB of small arrays).
    """
    import onnx
    from filelock import FileLock

    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    target = derived_dir / graph_filename(file_fingerprint(Path(gguf_path)), level)
    if target.exists():
        return target
    with FileLock(str(target) + ".lock"):
        if target.exists():  # another process built it while we waited
            return target
        proto = build_decoder(model or GGUFModel(Path(gguf_path)), level)
        tmpdir = Path(tempfile.mkdtemp(prefix=".build-", dir=derived_dir))
        try:
            data_name = target.name + ".data"
            tmp_model = tmpdir / target.name
            onnx.save_model(
                proto, str(tmp_model), save_as_external_data=True, all_tensors_to_one_file=True,
                location=data_name, size_threshold=1024,
            )
            # data first, graph last: the graph's existence means the build is complete
            os.replace(tmpdir / data_name, derived_dir / data_name)
            os.replace(tmp_model, target)
        finally:
            for f in tmpdir.iterdir():
                f.unlink()
            tmpdir.rmdir()
    return target
