"""Int8 Moonshine graphs built once from weight-compressed `.ort` files (moonshine-base-en).

Why: the base-en graphs in the moonshine-cpp wheel store every weight as
int8 with one scale and offset, and the graph turns them back into fp32
(`Cast -> Mul -> Add`) on EVERY run: each decoder step dequantized all
40 M decoder weights again, 70 ms a token on 2 cores, which made the model
4x too slow to stream (worker RTF 2.0; issue 16). An `.ort` file cannot be
edited with `onnx`, so the build (1) lets onnxruntime write the graph out
as ONNX, unoptimized; (2) folds each dequantization into an fp32 weight
(the same numbers the old graph computed on every run); (3) stores the
tied output projection transposed, so it is a weight rather than a
`Transpose` of one (also run every step); (4) quantizes the MatMul
weights again with onnxruntime's dynamic quantization, per output channel,
uint8 weights as Moonshine tiny ships (u8u8 does not saturate on CPUs
without VNNI), the If branches of the merged decoder included. Convolutions
and the embedding lookup stay fp32. Measured on the dev set: same WER as
the dequantized fp32 graph (9/270 and 44/313 errors), batch decode ~40 %
faster than fp32 and ~10x faster per token than the `.ort` file.

The files are derived files (`voxcli.runtimes.derived`): recorded when
built, checked before every load, rebuilt when damaged. BUILD names the
method; it is part of the file names, so a new method never loads old files.
"""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

from voxcli.runtimes import derived

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_LOG = logging.getLogger(__name__)
BUILD: Final = "int8-v1"
SOURCES: Final = ("encoder_model.ort", "decoder_model_merged.ort")
DERIVE_KEY: Final = "int8"
"""The catalog's `derive = "int8"` on a Moonshine entry asks for these graphs instead of its `.ort` files."""


def target_name(source: str) -> str:
    """`encoder_model.ort` -> `encoder_model.int8-v1.onnx`."""
    return f"{Path(source).stem}.{BUILD}.onnx"


def int8_graphs(directory: Path, derived_dir: Path) -> tuple[Path, Path]:
    """(encoder, decoder) int8 ONNX files for the `.ort` files in `directory`, built once into `derived_dir`."""
    from filelock import FileLock

    out = Path(derived_dir)
    out.mkdir(parents=True, exist_ok=True)
    targets = [out / target_name(s) for s in SOURCES]
    with FileLock(os.fspath(out / f"{BUILD}.lock"), timeout=900):
        if derived.usable(out, targets, "the int8 Moonshine graphs"):
            return targets[0], targets[1]
        _LOG.warning("building the int8 graphs of %s once (about 10-30 s)", Path(directory).name)
        for source, target in zip(SOURCES, targets):
            build(Path(directory) / source, target)
        derived.record(out, targets)
    return targets[0], targets[1]


def build(source: Path, target: Path) -> None:
    """Write the int8 ONNX graph of one weight-compressed `.ort` file to `target` (atomically)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix=".int8-", dir=target.parent) as tmp:
        raw, fp32, staged = Path(tmp) / "raw.onnx", Path(tmp) / "fp32.onnx", Path(tmp) / target.name
        export_onnx(source, raw)
        model = onnx.load(os.fspath(raw))
        raw.unlink()
        name_graphs(model.graph, "main")
        folded = fold_dequantized_weights(model.graph)
        transpose_tied_weights(model.graph, folded)
        onnx.save(model, os.fspath(fp32), save_as_external_data=True, location="fp32.onnx.data", size_threshold=1024)
        del model
        quantize_dynamic(fp32, staged, op_types_to_quantize=["MatMul"], per_channel=True,
                         weight_type=QuantType.QUInt8, extra_options={"EnableSubgraph": True})
        with open(staged, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(staged, target)


def export_onnx(source: Path, out: Path) -> None:
    """The graph of an `.ort` file as ONNX, as onnxruntime loaded it (no optimization: no CPU-specific layout)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.optimized_model_filepath = os.fspath(out)
    opts.log_severity_level = 3
    ort.InferenceSession(os.fspath(source), sess_options=opts, providers=["CPUExecutionProvider"])


def name_graphs(graph: "onnx.GraphProto", name: str) -> None:
    """Give every (sub)graph a name: onnxruntime writes the If branches without one, which ONNX requires."""
    import onnx

    graph.name = graph.name or name
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                name_graphs(attr.g, f"{name}/{node.name}/{attr.name}")


def fold_dequantized_weights(graph: "onnx.GraphProto") -> set[str]:
    """Replace each `Cast(q) -> Mul(scale) -> Add(offset)` of initializers by its fp32 result; their names.

    The result keeps the Add's output name, so the nodes that read it (in the
    If branches too) read the weight unchanged.
    """
    import numpy as np
    from onnx import numpy_helper

    init = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    dropped: set[int] = set()
    weights = []
    for add in graph.node:
        mul = producer.get(add.input[0]) if add.op_type == "Add" else None
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or not all(
                x in init for x in (cast.input[0], mul.input[1], add.input[1])):
            continue
        q, scale, offset = (numpy_helper.to_array(init.pop(x)) for x in (cast.input[0], mul.input[1], add.input[1]))
        weights.append(numpy_helper.from_array((q.astype(np.float32) * scale + offset).astype(np.float32),
                                               add.output[0]))
        dropped |= {id(add), id(mul), id(cast)}
    kept = [n for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend([*init.values(), *weights])
    return {w.name for w in weights}


def transpose_tied_weights(graph: "onnx.GraphProto", weights: set[str]) -> int:
    """Store `Transpose(w)` of a folded weight (the tied output projection) as a weight; the Transposes removed."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    by_name = {t.name: t for t in graph.initializer}
    done = 0
    for node in graph.node:
        for sub in (a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH):
            for t in [x for x in sub.node if x.op_type == "Transpose" and x.input[0] in weights and _swaps(x)]:
                name = t.input[0] + "_transposed"
                if name not in by_name:
                    w = numpy_helper.to_array(by_name[t.input[0]])
                    by_name[name] = numpy_helper.from_array(np.ascontiguousarray(w.T), name)
                    graph.initializer.append(by_name[name])
                for reader in sub.node:
                    for i, x in enumerate(reader.input):
                        if x == t.output[0]:
                            reader.input[i] = name
                sub.node.remove(t)
                done += 1
    return done


def _swaps(transpose: "onnx.NodeProto") -> bool:
    """True for a Transpose that swaps the two axes of a matrix (no `perm`, or perm [1, 0])."""
    perm = [list(a.ints) for a in transpose.attribute if a.name == "perm"]
    return not perm or perm[0] == [1, 0]
