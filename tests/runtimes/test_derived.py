"""Derived files are used only as recorded (issue 18, item 4): a damaged or unrecorded one is rebuilt.

Real models; each test has its own cache laid out as `<root>/derived/<name>` (the
shape `Cache.of_derived` recognizes), so the hub's records are written and read.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from voxcli.hub.cache import Cache
from voxcli.runtimes.piper.graph_split import load_or_split
from voxcli.runtimes.piper.voice import PiperVoice
from voxcli.runtimes.smollm.artifacts import info_path, load_model_info
from voxcli.runtimes.smollm.local import GGUF_FILE, LocalLLM

TEXT = "A flipped byte must not become noise."


@pytest.fixture(scope="module")
def voice_files(voice_bundle):
    return voice_bundle.file("en_US-joe-medium.onnx"), voice_bundle.file("en_US-joe-medium.onnx.json")


def _speak(voice_files, derived_dir: Path) -> np.ndarray:
    """Deterministic audio (noise scales 0) through the split graph in `derived_dir`."""
    v = PiperVoice.load(*voice_files, derived_dir=derived_dir)
    assert v.can_stream
    v.scales = np.array([0.0, v.voice_config.length_scale, 0.0], np.float32)
    return np.concatenate([b for p in v.prepare(TEXT) for b in v.blocks(p)])


def _flip_one_weight(decoder: Path) -> bytes:
    """Set the top byte of the first float of the largest weight to 0x7F (same size); returns the old bytes."""
    import onnx

    original = decoder.read_bytes()
    model = onnx.load_from_string(original)
    raw = max((t.raw_data for t in model.graph.initializer), key=len)
    at = original.find(raw[:256]) + 3
    assert at > 3 and original[at] != 0x7F
    decoder.write_bytes(original[:at] + b"\x7f" + original[at + 1:])
    return original


def test_flipped_decoder_byte_is_resplit_not_noise(voice_files, tmp_path, caplog):
    derived = tmp_path / "cache" / "derived" / "piper-joe-medium"
    before = _speak(voice_files, derived)
    decoder = derived / "zp-decoder.onnx"
    original = _flip_one_weight(decoder)
    flipped = decoder.read_bytes()
    assert len(flipped) == len(original) and flipped != original
    with caplog.at_level(logging.WARNING, logger="voxcli"):
        after = _speak(voice_files, derived)
    assert np.isfinite(after).all() and np.abs(after).max() < 0.99  # speech, not full-scale noise
    assert after.shape == before.shape and np.allclose(after, before, atol=1e-5)
    assert decoder.read_bytes() == original  # split again from the voice
    assert "sha256 mismatch for zp-decoder.onnx" in caplog.text  # `voxcli -v` says why it split again
    assert Cache(tmp_path / "cache").derived_problems() == {}


def test_unrecorded_legacy_split_is_rebuilt_once_then_recorded(voice_files, tmp_path, caplog):
    """Parts split by an older voxcli (no derived.json) are not trusted: split again, once."""
    derived = tmp_path / "cache" / "derived" / "piper-joe-medium"
    load_or_split(voice_files[0], derived)
    (derived / "derived.json").unlink(missing_ok=True)  # what an older voxcli left behind
    legacy = {p.name: p.stat().st_mtime_ns for p in derived.glob("*.onnx")}
    with caplog.at_level(logging.WARNING, logger="voxcli"):
        load_or_split(voice_files[0], derived)
    assert "no recorded hash" in caplog.text
    rebuilt = {p.name: p.stat().st_mtime_ns for p in derived.glob("*.onnx")}
    assert all(rebuilt[n] != legacy[n] for n in legacy)
    records = json.loads((derived / "derived.json").read_text())["files"]
    assert set(records) == {"zp-front.onnx", "zp-flow.onnx", "zp-decoder.onnx", "zp-split.json"}
    load_or_split(voice_files[0], derived)
    assert {p.name: p.stat().st_mtime_ns for p in derived.glob("*.onnx")} == rebuilt  # now trusted


def test_a_split_outside_a_cache_is_still_reused(voice_files, tmp_path):
    """A caller's own directory has no records: existence is all that counts there (as before)."""
    first = load_or_split(voice_files[0], tmp_path)
    stamp = Path(first.decoder).stat().st_mtime_ns
    assert load_or_split(voice_files[0], tmp_path) == first
    assert Path(first.decoder).stat().st_mtime_ns == stamp and not (tmp_path / "derived.json").exists()


@pytest.fixture
def llm_info(llm_bundle, tmp_path):
    """(gguf path, derived dir in a tmp cache, the info JSON as first built there)."""
    gguf = llm_bundle.file(GGUF_FILE)
    derived = tmp_path / "cache" / "derived" / "smollm2-135m-instruct"
    load_model_info(gguf, derived)
    return gguf, derived, info_path(gguf, derived).read_bytes()


