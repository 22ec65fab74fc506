"""The TTS block knobs (first_frames, frames, lookback, lookahead, overlap) per stream.

Each knob resolves flag > VOXCLI_TTS_<KNOB> > config [tts] > device profile >
the voice's own (table below, through the one resolver); the library takes
them per stream (`StreamerConfig(blocks=...)`) without touching the shared
voice; `speak` honours them (chunk sizes in its JSON lines).
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app
from voxcli.config import load_config
from voxcli.tts.profile import Costs, Profile, knobs_config, write_profile
from voxcli.tts.streamer import StreamerConfig, load_voice

TEXT = "The morning train was late again, so the whole committee waited on the cold platform together."
HOP = 256


@pytest.fixture
def voice(real_cache: Path):
    return load_voice()


def _profile(voice_name: str, **knobs: int) -> Profile:
    values = {"first_frames": 12, "frames": 96, "lookback": 9, "lookahead": 7, "overlap": 1, **knobs}
    return Profile(voice=voice_name, **values, safety=3.0, snr_db=60.0, measured_snr_db=61.0,
                   costs=Costs(0.001, 0.001, HOP / 22050), created="2026-01-01T00:00:00+00:00", device="test")


# knob, flag, env, config, profile?, expected ("voice" = the voice's own value)
CASES = [
    ("first_frames", 5, "6", 7, True, 5),
    ("first_frames", None, "6", 7, True, 6),
    ("first_frames", None, None, 7, True, 7),
    ("first_frames", None, None, None, True, 12),
    ("frames", 40, None, 50, True, 40),
    ("frames", None, None, 50, False, 50),
    ("lookback", None, "3", None, True, 3),
    ("lookback", None, None, None, True, 9),
    ("lookahead", 0, "3", 4, True, 0),
    ("lookahead", None, None, 4, False, 4),
    ("overlap", None, "2", None, False, 2),
    ("overlap", None, None, None, True, 1),
    ("lookback", None, None, None, False, "voice"),
]


@pytest.mark.parametrize("knob,flag,env,config,profile,expected", CASES)
def test_each_knob_resolves_flag_env_config_profile_voice(voice, monkeypatch, isolated_env: Path, knob, flag, env,
                                                         config, profile, expected) -> None:
    from voxcli.cli.tts_knobs import resolve_knobs, stream_knobs

    if env is not None:
        monkeypatch.setenv(f"VOXCLI_TTS_{knob.upper()}", env)
    if config is not None:
        (isolated_env / "config.toml").write_text(f"[tts]\n{knob} = {config}\n")
    if profile:
        write_profile(_profile(voice.name))
    got = stream_knobs(voice, resolve_knobs(load_config(), **{knob: flag}))
    if expected == "voice":
        assert got is None, "nothing set: the stream runs with the voice's own knobs"
        return
    assert getattr(got.blocks, knob) == expected
    assert got.safety == (3.0 if profile else StreamerConfig.safety), "a profile's safety factor comes with it"


def test_bad_knob_values_are_refused(voice) -> None:
    with pytest.raises(ValueError):
        knobs_config(voice.engine.config, first_frames=0)
    with pytest.raises(ValueError):
        knobs_config(voice.engine.config, lookback=-1)
    with pytest.raises(ValueError):
        knobs_config(voice.engine.config, nonsense=3)


def test_a_stream_honours_its_block_sizes_and_leaves_the_voice_alone(voice) -> None:
    before = voice.engine.config
    blocks = knobs_config(before, first_frames=10, frames=10, lookback=12, lookahead=12)
    chunks = [c for c in voice.stream(TEXT, config=StreamerConfig(blocks=blocks)) if c.kind == "audio"]
    sizes = [c.audio.size for c in chunks]
    assert sizes[:-1] == [10 * HOP] * (len(sizes) - 1), sizes  # one sentence; its last block takes the rest
    assert sizes[-1] > 0
    assert voice.engine.config == before, "per stream: the shared voice's knobs are unchanged"
    other = [c.audio.size for c in voice.stream(TEXT, config=StreamerConfig(blocks=replace(blocks, first_frames=20,
                                                                                        frames=20)))
             if c.kind == "audio"]
    assert other[0] == 20 * HOP


def test_context_knobs_reach_the_decoder(voice) -> None:
    """No context at all leaves seams: blocks differ from one whole decode; enough context does not."""
    engine = voice.engine
    p = max(engine.prepare(TEXT, normalize=False), key=lambda q: q.frames)

    def decode(**knobs: int) -> np.ndarray:
        from voxcli.tts.streamer import _with_blocks

        view = _with_blocks(engine, knobs_config(engine.config, **knobs))
        return np.concatenate(list(view.blocks(p, lambda k: 12)))

    whole = np.concatenate(list(engine.blocks(p, lambda k: p.frames + 1)))

    def snr(x: np.ndarray) -> float:
        n = min(x.size, whole.size)
        return float(10 * np.log10(np.sum(whole ** 2) / max(np.sum((whole[:n] - x[:n]) ** 2), 1e-20)))

    assert snr(decode(lookback=0, lookahead=0)) < 30 < snr(decode(lookback=12, lookahead=12))


def test_speak_honours_the_flags_env_and_config(real_cache: Path, isolated_env: Path, monkeypatch,
                                                tmp_path: Path) -> None:
    def first_sizes(*args: str) -> list[int]:
        r = CliRunner().invoke(app, ["speak", TEXT, "--json", "-o", str(tmp_path / "x.wav"), *args],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        events = [json.loads(line) for line in r.stdout.splitlines()]
        return [e["samples"] for e in events if e["event"] == "chunk" and e["kind"] == "audio"]

    assert first_sizes("--first-frames", "9", "--frames", "9")[:3] == [9 * HOP] * 3
    monkeypatch.setenv("VOXCLI_TTS_FIRST_FRAMES", "11")
    (isolated_env / "config.toml").write_text("[tts]\nframes = 11\n")
    assert first_sizes()[:3] == [11 * HOP] * 3
    r = CliRunner().invoke(app, ["speak", "Hi.", "--raw", "--first-frames", "0"])
    assert r.exit_code == 2, "below the option's range"
