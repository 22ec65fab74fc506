"""Which runtime a bundle means (catalog `runtime`, else its files), and joining a split model.bin."""
from __future__ import annotations

from pathlib import Path

import pytest

from voxcli.asr.models import runtime_of
from voxcli.errors import UsageError
from voxcli.hub.catalog import load_catalog
from voxcli.hub.resolve import ModelBundle
from voxcli.runtimes.whisper_parts import model_dir


def _bundle(name: str, files: list[str], tmp_path: Path, entry=None) -> ModelBundle:
    return ModelBundle(name, "asr", tmp_path, {f: tmp_path / f for f in files}, tmp_path / "derived", "cache", entry)


def test_catalog_names_each_asr_models_runtime(tmp_path) -> None:
    catalog = load_catalog()
    expected = {"moonshine-tiny-en": "moonshine", "moonshine-base-en": "moonshine",
                "whisper-tiny-en": "whisper-ct2", "whisper-base": "whisper-ct2"}
    for name, runtime in expected.items():
        entry = catalog[name]
        assert entry.kind == "asr" and entry.license == "MIT"
        assert all(f.sha256 and f.size for f in entry.files), name
        assert runtime_of(_bundle(name, [f.name for f in entry.files], tmp_path, entry)) == runtime
    assert [n for n, e in catalog.items() if e.kind == "asr" and e.default] == ["moonshine-tiny-en"]


def test_a_model_without_catalog_entry_is_known_by_its_files(tmp_path) -> None:
    assert runtime_of(_bundle("mine", ["model.bin", "tokenizer.json", "config.json"], tmp_path)) == "whisper-ct2"
    assert runtime_of(_bundle("mine", ["encoder_model.ort", "decoder_model_merged.ort"], tmp_path)) == "moonshine"


def test_unknown_runtime_is_a_usage_error(tmp_path) -> None:
    from dataclasses import replace

    entry = replace(load_catalog()["whisper-tiny-en"], extra={"runtime": "whisper-cpp"})
    with pytest.raises(UsageError, match="unknown ASR runtime 'whisper-cpp'"):
        runtime_of(_bundle("x", ["model.bin"], tmp_path, entry))


def test_parts_are_joined_in_order_and_a_corrupt_join_is_redone(tmp_path) -> None:
    from voxcli.hub.cache import Cache

    src = tmp_path / "src"
    src.mkdir()
    for i, data in enumerate([b"first-", b"second-", b"third"], start=1):
        (src / f"model.bin.part{i}").write_bytes(data)
    (src / "model.bin.part10").write_bytes(b"!")  # numeric order, not text order
    (src / "config.json").write_text("{}")
    derived = Cache(tmp_path / "cache").derived_dir("whisper-x", create=True)
    out = model_dir(src, derived)
    assert (out / "model.bin").read_bytes() == b"first-second-third!" and (out / "config.json").read_text() == "{}"
    (out / "model.bin").write_bytes(b"first-second-thirX!")  # one flipped byte after the join
    assert (model_dir(src, derived) / "model.bin").read_bytes() == b"first-second-third!"


def test_a_whole_model_bin_is_used_in_place(tmp_path) -> None:
    (tmp_path / "model.bin").write_bytes(b"x")
    assert model_dir(tmp_path, None) == tmp_path


def test_the_catalog_step_is_the_streamers_step_unless_the_caller_gives_one() -> None:
    """A slower model re-decodes less often (catalog `step_ms`); an explicit step still wins."""
    from dataclasses import replace

    from tests.whisper.conftest import installed
    from voxcli.asr.models import load_engine
    from voxcli.asr.streamer import ASRStreamer
    from voxcli.runtimes.silero_vad import SileroVAD

    bundle = installed("moonshine-tiny-en")
    vad = SileroVAD.load(installed("silero-vad").file("silero_vad.onnx"))
    slow = load_engine(replace(bundle, entry=replace(bundle.entry, extra={**bundle.entry.extra, "step_ms": 1000})),
                       threads=1)
    plain = load_engine(bundle, threads=1)
    steps = []
    for engine, step_ms in ((slow, None), (slow, 300), (plain, None)):
        s = ASRStreamer(engine, vad, step_ms=step_ms)
        steps.append(s.step)
        s.finish()
    assert (slow.step_ms, plain.step_ms) == (1000, None)
    assert steps == [16000, 4800, 8000]  # samples at 16 kHz: the catalog's 1 s, the caller's 300 ms, the default
