"""`voxcli speak` end to end on the real voice: errors, JSON lines, files, raw pipes, stdin streaming, Ctrl-C."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from voxcli.cli.app import app

TEXT = "Hello there. This is voxcli, speaking while it thinks."


def invoke(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def voxcli_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "voxcli", *args]


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_a_usage_error(text: str, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    result = invoke("speak", text, "-o", str(out))
    assert result.exit_code == 2
    assert result.stderr.startswith("voxcli: error: no text to speak")
    assert "Traceback" not in result.stderr and not out.exists()


def test_bad_flags_are_usage_errors(tmp_path: Path) -> None:
    assert invoke("speak", "Hi.", "--raw", "--format", "mp3").exit_code == 2
    assert invoke("speak", "Hi.", "--raw", "--rate", "5").exit_code == 2
    result = invoke("speak", "Hi.", "-o", str(tmp_path / "x.mp3"))
    assert result.exit_code == 2 and ".wav or .flac" in result.stderr


def test_unknown_voice_lists_the_voices(real_cache: Path) -> None:
    result = invoke("speak", "Hi.", "--voice", "no-such-voice", "--raw")
    assert result.exit_code == 3
    assert "no-such-voice" in result.stderr
    assert "piper-joe-medium" in result.stderr, "the message lists the available voices"
    assert result.stdout == ""


def test_json_lines_and_an_atomic_wav(real_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "hello.wav"
    result = invoke("speak", TEXT, "-o", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    events = [e for line in result.stdout.splitlines() if (e := json.loads(line))["event"] != "word"]  # test_speak_words
    assert events[-1]["kind"] == "final" and events[-1]["stats"]["chunks"] == len(events) - 1
    assert all(e["event"] == "chunk" and e["samples"] > 0 for e in events[:-1])
    assert events[0]["text"].startswith("Hello")
    audio, rate = sf.read(out, dtype="float32")
    assert rate == 22050
    assert audio.size == sum(e["samples"] for e in events)
    assert np.sqrt(np.mean(audio ** 2)) > 0.02
    assert [p.name for p in tmp_path.iterdir()] == ["hello.wav"], "no temp files left"


def test_human_table_and_summary_on_stderr_only(real_cache: Path, tmp_path: Path) -> None:
    result = invoke("speak", TEXT, "-o", str(tmp_path / "a.flac"))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "TTFA" in result.stderr and "RTF" in result.stderr and "(stream)" in result.stderr
    assert "Hello there." in result.stderr
    quiet = invoke("speak", "Quiet please.", "-o", str(tmp_path / "b.wav"), "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""
    assert sf.info(str(tmp_path / "a.flac")).format == "FLAC"


def test_no_stream_is_one_chunk(real_cache: Path, tmp_path: Path) -> None:
    result = invoke("speak", TEXT, "--no-stream", "-o", str(tmp_path / "n.wav"), "--json")
    events = [e for line in result.stdout.splitlines() if (e := json.loads(line))["event"] != "word"]
    assert [e["kind"] for e in events] == ["audio", "final"]
    assert events[-1]["stats"]["ttfa_s"] == pytest.approx(events[0]["t_emit"])


def test_stdin_text_and_odd_characters(real_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.wav"
    result = invoke("speak", "-", "-o", str(out), input="😀 <b>Markup</b> and \x07control\x00 chars.\nSecond line!")
    assert result.exit_code == 0, result.stderr
    assert sf.info(str(out)).frames > 22050
    empty = invoke("speak", "-", "-o", str(tmp_path / "e.wav"), input="  \n ")
    assert empty.exit_code == 2 and not (tmp_path / "e.wav").exists()


def test_raw_rate_and_format_with_json_on_stderr(real_cache: Path) -> None:
    proc = subprocess.run(voxcli_cmd("speak", TEXT, "--raw", "--format", "f32le", "--rate", "16000", "--json"),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    events = [json.loads(line) for line in proc.stderr.decode().splitlines() if line.startswith("{")]
    audio_s = events[-1]["stats"]["audio_s"]
    pcm = np.frombuffer(proc.stdout, dtype="<f4")
    assert pcm.size / 16000 == pytest.approx(audio_s, abs=0.02), "only PCM on stdout, resampled to 16 kHz"
    assert np.abs(pcm).max() > 0.1


def test_raw_into_a_closed_pipe_ends_quietly(real_cache: Path) -> None:
    cmd = " ".join(voxcli_cmd("speak", f"'{TEXT} {TEXT}'", "--raw")) + " | head -c 1000 | wc -c"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1000"
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr.lower()


def _read_some(stream, out: list[bytes]) -> None:  # type: ignore[no-untyped-def]
    while data := os.read(stream.fileno(), 65536):
        out.append(data)


def test_stdin_streams_audio_before_the_text_ends(real_cache: Path) -> None:
    proc = subprocess.Popen(voxcli_cmd("speak", "-", "--raw", "--quiet"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got: list[bytes] = []
    reader = threading.Thread(target=_read_some, args=(proc.stdout, got), daemon=True)
    reader.start()
    assert proc.stdin is not None
    proc.stdin.write("Hello there, my friend".encode())  # no newline, pipe kept open
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not got and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert got, "audio for the first clause arrived while stdin was still open"
    # A multi-byte character split across writes must decode intact.
    proc.stdin.write(" and caf\xc3".encode("latin-1"))
    proc.stdin.flush()
    time.sleep(0.2)
    proc.stdin.write("\xa9 owners. Bye.".encode("latin-1"))
    proc.stdin.close()
    assert proc.wait(120) == 0, proc.stderr.read().decode()  # type: ignore[union-attr]
    reader.join(5)
    assert sum(len(b) for b in got) > 22050 * 2  # more than a second of s16le audio


def test_ctrl_c_exits_130_and_leaves_no_file(real_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "long.wav"
    long_text = "This is a long text that keeps the synthesizer busy for a while. " * 60
    proc = subprocess.Popen(voxcli_cmd("speak", long_text, "-o", str(out), "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # audio is being produced
    assert json.loads(first)["kind"] == "audio"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130
    assert list(tmp_path.iterdir()) == [], "no half-written output, no temp file"
    assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


def test_dataset_from_a_list_on_stdin(real_cache: Path, tmp_path: Path) -> None:
    """`speak --from - --out-dir DIR`: wavs/ + LJSpeech metadata.csv; stdout stays empty without --json."""
    out = tmp_path / "ds"
    r = invoke("speak", "--from", "-", "--out-dir", str(out), "--jobs", "1", "--prefix", "vx",
               input="First line here.\n\n  Second line, 2 words.  \n")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "" and "2/2 files" in r.stderr
    assert (out / "metadata.csv").read_text().splitlines() == [
        "vx-00001|First line here.|First line here.", "vx-00002|Second line, 2 words.|Second line, two words."]
    assert sf.info(str(out / "wavs" / "vx-00002.wav")).duration > 0.8
    again = invoke("speak", "--from", "-", "--out-dir", str(out), "--prefix", "vx", "--json", input="First line here.\n")
    assert again.exit_code == 0 and json.loads(again.stdout.splitlines()[0])["status"] == "skipped"


def test_dataset_needs_from_and_out_dir(tmp_path: Path) -> None:
    r = invoke("speak", "--out-dir", str(tmp_path / "ds"))
    assert r.exit_code == 2 and "needs both --from" in r.stderr
    r = invoke("speak", "hello", "--jobs", "2")
    assert r.exit_code == 2 and "--from/--out-dir" in r.stderr


def test_max_buffer_flush_ms_flag_and_env(real_cache: Path, tmp_path: Path, monkeypatch) -> None:
    """H-tts's #13 item 4 flag: negative is a usage error; 0 (env) still speaks at boundaries."""
    r = invoke("speak", "--max-buffer-flush-ms", "-5", "Hi.")
    assert r.exit_code == 2
    monkeypatch.setenv("VOXCLI_TTS_MAX_BUFFER_FLUSH_MS", "0")
    out = tmp_path / "x.wav"
    r = invoke("speak", "Hi there.", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    assert sf.info(str(out)).duration > 0.3
    r = invoke("speak", "Hi there.", "--max-buffer-flush-ms", "300", "-o", str(out))
    assert r.exit_code == 0, r.stderr
