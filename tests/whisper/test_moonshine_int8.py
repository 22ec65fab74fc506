"""moonshine-base-en runs int8 graphs built once from its weight-compressed `.ort` files (issue 16).

The `.ort` graphs dequantize every weight on every run (`Cast -> Mul -> Add`
of int8 initializers); the build folds that once and quantizes the MatMul
weights again (`voxcli.runtimes.moonshine_int8`). These tests build into a
cache of their own (about 20 s), so they check the build, the records and
the rebuild of a damaged file; the dev-set WER bound (test_dev_set.py) checks
the accuracy of the graphs the shared cache loads.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

from tests.asr_checks import BECKETT_REF
from tests.whisper.conftest import installed, read16k
from voxcli.bench.wer import word_errors
from voxcli.errors import UsageError
from voxcli.hub.cache import Cache
from voxcli.hub.verify import sha256_file
from voxcli.runtimes import derived
from voxcli.runtimes.moonshine import MoonshineASR
from voxcli.runtimes.moonshine_int8 import SOURCES, int8_graphs, target_name


def _ops(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every node of the graph and of its subgraphs (the merged decoder's If branches)."""
    out = []
    for node in graph.node:
        out.append(node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                out += _ops(attr.g)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(source bundle, derived dir, encoder, decoder) of one build into a cache of the test's own."""
    bundle = installed("moonshine-base-en")
    out = Cache(tmp_path_factory.mktemp("cache")).derived_dir("moonshine-base-en", create=True)
    return bundle, out, *int8_graphs(bundle.path, out)


def test_the_built_graphs_quantize_the_matmuls_and_dequantize_nothing_per_run(built) -> None:
    _bundle, out, encoder, decoder = built
    assert [encoder.name, decoder.name] == [target_name(s) for s in SOURCES]
    assert derived.problems(out, [encoder, decoder]) == []  # recorded as built
    for path in (encoder, decoder):
        graph = onnx.load(str(path)).graph
        weights = {t.name: t.data_type for t in graph.initializer}
        big = {t.name for t in graph.initializer if np.prod(t.dims) >= 4096}  # not the rotary frequencies
        nodes = _ops(graph)
        int8 = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
        assert not [n.name for n in nodes if n.op_type == "Cast" and weights.get(n.input[0]) in int8]
        assert not [n.name for n in nodes if n.op_type == "MatMul" and any(i in big for i in n.input)]
        assert not [n.name for n in nodes if n.op_type == "Transpose" and n.input[0] in weights]
        assert sum(n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")
                   for n in nodes) >= 40


def test_the_built_graphs_transcribe_real_speech(built) -> None:
    bundle, out, _encoder, _decoder = built
    asr = MoonshineASR.load(bundle.path, name=bundle.name, threads=1, int8_dir=out)
    audio = read16k(installed("speech-samples").file("beckett.wav"))
    text = asr.text(audio)
    assert word_errors(BECKETT_REF, text).errors <= 1, text


def test_a_damaged_int8_graph_is_built_again(built) -> None:
    bundle, out, encoder, decoder = built
    before = sha256_file(decoder)
    with open(decoder, "r+b") as f:  # one flipped byte in the middle of the weights
        f.seek(decoder.stat().st_size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    assert derived.problems(out, [decoder])
    assert int8_graphs(bundle.path, out) == (encoder, decoder)
    assert derived.problems(out, [encoder, decoder]) == []
    assert sha256_file(decoder) == before  # the build is deterministic: the same file again


def test_an_unknown_derive_in_the_catalog_is_a_clear_error() -> None:
    from voxcli.asr.models import load_engine

    bundle = installed("moonshine-base-en")
    entry = dataclasses.replace(bundle.entry, extra={**bundle.entry.extra, "derive": "fp16"})
    with pytest.raises(UsageError, match="unknown derive 'fp16'"):
        load_engine(dataclasses.replace(bundle, entry=entry))


def test_a_cache_where_nothing_can_be_written_runs_the_ort_graphs(tmp_path) -> None:
    """No int8 graphs can be built (the derived dir cannot be made): the model still loads, on its .ort files."""
    bundle = installed("moonshine-base-en")
    blocked = tmp_path / "derived"
    blocked.write_text("a file where the derived dirs would go\n")
    asr = MoonshineASR.load(bundle.path, name=bundle.name, threads=1, int8_dir=blocked / "moonshine-base-en")
    text = asr.text(read16k(installed("speech-samples").file("beckett.wav")))
    assert word_errors(BECKETT_REF, text).errors <= 1, text
    assert blocked.is_file()
