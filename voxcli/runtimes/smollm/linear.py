"""The quantized matrix products of the decoder graph (GGUF blocks -> MatMulNBits).

Q4_1 weights (value = d*q + m per 32-block) stay 4-bit: MatMulNBits computes
A @ (d*q)^T with zero points 0, and the minimum term is added as
blocksum(A) @ m^T (m is constant over a block, so A.(m*1) = m*sum(A_block)).

Why the "fast" precision computes every product twice in int8
-----------------------------------------------------------------
MatMulNBits' fast kernels (`accuracy_level=4`) quantize the activations to
int8 per 32-block, as llama.cpp does with Q8_1. On SmolLM2-135M that alone
moves the logits by up to 2.5-4.5 (spans about +-28): on an AMD EPYC with
AVX2 (onnxruntime 1.32) greedy decoding of "What is the capital of France?"
began "L'Étoile, la Cité, ..." instead of "The capital of France is Paris."
(the Q4_1 model's own margin between "The" and "L" is 0.09). The kernel is
right (it matches a numpy simulation of the int8 rounding to 2e-5); the int8
activations are simply too coarse for this small model, whatever the CPU.
So the fast path splits A into its int8 grid values and the remainder,
A = q(A) + (A - q(A)), and runs both through one level-4 MatMulNBits
stacked on the batch axis (the weights are read once): q(A) passes the
kernel's quantizer unchanged and the remainder's rounding error is ~1/127 of
the original, so the logits stay within ~0.015 of the fp32 reference.
That pays off for one token at a time; for a prompt (several rows) the
fp32-activation kernel (level 0) is as fast as one int8 pass, so an `If` on
the row count picks level 0 for prefill. Measured per token on one core
(CPU time, the France prompt + 12 greedy tokens x 4 prompts):
  int8 single pass (old "fast"):  13 ms decode, 195 ms per 60-token prefill, max diff 4.5, 4/48 argmax flips;
  two-pass int8 decode + fp32 prefill (this):  18-20 ms, 207 ms, max diff 0.011, 0 flips;
  fp32 activations everywhere ("exact"):  37-40 ms, 200 ms, max diff 1.5e-4.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from voxcli.runtimes.smollm.gguf import QK, GGUFModel

if TYPE_CHECKING:  # pragma: no cover
    from voxcli.runtimes.smollm.graph import Builder

INT8_LEVEL = 4
"""MatMulNBits accuracy_level: int8 activations (per block of `block_size`)."""
FP32_LEVEL = 0
"""MatMulNBits accuracy_level: fp32 activations (exact up to summation order)."""


@dataclass(frozen=True)
class Packed:
    """Initializer names of one MatMulNBits weight: codes, scales, zero points, and K x N."""

    codes: str
    scales: str
    zero_points: str
    k: int
    n: int
    bits: int


def _split_int8(b: "Builder", x: str, prefix: str, rank: int) -> str:
    """[q(x); x - q(x)] concatenated on the leading (batch) axis, which must be 1: shape [2, ...].

    q(x) rounds each 32-block of the last axis to the int8 grid amax/127 * {-127..127},
    which is what MatMulNBits' level-4 quantizer does, so it passes that quantizer unchanged.
    """
    blocks = b.const(f"c.blocks{rank}", np.array([0] * (rank - 1) + [-1, QK], dtype=np.int64))
    (xb,) = b.node("Reshape", [x, blocks], [f"{prefix}.q.blocks"])
    (ab,) = b.node("Abs", [xb], [f"{prefix}.q.abs"])
    (am,) = b.node("ReduceMax", [ab, b.const("c.axes_last", np.array([-1], dtype=np.int64))],
                   [f"{prefix}.q.amax"], keepdims=1)
    (d0,) = b.node("Mul", [am, b.const("c.inv127", np.array(1 / 127.0, dtype=np.float32))], [f"{prefix}.q.d0"])
    (d,) = b.node("Max", [d0, b.const("c.tiny", np.array(1e-30, dtype=np.float32))], [f"{prefix}.q.d"])
    (t,) = b.node("Div", [xb, d], [f"{prefix}.q.t"])
    (r,) = b.node("Round", [t], [f"{prefix}.q.round"])
    (xq,) = b.node("Mul", [r, d], [f"{prefix}.q.grid"])
    (rest,) = b.node("Sub", [xb, xq], [f"{prefix}.q.rest"])
    (st,) = b.node("Concat", [xq, rest], [f"{prefix}.q.stack"], axis=0)
    return st


def matmul_two_pass(b: "Builder", x: str, w: Packed, out: str, rank: int) -> str:
    """x @ W^T with int8 kernels at ~fp32 accuracy: one level-4 run over [q(x); x - q(x)], summed.

    `x` has `rank` axes, the first of size 1 (the batch); so has the result.
    """
    st = _split_int8(b, x, out, rank)
    flat = b.const(f"c.flat{rank}.{w.k}", np.array([0] * (rank - 1) + [w.k], dtype=np.int64))
    (st2,) = b.node("Reshape", [st, flat], [f"{out}.q.stack2"])
    (y2,) = _matmul_nbits(b, st2, w, f"{out}.q.both", INT8_LEVEL)
    return b.node("ReduceSum", [y2, b.const("c.axis0", np.array([0], dtype=np.int64))], [out], keepdims=1)[0]


def _matmul_nbits(b: "Builder", x: str, w: Packed, out: str, level: int) -> list[str]:
    return b.node(
        "MatMulNBits", [x, w.codes, w.scales, w.zero_points], [out], domain="com.microsoft",
        K=w.k, N=w.n, bits=w.bits, block_size=QK, accuracy_level=level,
    )


def _decode_or_prefill(b: "Builder", x: str, w: Packed, out: str) -> str:
    """One row (decode): two-pass int8; several rows (prefill): fp32 activations. Same weights."""
    one = b.const("c.one", np.array([1], dtype=np.int64))
    if not b.has_output("c.is_decode"):
        b.node("Shape", ["input_ids"], ["c.seq"], start=1, end=2)
        b.node("Equal", ["c.seq", one], ["c.is_decode"])
    then = b.branch()
    matmul_two_pass(then, x, w, f"{out}.decode", rank=3)
    other = b.branch()
    _matmul_nbits(other, x, w, f"{out}.prefill", FP32_LEVEL)
    return b.node(
        "If", ["c.is_decode"], [out],
        then_branch=then.graph(f"{out}.then", [f"{out}.decode"]),
        else_branch=other.graph(f"{out}.else", [f"{out}.prefill"]),
    )[0]


def q4_1_linear(b: "Builder", model: GGUFModel, names: list[str], x: str, prefix: str, fast: bool) -> str:
    """x @ W^T for the row-concatenation W of the Q4_1 tensors `names` (exact weights, see module doc)."""
    blocks = [model.q4_1(n) for n in names]
    codes = np.concatenate([q.codes for q in blocks], axis=0)  # [N, nb, 32]
    scales = np.concatenate([q.scales for q in blocks], axis=0)  # [N, nb]
    mins = np.concatenate([q.mins for q in blocks], axis=0)
    n, nb = scales.shape
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)  # low nibble = even element
    w = Packed(
        codes=b.init(f"{prefix}.qweight", packed), scales=b.init(f"{prefix}.scales", scales),
        zero_points=b.init(f"{prefix}.zp", np.zeros((n, (nb + 1) // 2), dtype=np.uint8)),
        k=nb * QK, n=n, bits=4,
    )
    if fast:
        y0 = _decode_or_prefill(b, x, w, f"{prefix}.dq")
    else:
        (y0,) = _matmul_nbits(b, x, w, f"{prefix}.dq", FP32_LEVEL)
    m = b.init(f"{prefix}.minsT", np.ascontiguousarray(mins.T))  # [nb, N]
    shape = b.const("c.bshape", np.array([0, 0, -1, QK], dtype=np.int64))
    (xr,) = b.node("Reshape", [x, shape], [f"{prefix}.xblocks"])
    (xs,) = b.node("ReduceSum", [xr, b.const("c.axes_last", np.array([-1], dtype=np.int64))],
                   [f"{prefix}.xsum"], keepdims=0)
    (y1,) = b.node("MatMul", [xs, m], [f"{prefix}.minterm"])
    return b.node("Add", [y0, y1], [f"{prefix}.out"])[0]


def q8_0_table(b: "Builder", model: GGUFModel, name: str) -> tuple[Packed, str]:
    """A Q8_0 [rows, K] table as 8-bit codes (uint8 = q + 128, zero point 128: exact).

    Returns the MatMulNBits weight ([rows, K/32, 32] codes) and the name of the same
    codes as a [rows, K] initializer for GatherBlockQuantized (the ops want different shapes).
    """
    e8 = model.q8_0(name)
    n, nb, _ = e8.codes.shape
    codes = (e8.codes.astype(np.int16) + 128).astype(np.uint8)
    packed = Packed(
        codes=b.init(f"{name}.codes", codes), scales=b.init(f"{name}.scales", e8.scales),
        zero_points=b.init(f"{name}.zp", np.full(e8.scales.shape, 128, dtype=np.uint8)), k=nb * QK, n=n, bits=8,
    )
    return packed, b.init(f"{name}.rows", codes.reshape(n, nb * QK))


def gather_q8(b: "Builder", table: Packed, rows: str, ids: str, out: str) -> str:
    """Rows `ids` of a Q8_0 table, dequantized (exact) by GatherBlockQuantized."""
    return b.node(
        "GatherBlockQuantized", [rows, ids, table.scales, table.zero_points], [out],
        domain="com.microsoft", gather_axis=0, quantize_axis=1, block_size=QK, bits=8,
    )[0]