def _tamper_eos(path: Path) -> None:
    data = json.loads(path.read_text())
    data["eos_id"] += 1  # still parses: the old code trusted any file that did
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("damage", ["tampered", "record deleted", "record corrupt", "info deleted"])
def test_bad_llm_info_is_rebuilt_from_the_gguf(llm_info, damage, caplog):
    gguf, derived, built = llm_info
    path = info_path(gguf, derived)
    eos = json.loads(built)["eos_id"]
    stamp = path.stat().st_mtime_ns
    if damage == "tampered":
        _tamper_eos(path)
        stamp = path.stat().st_mtime_ns
    elif damage == "record deleted":  # also: a legacy file from before records existed
        (derived / "derived.json").unlink(missing_ok=True)
    elif damage == "record corrupt":
        (derived / "derived.json").write_text("{not json")
    else:
        path.unlink()
    with caplog.at_level(logging.WARNING, logger="voxcli"):
        info = load_model_info(gguf, derived)
    assert info.tokenizer.eos_id == eos
    assert path.read_bytes() == built and path.stat().st_mtime_ns != stamp  # written again
    assert (damage == "info deleted") or "rebuilding the LLM tokenizer and config" in caplog.text
    assert Cache(derived.parent.parent).check_derived(derived.name, [path]) == []


def _flip_byte_in_place(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        old = f.read(1)[0]
        f.seek(at)
        f.write(bytes([old ^ 0xFF]))


def test_damaged_or_unrecorded_llm_graph_is_rebuilt(llm_bundle, tmp_path, caplog):
    """One flipped byte in the built weights: the next load builds the graph again (same logits as before)."""
    from voxcli.runtimes.smollm.prompt import render_turn

    gguf = llm_bundle.file(GGUF_FILE)
    derived = tmp_path / "cache" / "derived" / "smollm2-135m-instruct"
    first = LocalLLM.load(gguf, derived)
    ids = first.tokenizer.encode(render_turn("user", "What is the capital of France?"))
    expected = first.logits_for(ids)
    (data,) = [p for p in derived.glob("decoder-*.onnx.data") if ".opt." not in p.name]  # not the optimized copy's
    _flip_byte_in_place(data, data.stat().st_size // 2)
    with caplog.at_level(logging.WARNING, logger="voxcli"):
        second = LocalLLM.load(gguf, derived)
    assert np.array_equal(second.logits_for(ids), expected)
    assert "rebuilding the LLM decoder graph" in caplog.text and "sha256 mismatch" in caplog.text
    assert Cache(tmp_path / "cache").derived_problems() == {}

    (derived / "derived.json").unlink(missing_ok=True)  # as built by an older voxcli: rebuilt once
    stamp = data.stat().st_mtime_ns
    LocalLLM.load(gguf, derived)
    rebuilt = data.stat().st_mtime_ns
    assert rebuilt != stamp
    LocalLLM.load(gguf, derived)
    assert data.stat().st_mtime_ns == rebuilt


def test_a_warm_voice_load_reads_no_derived_file_to_check_it(voice_files, tmp_path, hashed, monkeypatch,
                                                              settled_now):
    """Cold start (issue 15): split parts and their optimized copies are proven unchanged by their
    recorded stat stamps, not by hashing ~100 MB on every start; a part written since is hashed."""
    from voxcli.hub import cache as cache_mod

    derived = tmp_path / "cache" / "derived" / "piper-joe-medium"
    PiperVoice.load(*voice_files, derived_dir=derived, threads=1)
    del hashed[:]
    monkeypatch.setattr(cache_mod, "_verified", set())  # a new process: nothing hashed in it yet
    assert PiperVoice.load(*voice_files, derived_dir=derived, threads=1).can_stream
    assert hashed == []
    flow = derived / "zp-flow.onnx"
    flow.write_bytes(flow.read_bytes())  # same bytes, written again: hashed once, then trusted
    st = flow.stat()  # a distinct past mtime: coarse timestamps may keep the stamp
    os.utime(flow, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    assert PiperVoice.load(*voice_files, derived_dir=derived, threads=1).can_stream
    assert hashed == ["zp-flow.onnx"]
    assert PiperVoice.load(*voice_files, derived_dir=derived, threads=1).can_stream
    assert hashed == ["zp-flow.onnx"]


def test_records_without_stamps_are_hashed_once_and_doctor_hashes_all(voice_files, tmp_path, hashed, monkeypatch,
                                                                      settled_now):
    """Records of an older voxcli (size + sha256 only) are trusted after one hash, not rebuilt;
    `voxcli doctor` (derived_problems) reads every recorded file whatever its stamp."""
    from voxcli.hub import cache as cache_mod

    derived = tmp_path / "cache" / "derived" / "piper-joe-medium"
    load_or_split(voice_files[0], derived)
    manifest = derived / "derived.json"
    data = json.loads(manifest.read_text())
    for rec in data["files"].values():
        rec.pop("stamp", None)
        rec.pop("at", None)
    manifest.write_text(json.dumps(data))
    parts = {p.name: p.stat().st_mtime_ns for p in derived.glob("zp-*")}
    del hashed[:]
    monkeypatch.setattr(cache_mod, "_verified", set())  # a new process: nothing hashed yet
    load_or_split(voice_files[0], derived)
    assert sorted(hashed) == sorted(data["files"])
    assert {p.name: p.stat().st_mtime_ns for p in derived.glob("zp-*")} == parts, "not split again"
    del hashed[:]
    load_or_split(voice_files[0], derived)
    assert hashed == [], "their stamps were recorded"
    monkeypatch.setattr(cache_mod, "_verified", set())
    assert Cache(tmp_path / "cache").derived_problems() == {} and sorted(hashed) == sorted(data["files"])
