"""Which files a batch reads and where each result goes (pure: no model)."""
from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from voxcli.corpus.formats import render
from voxcli.corpus.inputs import check_unique, expand, output_rel, read_list
from voxcli.asr.batch import Utterance
from voxcli.errors import UsageError


def _touch(p: Path) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"x")
    return p


def test_directories_recurse_by_suffix_and_keep_the_layout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("d/x.wav", "d/sub/y.FLAC", "d/sub/deeper/z.mp3", "d/readme.txt", "d/.hidden.wav", "one.ogg"):
        _touch(tmp_path / name)
    got = [(s.path.as_posix(), s.rel.as_posix()) for s in expand(["d", "one.ogg"])]
    assert got == [("d/x.wav", "x.wav"), ("d/sub/y.FLAC", "sub/y.FLAC"), ("d/sub/deeper/z.mp3", "sub/deeper/z.mp3"),
                   ("one.ogg", "one.ogg")]


def test_globs_are_relative_to_their_literal_prefix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("g/a/1.wav", "g/b/2.wav", "g/b/3.txt"):
        _touch(tmp_path / name)
    assert [s.rel.as_posix() for s in expand(["g/**/*.wav"])] == ["a/1.wav", "b/2.wav"]
    with pytest.raises(UsageError, match="no file matches"):
        expand(["g/**/*.opus"])
    with pytest.raises(UsageError, match="no such file"):
        expand(["missing.wav"])


def test_absolute_or_parent_paths_keep_only_their_name(tmp_path):
    p = _touch(tmp_path / "deep" / "x.wav")
    assert expand([str(p)])[0].rel == PurePath("x.wav")


def test_list_file_skips_blanks_and_comments(tmp_path):
    lst = tmp_path / "list.txt"
    lst.write_text("a.wav\n\n# a comment\n  b.wav  \n")
    assert read_list(str(lst)) == ["a.wav", "b.wav"]
    with pytest.raises(UsageError, match="cannot read the list"):
        read_list(str(tmp_path / "nope.txt"))


def test_two_inputs_for_one_output_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path / "x.wav")
    _touch(tmp_path / "x.flac")
    srcs = expand(["x.wav", "x.flac"])
    with pytest.raises(UsageError, match="would both write x.txt"):
        check_unique([(output_rel(s, ".txt"), s.path) for s in srcs])


def test_subtitle_formats():
    utts = [Utterance("Ever tried.", 0.152, 1.416), Utterance("Ever failed.", 3661.5, 3663.0)]
    assert render("srt", utts, {}) == ("1\n00:00:00,152 --> 00:00:01,416\nEver tried.\n\n"
                                       "2\n01:01:01,500 --> 01:01:03,000\nEver failed.\n\n")
    assert render("vtt", utts, {}).startswith("WEBVTT\n\n00:00:00.152 --> 00:00:01.416\nEver tried.\n\n")
    assert render("txt", utts, {}) == "Ever tried.\nEver failed.\n"
    assert '"start": 3661.5' in render("json", utts, {"model": "m"})
