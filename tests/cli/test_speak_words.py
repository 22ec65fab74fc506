"""`voxcli speak` word events, subtitles and the word-highlighting view, on the real voice."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from tests.cli.test_speak import invoke
from tests.tts.test_words_subtitles import parse
from voxcli.events import AudioChunk, Word

TEXT = "Dr. Smith paid $3.50 at 8:15. Then he left."
FRAME_S = 256 / 22050


def _events(stdout: str) -> tuple[list[dict], list[dict]]:
    events = [json.loads(line) for line in stdout.splitlines()]
    return [e for e in events if e["event"] == "chunk"], [e for e in events if e["event"] == "word"]


def test_json_word_events_and_subtitles_that_match_the_audio(real_cache: Path, tmp_path: Path) -> None:
    out, vtt = tmp_path / "out.wav", tmp_path / "out.vtt"
    result = invoke("speak", TEXT, "-o", str(out), "--subtitles", str(vtt), "--json")
    assert result.exit_code == 0, result.stderr
    chunks, words = _events(result.stdout)
    assert [w["text"] for w in words] == ["Doctor", "Smith", "paid", "three", "dollars", "and", "fifty", "cents",
                                          "at", "eight", "fifteen", "Then", "he", "left"]
    assert [TEXT[w["char_start"]:w["char_end"]] for w in words][:4] == ["Dr.", "Smith", "paid", "$3.50"]
    assert sum(len(c["words"]) for c in chunks) == len(words), "each word rides on the chunk it starts in"
    audio_s = sf.info(str(out)).frames / 22050
    assert 0 < words[0]["start"] and words[-1]["end"] <= audio_s
    cues = parse(vtt.read_text())
    assert vtt.read_text().startswith("WEBVTT") and [t for _, _, t in cues] == ["Dr. Smith paid $3.50 at 8:15.",
                                                                              "Then he left."]
    assert abs(cues[0][0] - words[0]["start"]) < FRAME_S and abs(cues[-1][1] - words[-1]["end"]) < FRAME_S
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.vtt", "out.wav"], "no temp files left"


def test_subtitles_from_stdin_and_without_streaming(real_cache: Path, tmp_path: Path) -> None:
    text = "It is 8:15 now.\nThe price is $3.50."
    result = invoke("speak", "-", "-o", str(tmp_path / "a.wav"), "--subtitles", str(tmp_path / "a.srt"), input=text)
    assert result.exit_code == 0, result.stderr
    srt = (tmp_path / "a.srt").read_text()
    assert srt.startswith("1\n") and [t for _, _, t in parse(srt)] == ["It is 8:15 now.", "The price is $3.50."]
    whole = invoke("speak", text, "--no-stream", "-o", str(tmp_path / "b.wav"), "--subtitles", str(tmp_path / "b.srt"))
    assert whole.exit_code == 0, whole.stderr
    assert [t for _, _, t in parse((tmp_path / "b.srt").read_text())] == ["It is 8:15 now.", "The price is $3.50."]


def test_a_bad_subtitle_name_is_a_usage_error_before_any_audio(tmp_path: Path) -> None:
    result = invoke("speak", "Hi.", "-o", str(tmp_path / "x.wav"), "--subtitles", str(tmp_path / "x.txt"))
    assert result.exit_code == 2 and ".srt or .vtt" in result.stderr
    assert list(tmp_path.iterdir()) == []


def _chunk(words: list[Word]) -> AudioChunk:
    return AudioChunk(np.zeros(256, np.float32), 22050, 0, words=tuple(words))


def test_the_word_view_highlights_the_word_under_the_play_head() -> None:
    from voxcli.cli.views.tts import RichWordView

    text = "Dr. Smith paid $3.50."
    t = [0.0]
    view = RichWordView(lambda: text, lambda: t[0])
    try:
        view.add(_chunk([Word("Doctor", 0.1, 0.4, char_start=0, char_end=3),
                         Word("Smith", 0.5, 0.8, char_start=4, char_end=9)]))
        view.add(_chunk([Word("three", 1.0, 1.2, char_start=15, char_end=21),
                         Word("dollars", 1.2, 1.6, char_start=15, char_end=21)]))

        def highlighted() -> str:
            rendered = view.__rich__()
            return "".join(rendered.plain[s.start:s.end] for s in rendered.spans if "reverse" in str(s.style))

        assert highlighted() == ""
        t[0] = 0.55
        assert highlighted() == "Smith"
        t[0] = 1.3
        assert highlighted() == "$3.50."
    finally:
        view.close()


def test_cues_fit_the_resampled_file(real_cache: Path, tmp_path: Path) -> None:
    """Times are stream seconds: a 16 kHz file has the same cues, ending with its speech."""
    out, srt = tmp_path / "r.wav", tmp_path / "r.srt"
    result = invoke("speak", TEXT, "-o", str(out), "--rate", "16000", "--subtitles", str(srt), "--json")
    assert result.exit_code == 0, result.stderr
    _, words = _events(result.stdout)
    audio, rate = sf.read(out, dtype="float32")
    cues = parse(srt.read_text())
    assert rate == 16000 and abs(cues[-1][1] - words[-1]["end"]) < FRAME_S
    assert audio.size / rate - 0.5 < cues[-1][1] <= audio.size / rate
    first = audio[int(cues[0][0] * rate):int(cues[0][1] * rate)]
    assert np.sqrt(np.mean(first ** 2)) > 0.02, "the first cue is speech"


def _speak_on_a_tty(*args: str) -> str:
    """`voxcli speak ARGS` with stderr on a pseudo-terminal (the rich view), playing to the null sink."""
    import os
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TERM": "xterm-256color", "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-m", "voxcli", "speak", *args, "--device", "pulse"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    proc.wait(timeout=120)
    os.close(master)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_on_a_terminal_the_word_being_heard_is_highlighted(null_sink: str, real_cache: Path) -> None:
    import re

    screen = _speak_on_a_tty("Dr. Smith paid $3.50 at 8:15.")
    highlighted = set(re.findall(r"\x1b\[1;7m([^\x1b]+)\x1b\[0m", screen))
    written = {"Dr.", "Smith", "paid", "$3.50", "at", "8:15."}
    assert highlighted <= written and "8:15." in highlighted, highlighted  # the words as written, the last at the end
    assert len(highlighted & {"Dr.", "Smith", "$3.50"}) >= 2, highlighted  # in turn (a 50 ms redraw may miss one)
    assert "TTFA" in screen and "synth ms" not in screen
    table = _speak_on_a_tty("Hello there.", "--table")
    assert "synth ms" in table and "\x1b[1;7m" not in table
