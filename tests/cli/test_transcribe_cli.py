"""`voxcli transcribe` end to end on real speech: offline, --live, stdin PCM, JSON, bad input, TTS round trip."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from tests.asr_checks import BECKETT_REF, assert_stable_never_shrinks, final_text
from voxcli.cli.app import app
from voxcli.bench.wer import normalize_text, word_errors
from voxcli.events import Caption

pytestmark = pytest.mark.usefixtures("real_cache")


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate (the engine's `wer()` was dead code outside tests and is gone)."""
    return word_errors(reference, hypothesis).rate


def invoke(*args: str, input: bytes | str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def captions_of(stdout: str) -> tuple[list[Caption], dict]:
    lines = [json.loads(x) for x in stdout.splitlines() if x.strip()]
    caps = [Caption(**{k: v for k, v in d.items() if k != "event"}) for d in lines if d["event"] == "caption"]
    assert lines[-1]["event"] == "asr_stats"
    return caps, lines[-1]


def test_offline_file_prints_one_line_per_utterance(speech_samples) -> None:
    r = invoke("transcribe", str(speech_samples["beckett"]))
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 6 and wer(BECKETT_REF, " ".join(lines)) <= 0.1
    assert "utterance" in r.stderr and "Ever" not in r.stderr  # human summary on stderr only


def test_live_file_unpaced_json_stream(speech_samples) -> None:
    r = invoke("transcribe", str(speech_samples["beckett"]), "--live", "--speed", "0", "--json")
    assert r.exit_code == 0, r.stderr
    caps, stats = captions_of(r.stdout)
    assert_stable_never_shrinks(caps)
    assert wer(BECKETT_REF, final_text(caps)) <= 0.1
    assert "better" in final_text(caps).lower().split()[-1]
    assert stats["utterances"] == 6 and stats["audio_s"] > 9.9


def test_live_file_paced_plain_view(speech_samples, tmp_path) -> None:
    wav = tmp_path / "short.wav"
    a, sr = sf.read(speech_samples["beckett"], dtype="float32")
    sf.write(wav, a[: int(3.6 * sr)], sr)  # "Ever tried. Ever failed."
    t0 = time.monotonic()
    r = invoke("transcribe", str(wav), "--live", "--speed", "2")
    assert r.exit_code == 0, r.stderr
    assert time.monotonic() - t0 >= 1.5  # paced: 3.6 s of audio at 2x
    assert normalize_text(r.stdout) == ["ever", "tried", "ever", "failed"]
    assert "ever tried" in r.stderr.lower()  # off a TTY the stable words are appended to stderr


def _pcm(path: Path, rate: int, fmt: str) -> bytes:
    a, sr = sf.read(path, dtype="float32")
    if sr != rate:
        from voxcli.audio.pcm import resample

        a = resample(a, sr, rate)
    return (a * 32767).astype("<i2").tobytes() if fmt == "s16le" else a.astype("<f4").tobytes()


def test_stdin_pcm_with_odd_byte_count(speech_samples) -> None:
    data = _pcm(speech_samples["beckett"], 16000, "s16le") + b"\x07"
    r = invoke("transcribe", "-", input=data)
    assert r.exit_code == 0, r.stderr
    assert wer(BECKETT_REF, r.stdout) <= 0.1
    assert "ignored 1 trailing byte" in r.stderr


def test_stdin_f32le_at_another_rate_with_nan(speech_samples) -> None:
    a = np.frombuffer(_pcm(speech_samples["beckett"], 22050, "f32le"), "<f4").copy()
    a[1000:1100] = np.nan  # inside the leading silence
    r = invoke("transcribe", "-", "--rate", "22050", "--format", "f32le", input=a.tobytes())
    assert r.exit_code == 0, r.stderr
    assert wer(BECKETT_REF, r.stdout) <= 0.15
    assert r.stderr.count("NaN/inf") == 1


def test_silence_gives_an_empty_transcript_and_exit_0(tmp_path) -> None:
    wav = tmp_path / "silence.wav"
    sf.write(wav, np.zeros(16000 * 2, np.float32), 16000)
    r = invoke("transcribe", str(wav))
    assert r.exit_code == 0 and r.stdout == ""
    r = invoke("transcribe", "-", input=b"\x00\x00" * 16000)
    assert r.exit_code == 0 and r.stdout == ""


@pytest.mark.parametrize("content", [b"not audio at all", b""])
def test_corrupt_file_is_exit_2_naming_the_file(tmp_path, content) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(content)
    r = invoke("transcribe", str(bad))
    assert r.exit_code == 2
    assert r.stderr.startswith(f"voxcli: error: {bad}: cannot read audio") and "Traceback" not in r.stderr
    r = invoke("transcribe", str(tmp_path / "missing.flac"), "--live")
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_bad_flags_are_usage_errors() -> None:
    r = invoke("transcribe", "-", "--format", "u8", input=b"")
    assert r.exit_code == 2 and "unknown PCM format" in r.stderr


def test_ctrl_c_prints_what_was_committed_and_exits_130(speech_samples) -> None:
    p = subprocess.Popen([sys.executable, "-m", "voxcli", "transcribe", str(speech_samples["two_cities"]), "--live"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    time.sleep(12)  # model load + ~9 s of real-time audio: the first utterance is committed
    p.send_signal(signal.SIGINT)
    out, errb = p.communicate(timeout=30)
    assert p.returncode == 130, errb.decode()
    assert "best of times" in out.decode().lower()
    assert "Traceback" not in errb.decode()


# ---- round trip through our own TTS --------------------------------------------------------

SENTENCES = [
    "The weather is nice today.",
    "Please open the window in the kitchen.",
    "I would like a cup of coffee with milk.",
    "The train leaves the station at nine.",
    "She bought three apples and a loaf of bread.",
    "Can you help me find my keys?",
    "The meeting has been moved to Friday afternoon.",
    "My brother plays the guitar every evening.",
    "We walked along the river until sunset.",
    "The children are playing in the garden.",
    "Turn left at the next traffic light.",
    "This book is about the history of science.",
    "He forgot to close the door behind him.",
    "The music was too loud for the small room.",
    "Our flight was delayed by two hours.",
    "Remember to water the plants on Monday.",
    "The doctor said I should get more sleep.",
    "They built a new bridge across the valley.",
    "Dinner will be ready in ten minutes.",
    "The cat is sleeping on the warm blanket.",
    "Write your name at the top of the page.",
    "Thank you very much for your patience.",
]


def test_round_trip_speak_then_transcribe(tmp_path) -> None:
    wav = tmp_path / "speech.wav"
    r = invoke("speak", " ".join(SENTENCES), "-o", str(wav))
    assert r.exit_code == 0, r.stderr
    r = invoke("transcribe", str(wav))
    assert r.exit_code == 0, r.stderr
    errors = word_errors(" ".join(SENTENCES), r.stdout)
    assert errors.ref_words >= 150
    assert errors.rate <= 0.10, (errors, r.stdout)


@pytest.mark.parametrize("live", [False, True])
def test_quiet_prints_only_the_transcript(speech_samples, live: bool) -> None:
    args = ["transcribe", str(speech_samples["beckett"]), "--quiet"] + (["--live", "--speed", "0"] if live else [])
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    assert wer(BECKETT_REF, r.stdout) <= 0.2, r.stdout


def test_a_view_that_prints_finals_itself_keeps_them_off_a_terminal_stdout(speech_samples, monkeypatch) -> None:
    """transcribe asked `type(view).__name__ == "RichCaptionView"`; now any view says so via `prints_finals`."""
    import io
    import threading

    import voxcli.cli.views.asr as views
    from voxcli.asr.open_streamer import open_asr_streamer
    from voxcli.audio.files import iter_audio
    from voxcli.cli.transcribe import file_chunks, run_stream

    class EchoingView:  # any name: what counts is the attribute
        prints_finals = True

        def __init__(self) -> None:
            self.finals: list[str] = []

        def update(self, cap, status) -> None:
            if cap.is_final and cap.stable:
                self.finals.append(cap.stable)

        def close(self) -> None:
            pass

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    view, out = EchoingView(), Tty()
    monkeypatch.setattr(views, "caption_view", lambda _tty: view)
    monkeypatch.setattr(sys, "stdout", out)
    def audio():  # noqa: ANN202 - file_chunks takes the decoded blocks of a file
        return iter_audio(speech_samples["beckett"], 16000, block_s=0.1)

    stop = threading.Event()
    run_stream(file_chunks(audio(), 0, stop), open_asr_streamer(None, lockstep=True), False, "beckett", stop, quiet=True)
    assert out.getvalue().count("\n") == 6  # --quiet: stdout is the transcript whatever the view
    view2, out2 = EchoingView(), Tty()
    monkeypatch.setattr(views, "caption_view", lambda _tty: view2)
    monkeypatch.setattr(sys, "stdout", out2)
    run_stream(file_chunks(audio(), 0, stop), open_asr_streamer(None, lockstep=True), False, "beckett", stop)
    assert len(view2.finals) == 6 and out2.getvalue() == ""  # the view printed them; stdout would repeat them


def _batch_tree(root: Path, speech_samples) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "beckett.wav").write_bytes(speech_samples["beckett"].read_bytes())
    (root / "sub" / "beckett2.flac").write_bytes(b"fLaC not really")  # corrupt: recorded, the batch goes on
    return root


def test_batch_into_out_dir_lists_failures_and_exits_1(speech_samples, tmp_path: Path) -> None:
    tree = _batch_tree(tmp_path / "in", speech_samples)
    out = tmp_path / "out"
    r = invoke("transcribe", str(tree), "--out-dir", str(out), "--format", "srt", "--jobs", "1")
    assert r.exit_code == 1 and r.stdout == ""
    assert "FAILED" in r.stderr and "beckett2.flac" in r.stderr and "1 of 2 item(s) failed" in r.stderr
    assert "2/2 files" in r.stderr and "audio-s/s" in r.stderr
    srt = (out / "beckett.srt").read_text()
    assert srt.startswith("1\n00:00:00,") and " --> " in srt
    words = " ".join(x for x in srt.splitlines() if x and "-->" not in x and not x.isdigit())
    assert wer(BECKETT_REF, words) < 0.35
    assert not (out / "sub" / "beckett2.srt").exists()


def test_batch_from_a_list_on_stdin_with_json_events(speech_samples, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = invoke("transcribe", "--from", "-", "--out-dir", str(out), "--json", "--jobs", "1",
               input=f"# one file\n{speech_samples['beckett']}\n")
    assert r.exit_code == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert events[0]["event"] == "file" and events[0]["status"] == "done" and events[0]["audio_s"] > 9
    assert events[-1]["event"] == "progress" and events[-1]["done"] == 1 and events[-1]["throughput"] > 0
    assert wer(BECKETT_REF, (out / "beckett.txt").read_text()) < 0.35


@pytest.mark.parametrize("args, message", [
    (["a.wav", "b.wav"], "many inputs need --out-dir"),
    (["--out-dir", "o", "--ship-audio", "x.wav"], "--ship-audio needs --ray"),
    (["x.wav", "--jobs", "2"], "apply to --out-dir batches"),
    (["--out-dir", "o", "--format", "docx", "x.wav"], "unknown format"),
])
def test_batch_usage_errors(args: list[str], message: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("a.wav", "b.wav", "x.wav"):
        (tmp_path / name).write_bytes(b"")
    r = invoke("transcribe", *args)
    assert r.exit_code == 2 and message in r.stderr


def test_plain_caption_view_shows_a_corrected_final_whole() -> None:
    """A final that re-spells shown words (H-asr: finals are unforced decodes) is not lost on stderr."""
    import io

    from voxcli.cli.views.asr import PlainCaptionView, StreamStatus

    buf, st = io.StringIO(), StreamStatus(0.0, 0.0, 0.0)
    view = PlainCaptionView(buf)
    view.update(Caption("times It was", "", False, 1.0, 1.0, 0), st)
    view.update(Caption("times. It was the age.", "", True, 2.0, 2.0, 0), st)
    view.update(Caption("Next", "", False, 3.0, 3.0, 1), st)
    view.update(Caption("Next one.", "", True, 3.5, 3.5, 1), st)
    assert buf.getvalue() == "times It was\ntimes. It was the age.\nNext one.\n"
