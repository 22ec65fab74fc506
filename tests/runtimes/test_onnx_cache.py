"""The optimized-graph cache of the one session policy (voxcli.runtimes.onnx).

Built once and reused; a new key (onnxruntime version, changed source graph)
is a new file (the least recently used beyond two per name go); a damaged copy (truncated, one flipped
byte with its mtime put back, a lost record) is rebuilt with a warning, never loaded and never a
crash; an unchanged copy is loaded without being read to check it (its recorded stat stamp);
a cache dir that cannot be written, or keeps no records, means a plain session. Every
session, cached or not, computes the same outputs as a plain one.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from voxcli.runtimes import onnx as policy
from voxcli.runtimes.onnx import cache_dir_for, session

LEVEL_CACHED = "GraphOptimizationLevel.ORT_DISABLE_ALL"
LEVEL_BUILT = "GraphOptimizationLevel.ORT_ENABLE_ALL"


@pytest.fixture
def model(vad_bundle, tmp_path: Path) -> Path:
    """A private copy of the Silero graph (small: each build takes well under a second)."""
    dst = tmp_path / "src" / "silero_vad.onnx"
    dst.parent.mkdir()
    shutil.copyfile(vad_bundle.file("silero_vad.onnx"), dst)
    return dst


def _cache_dir(tmp_path: Path) -> Path:
    """A directory that keeps records (`<root>/derived/<name>`): only those cache optimized graphs."""
    return tmp_path / "derived" / "ort-test"


def _cached(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.opt.onnx"))


def _level(sess) -> str:
    return str(sess.get_session_options().graph_optimization_level)


def _probs(sess) -> np.ndarray:
    """Speech probability of a fixed frame of a tone (the same input for every session compared)."""
    t = np.arange(576, dtype=np.float32) / 16000
    x = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)[None, :]
    state = np.zeros((2, 1, 128), np.float32)
    out, _ = sess.run(None, {"input": x, "state": state, "sr": np.array(16000, np.int64)})
    return np.asarray(out)


def test_built_once_then_reused_with_the_same_outputs(model: Path, tmp_path: Path) -> None:
    cache = _cache_dir(tmp_path)
    plain = session(model, cache=False)
    first = session(model, cache_dir=cache)
    files = _cached(cache)
    assert len(files) == 1 and files[0].name in json.loads((cache / "derived.json").read_text())["files"]
    assert _level(first) == LEVEL_BUILT
    inode = files[0].stat().st_ino
    second = session(model, cache_dir=cache)
    assert _level(second) == LEVEL_CACHED, "the cached graph is loaded, not optimized again"
    assert _cached(cache) == files and files[0].stat().st_ino == inode, "not rewritten"
    np.testing.assert_allclose(_probs(second), _probs(plain), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_probs(first), _probs(plain), rtol=1e-5, atol=1e-6)


def test_a_new_onnxruntime_version_is_a_new_file(model: Path, tmp_path: Path, monkeypatch) -> None:
    import onnxruntime

    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    old = _cached(cache)
    monkeypatch.setattr(onnxruntime, "__version__", "99.0.0")
    assert _level(session(model, cache_dir=cache)) == LEVEL_BUILT
    new = _cached(cache)
    assert len(new) == 2 and set(old) < set(new), "a new file; the old one stays until KEEP_PER_NAME is passed"


def test_a_changed_source_graph_is_a_new_file(model: Path, tmp_path: Path) -> None:
    import onnx

    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    old = _cached(cache)
    m = onnx.load(str(model))
    m.producer_name = "changed"  # same computation, different bytes: the source hash changes
    onnx.save(m, str(model))
    assert _level(session(model, cache_dir=cache)) == LEVEL_BUILT
    assert len(_cached(cache)) == 2 and set(old) < set(_cached(cache))


def test_one_file_per_graph_content_and_at_most_two_per_name(model: Path, tmp_path: Path, monkeypatch) -> None:
    """The same graph from another directory (a test's temp dir) is the same file: nothing grows per path."""
    import onnxruntime

    cache = _cache_dir(tmp_path)
    copy = tmp_path / "elsewhere" / model.name
    copy.parent.mkdir()
    shutil.copyfile(model, copy)
    session(model, cache_dir=cache)
    assert _level(session(copy, cache_dir=cache)) == LEVEL_CACHED and len(_cached(cache)) == 1
    for version in ("97.0", "98.0", "99.0"):  # three more keys for the same name: the oldest ones go
        monkeypatch.setattr(onnxruntime, "__version__", version)
        session(model, cache_dir=cache)
    assert len(_cached(cache)) == policy.KEEP_PER_NAME
    assert _level(session(model, cache_dir=cache)) == LEVEL_CACHED, "the newest key is kept"


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path) -> None:
    """One byte flipped in place, size and mtime kept (what bit rot looks like).

    Deterministic on any kernel: a stamp is kept only if taken RACY_WINDOW_S after the build's
    write, so either the file is hashed, or this write's ctime differs from the recorded one.
    """
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(st.st_size // 2)
        b = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([b[0] ^ 0x55]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _flip_weights(path: Path) -> None:
    """One byte flipped in the weights file (`<file>.data`, mapped by onnxruntime), mtime kept."""
    weights = path.with_name(path.name + ".data")
    assert weights.is_file(), "the optimized graph keeps its weights beside it"
    _flip(weights)


def _garbage_record(path: Path) -> None:
    (path.parent / "derived.json").write_text("{not json")


def _garbage_file(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes(b"\x00garbage" * (size // 8) + b"\x00" * (size % 8))  # same size: onnxruntime must refuse it


@pytest.mark.parametrize("damage", [_truncate, _flip, _flip_weights, _garbage_record, _garbage_file])
def test_a_damaged_cached_file_is_rebuilt_not_loaded(model: Path, tmp_path: Path, damage, caplog) -> None:
    cache = _cache_dir(tmp_path)
    reference = _probs(session(model, cache_dir=cache))
    damage(_cached(cache)[0])
    with caplog.at_level(logging.WARNING, logger="voxcli.runtimes.onnx"):
        rebuilt = session(model, cache_dir=cache)
    assert "rebuilding optimized graph" in caplog.text
    assert _level(rebuilt) == LEVEL_BUILT
    np.testing.assert_allclose(_probs(rebuilt), reference, rtol=1e-5, atol=1e-6)
    assert _level(session(model, cache_dir=cache)) == LEVEL_CACHED, "the rebuilt file is good again"


def test_an_unwritable_cache_dir_means_a_plain_session(model: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    sess = session(model, cache_dir=blocker / "derived" / "x")  # mkdir fails (root ignores chmod, this does not)
    assert _level(sess) == LEVEL_BUILT and not (blocker / "derived").exists()
    np.testing.assert_allclose(_probs(sess), _probs(session(model, cache=False)), rtol=1e-5, atol=1e-6)


def test_a_directory_that_keeps_no_records_optimizes_in_memory(model: Path, tmp_path: Path) -> None:
    """A damaged copy could not be found there: nothing is cached (as with VOXCLI_NO_GRAPH_CACHE)."""
    assert _level(session(model, cache_dir=tmp_path / "plain")) == LEVEL_BUILT
    assert _level(session(model, cache_dir=tmp_path / "plain")) == LEVEL_BUILT
    assert not (tmp_path / "plain").exists()


def _new_process(monkeypatch) -> None:
    """Forget what this process hashed already (the hub's per-process memo): only records count."""
    from voxcli.hub import cache as cache_mod

    monkeypatch.setattr(cache_mod, "_verified", set())


def test_an_unchanged_copy_is_loaded_without_reading_it_to_check_it(model: Path, tmp_path: Path, hashed,
                                                                     monkeypatch, settled_now) -> None:
    """Cold start (issue 15): the recorded stat stamps prove the source and the copy unchanged."""
    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    del hashed[:]
    _new_process(monkeypatch)
    assert _level(session(model, cache_dir=cache)) == LEVEL_CACHED
    assert hashed == []


def test_a_touched_copy_is_hashed_once_then_trusted_again(model: Path, tmp_path: Path, hashed, monkeypatch,
                                                          settled_now) -> None:
    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    (copy,) = _cached(cache)
    st = copy.stat()  # same bytes, new stamp (a restored backup); a distinct past mtime (any kernel)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    del hashed[:]
    assert _level(session(model, cache_dir=cache)) == LEVEL_CACHED, "intact: not rebuilt"
    assert hashed == [copy.name]
    del hashed[:]
    _new_process(monkeypatch)
    assert _level(session(model, cache_dir=cache)) == LEVEL_CACHED and hashed == [], "its new stamp was recorded"


def test_where_optimized_graphs_go(tmp_path: Path) -> None:
    derived = tmp_path / "derived" / "piper-x"
    assert cache_dir_for(derived / "front.onnx") == derived, "split graphs: next to them"
    assert cache_dir_for(tmp_path / "pkg" / "model.ort") is None, "ORT-format files are optimized already"
    shared = cache_dir_for(tmp_path / "pkg" / "silero_vad.onnx")
    assert shared is not None and shared.parent.name == "derived" and shared.name == policy.SHARED_DIR


def test_the_split_voice_loads_its_optimized_parts_from_its_derived_dir(voice_bundle, tmp_path: Path) -> None:
    from voxcli.runtimes.piper.voice import PiperVoice

    derived = tmp_path / "derived" / "piper-joe-medium"
    onnx_path = voice_bundle.file("en_US-joe-medium.onnx")
    first = PiperVoice.load(onnx_path, derived_dir=derived, threads=1)
    built = _cached(derived)
    assert len(built) >= 2, "the split parts (front, decoder, ...) each have their optimized copy"
    again = PiperVoice.load(onnx_path, derived_dir=derived, threads=1)
    assert {_level(s) for s in again.sessions()} == {LEVEL_CACHED}
    assert _cached(derived) == built and first.can_stream and again.can_stream


def test_a_split_is_probed_once_then_its_verdict_is_reused(voice_bundle, tmp_path: Path, monkeypatch) -> None:
    """Cold start: the probe's verdict is kept with the split; a changed split is probed again."""
    from voxcli.runtimes.piper.voice import PiperVoice

    calls: list[str] = []
    real_probe = PiperVoice._probe
    monkeypatch.setattr(PiperVoice, "_probe", lambda self: calls.append("probe") or real_probe(self))
    derived = tmp_path / "derived" / "piper-joe-medium"
    onnx_path = voice_bundle.file("en_US-joe-medium.onnx")
    assert PiperVoice.load(onnx_path, derived_dir=derived, threads=1).can_stream
    assert PiperVoice.load(onnx_path, derived_dir=derived, threads=1).can_stream
    assert calls == ["probe"]
    (derived / "probe.json").write_text('{"key": "another split", "ok": false}')
    assert PiperVoice.load(onnx_path, derived_dir=derived, threads=1).can_stream, "a stale verdict is not used"
    assert calls == ["probe", "probe"]


def test_external_data_is_part_of_the_key(model: Path, tmp_path: Path) -> None:
    """A graph whose weights live in `x.onnx.data`: new weights with the same graph file are a new key."""
    import onnx

    from voxcli.runtimes.onnx import cache_key, source_files

    m = onnx.load(str(model))
    ext = tmp_path / "ext" / "vad.onnx"
    ext.parent.mkdir()
    onnx.save(m, str(ext), save_as_external_data=True, all_tensors_to_one_file=True, location="vad.onnx.data",
              size_threshold=0, convert_attribute=True)  # Silero keeps its weights in Constant nodes
    # (onnxruntime cannot load this file: shape inference needs those constants inline; the key is the point)
    cache = _cache_dir(tmp_path)
    before = cache_key(ext, cache)
    assert source_files(ext) == [ext, ext.with_name("vad.onnx.data")]
    assert cache_key(ext, cache) == before, "unchanged files: the same key (from the stat memo)"
    data = ext.with_name("vad.onnx.data")
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0x01
    data.write_bytes(bytes(raw))
    assert cache_key(ext, cache) != before


def test_a_killed_builds_temp_file_is_removed_by_the_next_build(model: Path, tmp_path: Path, monkeypatch) -> None:
    import onnxruntime

    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    stale = cache / f".{_cached(cache)[0].name}.abc123.tmp"
    stale.write_bytes(b"half a graph")
    os.utime(stale, (1, 1))  # written long ago
    monkeypatch.setattr(onnxruntime, "__version__", "99.0.0")
    session(model, cache_dir=cache)
    assert not stale.exists()


def test_a_stamp_taken_within_the_racy_window_is_not_trusted(model: Path, tmp_path: Path, hashed,
                                                             monkeypatch) -> None:
    """A same-size write in the same timestamp tick keeps the stamp: a stamp that young means hashing."""
    from voxcli.hub import cache as cache_mod

    monkeypatch.setattr(cache_mod, "RACY_WINDOW_S", 10.0**9)  # every stamp is "just written"
    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    (copy,) = _cached(cache)
    assert "stamp" not in json.loads((cache / "derived.json").read_text())["files"][copy.name]
    del hashed[:]
    _new_process(monkeypatch)
    assert _level(session(model, cache_dir=cache)) == LEVEL_CACHED
    assert copy.name in hashed, "hashed, not trusted by its stamp"


def test_a_graph_whose_recorded_weights_are_gone_is_rebuilt(model: Path, tmp_path: Path, caplog) -> None:
    cache = _cache_dir(tmp_path)
    reference = _probs(session(model, cache_dir=cache))
    (copy,) = _cached(cache)
    weights = copy.with_name(copy.name + ".data")
    assert weights.name in json.loads((cache / "derived.json").read_text())["files"]
    weights.unlink()
    with caplog.at_level(logging.WARNING, logger="voxcli.runtimes.onnx"):
        rebuilt = session(model, cache_dir=cache)
    assert f"{weights.name} is missing" in caplog.text, "found by the records, not by onnxruntime failing"
    assert _level(rebuilt) == LEVEL_BUILT and weights.is_file()
    np.testing.assert_allclose(_probs(rebuilt), reference, rtol=1e-5, atol=1e-6)
    assert [p.name for p in cache.iterdir() if p.name.endswith(".tmp")] == [], "the build dir is removed"


def test_orphaned_weights_and_markers_are_pruned_when_stale(model: Path, tmp_path: Path, monkeypatch) -> None:
    """A killed build (weights moved in, graph not) or a crash mid-prune leaves them; a live build's stay."""
    import onnxruntime

    cache = _cache_dir(tmp_path)
    session(model, cache_dir=cache)
    (kept,) = _cached(cache)
    stale = [cache / "silero_vad.0123abcd.opt.onnx.data", cache / "silero_vad.0123abcd.opt.onnx.used"]
    fresh = cache / "silero_vad.4567cdef.opt.onnx.data"
    for p in (*stale, fresh):
        p.write_bytes(b"left over")
    for p in stale:
        os.utime(p, (1, 1))  # written long ago
    monkeypatch.setattr(onnxruntime, "__version__", "99.0.0")
    session(model, cache_dir=cache)
    assert not any(p.exists() for p in stale)
    assert fresh.exists(), "younger than STALE_TMP_S: maybe a build in progress"
    assert kept.with_name(kept.name + ".data").exists() and kept.with_name(kept.name + ".used").exists()
