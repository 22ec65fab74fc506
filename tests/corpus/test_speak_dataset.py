"""`speak --from` data sets on the real voice: one WAV per line, LJSpeech metadata.csv, resume, --jobs."""
from __future__ import annotations

from pathlib import Path

import soundfile as sf

from voxcli.corpus.batch import results_only
from voxcli.corpus.tts_job import speak_events

LINES = ["Hello there, this is line one.", "Dr. Smith paid $5 at 10:30.", "The third | line."]


def _run(lines, out, **kw):
    return {r.key: r for r in results_only(speak_events(lines, out, **kw))}


def test_dataset_layout_and_resume(tmp_path: Path, real_cache):
    out = tmp_path / "ds"
    res = _run(LINES, out, jobs=1)
    assert {k: r.status for k, r in res.items()} == {f"wavs/line-0000{i}.wav": "done" for i in (1, 2, 3)}
    assert (out / "metadata.csv").read_text().splitlines() == [
        "line-00001|Hello there, this is line one.|Hello there, this is line one.",
        "line-00002|Dr. Smith paid $5 at 10:30.|Doctor Smith paid five dollars at ten thirty.",
        "line-00003|The third line.|The third line.",
    ]
    for i in (1, 2, 3):
        info = sf.info(str(out / "wavs" / f"line-0000{i}.wav"))
        assert info.samplerate == 22050 and info.channels == 1 and info.duration > 0.8
    # Re-run with line 2 changed: 1 and 3 are skipped, 2 is redone, metadata.csv follows.
    changed = [LINES[0], "Something else entirely.", LINES[2]]
    again = _run(changed, out, jobs=1)
    assert [again[f"wavs/line-0000{i}.wav"].status for i in (1, 2, 3)] == ["skipped", "done", "skipped"]
    assert (out / "metadata.csv").read_text().splitlines()[1] == \
        "line-00002|Something else entirely.|Something else entirely."


def test_jobs_2_writes_the_same_lines_and_a_bad_line_fails_alone(tmp_path: Path, real_cache):
    """Not byte-identical: the Piper graph samples noise (RandomNormalLike, unseeded), even between two --jobs 1 runs."""
    lines = LINES + ["🙂 🙂"]  # nothing speakable: that line fails, the others are written
    one = _run(lines, tmp_path / "one", jobs=1)
    two = _run(lines, tmp_path / "two", jobs=2)
    assert one["wavs/line-00004.wav"].status == two["wavs/line-00004.wav"].status == "failed"
    assert "nothing speakable" in (two["wavs/line-00004.wav"].error or "")
    for i in (1, 2, 3):
        name = f"wavs/line-0000{i}.wav"
        d1, d2 = sf.info(str(tmp_path / "one" / name)).duration, sf.info(str(tmp_path / "two" / name)).duration
        assert 0.75 < d1 / d2 < 1.33
    assert (tmp_path / "one" / "metadata.csv").read_text() == (tmp_path / "two" / "metadata.csv").read_text()
    assert len((tmp_path / "two" / "metadata.csv").read_text().splitlines()) == 3
