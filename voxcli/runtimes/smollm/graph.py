"""Build the SmolLM2 (llama) decoder as an onnxruntime graph with a KV cache.

Why build instead of ship: the only artifact on the package index is the GGUF
file; onnxruntime has fused CPU kernels for everything a llama layer needs, so
we translate the GGUF weights once into an ONNX graph and cache it in the
model bundle's `derived_dir` (written atomically, under a file lock, its
size and sha256 recorded and checked before use: `voxcli.runtimes.derived`).

Graph (one pass for the whole prompt, then one token per call):
  ids -> Gather(E) -> 30 x [SkipSimplifiedLayerNorm -> QKV MatMulNBits ->
  GroupQueryAttention(rotary, interleaved, KV cache) -> O MatMulNBits ->
  SkipSimplifiedLayerNorm -> gate|up MatMulNBits -> SiLU(g)*u -> down] ->
  last position -> RMSNorm -> E^T head -> logits [1, vocab].
How the 4-bit products are computed, and why "fast" runs int8 kernels twice
per token, is in `linear.py`. Both precisions track the numpy reference
(tests/llm/reference.py): "exact" to ~1.5e-4, "fast" to ~0.015 on logits
that span about +-28.

The Q8_0 embedding is tied to the LM head (no output.weight):
- "fast": kept as Q8_0 codes (uint8 = q + 128, zero point 128: exact) for
  GatherBlockQuantized and an 8-bit MatMulNBits head (two int8 passes: ~2.5 ms
  per token, 28 MB);
- "exact": dequantized to float32 (exact, 113 MB) and shared by Gather and a
  Gemm head, 6-11 ms per token; 8-bit MatMulNBits with fp32 activations took
  120+ ms per token (no fast kernel). The table is not stored in the derived
  graph but fed as a graph input (`EMBED_NAME`; onnxruntime wraps a numpy
  input without a copy), dequantized from the GGUF at load.

RoPE: GroupQueryAttention's `rotary_interleaved=1` rotates adjacent pairs,
which is ggml's mode for GGUF llama weights (the converter permuted Q/K rows).
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Final, Literal

import numpy as np

from voxcli.fsutil import atomic_path, atomic_write
from voxcli.runtimes import derived
from voxcli.runtimes.smollm.gguf import GGUFModel, LlamaConfig, file_fingerprint
from voxcli.runtimes.smollm.linear import Packed, gather_q8, matmul_two_pass, q4_1_linear, q8_0_table

Precision = Literal["fast", "exact"]
PRECISIONS: Final = ("fast", "exact")
GRAPH_VERSION: Final = 3
"""Bump when the graph changes so cached builds are rebuilt (3: two-pass int8 "fast", see linear.py)."""
EMBED_NAME: Final = "token_embd"
"""Graph input carrying the float32 [vocab, hidden] embedding/LM-head table."""
MAX_POSITIONS: Final = 8192
"""Rows of the cos/sin caches (the model's trained context)."""


def graph_filename(fingerprint: str, precision: Precision) -> str:
    return f"decoder-v{GRAPH_VERSION}-{precision}-{fingerprint}.onnx"


class Builder:
    """Accumulates nodes and initializers with unique names; `branch()` makes an `If` subgraph.

    A branch shares the initializer list (constants and weights live in the main
    graph, subgraphs read them from the outer scope) and the node-name counter.
    """

    def __init__(self, _parent: "Builder | None" = None) -> None:
        from onnx import helper, numpy_helper

        self.h = helper
        self.nh = numpy_helper
        self.nodes: list = []
        self.inits: list = _parent.inits if _parent else []
        self._consts: set[str] = _parent._consts if _parent else set()
        self._count = _parent._count if _parent else itertools.count()

    def init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(self.nh.from_array(np.ascontiguousarray(arr), name))
        return name

    def const(self, name: str, arr: np.ndarray) -> str:
        """A small shared constant, added once however often it is asked for."""
        if name not in self._consts:
            self._consts.add(name)
            self.init(name, arr)
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs) -> list[str]:
        name = f"{op}_{next(self._count)}"
        self.nodes.append(self.h.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs

    def has_output(self, name: str) -> bool:
        return any(name in n.output for n in self.nodes)

    def branch(self) -> "Builder":
        return Builder(self)

    def graph(self, name: str, outputs: list[str]):
        """This branch as an `If` subgraph (no inputs; float outputs, shapes left to inference)."""
        from onnx import TensorProto

        outs = [self.h.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        return self.h.make_graph(self.nodes, name, [], outs)


def _io(b: Builder, c: LlamaConfig) -> tuple[list, list]:
    """Graph inputs (ids, KV cache lengths, past keys/values) and outputs (logits, present keys/values)."""
    from onnx import TensorProto as TP

    h = b.h
    inputs = [
        h.make_tensor_value_info("input_ids", TP.INT64, [1, "seq"]),
        h.make_tensor_value_info("seqlens_k", TP.INT32, [1]),
        h.make_tensor_value_info("total_sequence_length", TP.INT32, []),
    ]
    outputs = [h.make_tensor_value_info("logits", TP.FLOAT, [1, c.vocab])]
    for i in range(c.n_layers):
        for kv in ("key", "value"):
            inputs.append(h.make_tensor_value_info(f"past.{i}.{kv}", TP.FLOAT, [1, c.n_kv_heads, "past", c.head_dim]))
            outputs.append(
                h.make_tensor_value_info(f"present.{i}.{kv}", TP.FLOAT, [1, c.n_kv_heads, "total", c.head_dim])
            )
    return inputs, outputs


def _rope(b: Builder, c: LlamaConfig) -> None:
    """cos/sin caches: angle[p, i] = p * theta^(-2i/d), computed in float64 like the reference."""
    hd = c.head_dim
    inv = c.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(MAX_POSITIONS, dtype=np.float64)[:, None] * inv[None, :]
    b.init("rope.cos", np.cos(ang).astype(np.float32))
    b.init("rope.sin", np.sin(ang).astype(np.float32))


def _layer(b: Builder, model: GGUFModel, i: int, residual: str, pending: str | None, fast: bool) -> tuple[str, str]:
    """One llama block; `pending` is the previous block's output not yet added to `residual`.

    Returns the new (residual, pending): the adds are fused into the next SkipSimplifiedLayerNorm.
    """
    c, p = model.config, f"blk.{i}"
    gamma = b.init(f"{p}.attn_norm", model.float32(f"{p}.attn_norm.weight"))
    if pending is None:
        (n,) = b.node("SimplifiedLayerNormalization", [residual, gamma], [f"{p}.n1"], axis=-1, epsilon=c.rms_eps)
    else:
        n, _, _, residual = b.node(
            "SkipSimplifiedLayerNormalization", [pending, residual, gamma],
            [f"{p}.n1", "", "", f"{p}.res1"], domain="com.microsoft", epsilon=c.rms_eps,
        )
    qkv = q4_1_linear(b, model, [f"{p}.attn_q.weight", f"{p}.attn_k.weight", f"{p}.attn_v.weight"], n, f"{p}.qkv", fast)
    (att, _, _) = b.node(
        "GroupQueryAttention",
        [qkv, "", "", f"past.{i}.key", f"past.{i}.value", "seqlens_k", "total_sequence_length", "rope.cos", "rope.sin"],
        [f"{p}.att", f"present.{i}.key", f"present.{i}.value"],
        domain="com.microsoft", num_heads=c.n_heads, kv_num_heads=c.n_kv_heads,
        do_rotary=1, rotary_interleaved=1, scale=float(1.0 / np.sqrt(c.head_dim)),
    )
    o = q4_1_linear(b, model, [f"{p}.attn_output.weight"], att, f"{p}.o", fast)
    gamma2 = b.init(f"{p}.ffn_norm", model.float32(f"{p}.ffn_norm.weight"))
    n2, _, _, residual = b.node(
        "SkipSimplifiedLayerNormalization", [o, residual, gamma2],
        [f"{p}.n2", "", "", f"{p}.res2"], domain="com.microsoft", epsilon=c.rms_eps,
    )
    gu = q4_1_linear(b, model, [f"{p}.ffn_gate.weight", f"{p}.ffn_up.weight"], n2, f"{p}.gu", fast)
    g, u = b.node("Split", [gu], [f"{p}.g", f"{p}.u"], axis=-1, num_outputs=2)
    (sg,) = b.node("Sigmoid", [g], [f"{p}.sg"])
    (silu,) = b.node("Mul", [g, sg], [f"{p}.silu"])
    (act,) = b.node("Mul", [silu, u], [f"{p}.act"])
    return residual, q4_1_linear(b, model, [f"{p}.ffn_down.weight"], act, f"{p}.down", fast)


def _last_position_norm(b: Builder, model: GGUFModel, residual: str, pending: str) -> str:
    """RMSNorm of the last position only: just its logits are needed to generate (slice before the norm)."""
    c = model.config
    (xf,) = b.node("Add", [pending, residual], ["final.res"])
    ends = [b.const(n, np.array([v], dtype=np.int64)) for n, v in (("c.m1", -1), ("c.big", 2**31 - 1), ("c.ax1", 1))]
    (last,) = b.node("Slice", [xf, *ends], ["final.last"])
    (last2,) = b.node("Reshape", [last, b.const("c.flat", np.array([1, c.hidden], dtype=np.int64))], ["final.last2d"])
    gamma_out = b.init("output_norm", model.float32("output_norm.weight"))
    return b.node("SimplifiedLayerNormalization", [last2, gamma_out], ["final.norm"], axis=-1, epsilon=c.rms_eps)[0]


def _has_tied_q8_table(model: GGUFModel) -> bool:
    return model.qtype("token_embd.weight") == "Q8_0" and not model.has("output.weight")


def build_decoder(model: GGUFModel, precision: Precision = "exact"):
    """Return the onnx ModelProto of the decoder (weights inline; "exact" takes the embedding as an input)."""
    from onnx import TensorProto as TP

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    c, b = model.config, Builder()
    fast = precision == "fast"
    inputs, outputs = _io(b, c)
    _rope(b, c)
    table: tuple[Packed, str] | None = None
    if fast and _has_tied_q8_table(model):  # int8 kernels anyway: keep the table as Q8_0 codes (28 MB, not 113)
        table = q8_0_table(b, model, "token_embd.weight")
        x = gather_q8(b, table[0], table[1], "input_ids", "embed")
    else:
        inputs.append(b.h.make_tensor_value_info(EMBED_NAME, TP.FLOAT, [c.vocab, c.hidden]))
        (x,) = b.node("Gather", [EMBED_NAME, "input_ids"], ["embed"], axis=0)
    residual, pending = x, None
    for i in range(c.n_layers):
        residual, pending = _layer(b, model, i, residual, pending, fast)
    assert pending is not None
    nf = _last_position_norm(b, model, residual, pending)
    if table is not None:
        matmul_two_pass(b, nf, table[0], "logits", rank=2)
    else:
        head = "output.weight" if model.has("output.weight") else EMBED_NAME
        if head != EMBED_NAME:
            b.init(head, model.float32(head))
        b.node("Gemm", [nf, head], ["logits"], transB=1)
    graph = b.h.make_graph(b.nodes, "smollm2_decoder", inputs, outputs, b.inits)
    onnx_model = b.h.make_model(
        graph, opset_imports=[b.h.make_opsetid("", 21), b.h.make_opsetid("com.microsoft", 1)], producer_name="voxcli",
    )
    onnx_model.ir_version = 10
    return onnx_model


def graph_files(target: Path) -> list[Path]:
    """The built graph and its weights file (`_save`): recorded and checked together."""
    return [target, target.with_name(target.name + ".data")]


def _save(proto, target: Path) -> None:
    """Write the weights to `<target>.data` and the graph to `target`, each atomically, data first.

    The graph's existence means the build is complete. Tensors of 1 KiB and more go to the
    data file (onnxruntime reads it beside the graph); offsets are 64-byte aligned.
    """
    from onnx import TensorProto
    from onnx.external_data_helper import set_external_data

    data = graph_files(target)[1]
    with atomic_path(data) as tmp, open(tmp, "wb") as f:
        for t in proto.graph.initializer:
            if len(t.raw_data) < 1024:
                continue
            f.write(b"\0" * (-f.tell() % 64))
            offset = f.tell()
            f.write(t.raw_data)
            set_external_data(t, data.name, offset, len(t.raw_data))
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
    atomic_write(target, proto.SerializeToString())


def ensure_decoder(
    gguf_path: Path, derived_dir: Path, precision: Precision = "exact", model: GGUFModel | None = None
) -> Path:
    """Path of the built decoder graph in `derived_dir`, building it once (locked, atomic).

    A cached graph is found from the GGUF file's size and mtime alone, without
    parsing the GGUF (that parse costs ~2 s and ~160 MB of small arrays), and
    used only if graph and weights match the hashes recorded when they were
    built (hashing ~230 MB once per process); otherwise it is built again.
    """
    from filelock import FileLock

    derived_dir = Path(derived_dir)
    target = derived_dir / graph_filename(file_fingerprint(Path(gguf_path)), precision)
    files = graph_files(target)
    if derived.usable(derived_dir, files, "the LLM decoder graph"):
        return target
    derived_dir.mkdir(parents=True, exist_ok=True)  # the bundle's derived_dir is created by whoever writes
    with FileLock(str(target) + ".lock"):
        if not derived.problems(derived_dir, files):  # another process built it while we waited
            return target
        for f in files:  # the graph's existence marks a complete build: drop it first
            f.unlink(missing_ok=True)
        _save(build_decoder(model or GGUFModel(Path(gguf_path)), precision), target)
        derived.record(derived_dir, files)
    _remove_stale(derived_dir)
    return target


def _remove_stale(derived_dir: Path) -> None:
    """Delete graphs of older GRAPH_VERSIONs (never read again; ~230 MB per GGUF)."""
    current = f"decoder-v{GRAPH_VERSION}-"
    for old in derived_dir.glob("decoder-v*"):
        if not old.name.startswith(current):
            old.unlink(missing_ok=True)
