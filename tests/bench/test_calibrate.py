"""`voxcli bench ttfa --calibrate` and the profile it writes (voxcli.tts.profile, voxcli.bench.calibrate).

The law: a schedule the profile accepts never starves a player on a device
`safety` times slower than the one measured. Checked here against an
independent event-by-event playback simulation over a grid of cost models,
not only against the inequality the code uses. Then end to end on the real
voice: calibrate writes a valid profile atomically, `speak` uses it (its
first block has the profile's size), flags still win, `doctor` names it.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app
from voxcli.tts.profile import (Costs, Profile, ProfileError, active_profile, profile_path, read_profile, schedule,
                                smallest_first, violations, write_profile)

HOP_S = 256 / 22050
TEXT = "The morning train was late again, so the whole committee waited on the cold platform together."


def starves(costs: Costs, sizes: list[int], context: int, slowdown: float) -> bool:
    """Simulate: block k+1 is computed right after block k; does the player ever wait once it started?"""
    ready = slowdown * costs.block_s(sizes[0], context)
    played_until = ready  # the player starts with the first block
    for k, size in enumerate(sizes):
        if k > 0:
            ready += slowdown * costs.block_s(size, context)
            if ready > played_until + 1e-12:
                return True
        played_until = max(played_until, ready) + size * costs.audio_frame_s
    return False


GRID = list(itertools.product([0.0, 0.004, 0.02], [0.0002, 0.001, 0.003], [0, 8, 24], [1.0, 2.0, 3.0]))


@pytest.mark.parametrize("call_s,frame_s,context,factor", GRID)
def test_an_accepted_schedule_survives_a_device_factor_times_slower(call_s, frame_s, context, factor) -> None:
    costs = Costs(call_s, frame_s, HOP_S)
    first = smallest_first(costs, context, factor, frames=256)
    if first is None:  # the device is too slow at this factor: then no schedule may be accepted
        assert frame_s * factor >= HOP_S or all(violations(costs, schedule(costs, f, 256, context, factor), context,
                                                           factor) for f in (1, 64, 256))
        return
    sizes = schedule(costs, first, 256, context, factor)
    assert not violations(costs, sizes, context, factor)
    assert not starves(costs, sizes, context, factor), "the simulation agrees with the proof"
    assert sizes == sorted(sizes) and sizes[-1] == 256, "blocks grow to the largest size"


def test_a_schedule_that_grows_too_fast_is_flagged() -> None:
    costs = Costs(0.005, 0.001, HOP_S)
    sizes = [8, 64, 256]
    assert violations(costs, sizes, 16, 2.0) == [0], "64 frames cannot be made while 8 play"
    assert starves(costs, sizes, 16, 2.0)


def _profile(**kw) -> Profile:
    values = dict(voice="piper-joe-medium", first_frames=9, frames=256, lookback=12, lookahead=12, overlap=0,
                  safety=2.0, snr_db=90.0, measured_snr_db=121.6, costs=Costs(0.001, 0.0015, HOP_S),
                  created="2026-12-01T00:00:00+00:00", device="Linux x86_64, 2 cores")
    return Profile(**{**values, **kw})


def test_profile_round_trip_and_refusals(isolated_env: Path) -> None:
    path = write_profile(_profile())
    assert path == profile_path("piper-joe-medium") and path.is_file()
    back = read_profile(path)
    assert back.knobs() == _profile().knobs() and back.costs == _profile().costs and back.path == path
    assert active_profile("piper-joe-medium") == back
    assert active_profile("piper-joe-medium", "none") is None
    assert active_profile("other-voice") is None, "a profile is per voice"
    path.write_text(path.read_text().replace("first_frames = 9", "first_frames = 0"))
    with pytest.raises(ProfileError):
        read_profile(path)
    path.write_text("version = [")
    with pytest.raises(ProfileError, match=str(path)):
        active_profile("piper-joe-medium")


def _speak_first_blocks(tmp_path: Path, *args: str) -> list[int]:
    r = CliRunner().invoke(app, ["speak", TEXT, "--json", "-o", str(tmp_path / "x.wav"), *args],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    return [e["samples"] for e in events if e["event"] == "chunk" and e["kind"] == "audio"]


def test_calibrate_writes_a_profile_speak_uses_and_doctor_shows(real_cache: Path, isolated_env: Path,
                                                                tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["bench", "ttfa", "--calibrate", "--snr-db", "40", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    path = Path(doc["profile"])
    assert path == profile_path("piper-joe-medium") and not list(path.parent.glob(".*.tmp"))
    p = read_profile(path)
    assert p.measured_snr_db >= 40 and p.safety == 2.0 and doc["sizes"][0] == p.first_frames
    assert not violations(p.costs, schedule(p.costs, p.first_frames, p.frames, p.context, p.safety), p.context,
                          p.safety)
    assert _speak_first_blocks(tmp_path)[0] == p.first_frames * 256, "speak starts with the profile's block"
    assert _speak_first_blocks(tmp_path, "--first-frames", "13")[0] == 13 * 256, "a flag still wins"
    d = runner.invoke(app, ["doctor", "--only", "tts-profile", "--json"], catch_exceptions=False)
    check = json.loads(d.stdout.splitlines()[0])
    assert check["status"] == "ok" and check["details"]["path"] == str(path)
    (isolated_env / "config.toml").write_text('[tts]\nprofile = "none"\n')
    d = runner.invoke(app, ["doctor", "--only", "tts-profile"], catch_exceptions=False)
    assert "built-in knobs" in d.stderr


def test_a_broken_profile_is_a_warning_by_default_and_an_error_when_named(real_cache: Path, isolated_env: Path,
                                                                          tmp_path: Path) -> None:
    from voxcli.tts.profile import describe

    path = write_profile(_profile())
    path.write_text("version = 1\nvoice = 3\n")
    status, summary, fix, _ = describe("piper-joe-medium", None)
    assert status == "warn" and str(path) in summary and fix and "--calibrate" in fix
    r = CliRunner().invoke(app, ["speak", "Hi there.", "-o", str(tmp_path / "a.wav")], catch_exceptions=False)
    assert r.exit_code == 0 and "warning" in r.stderr and str(path) in r.stderr, "speaks with the built-in knobs"
    (isolated_env / "config.toml").write_text(f'[tts]\nprofile = "{path}"\n')
    r = CliRunner().invoke(app, ["speak", "Hi there.", "-o", str(tmp_path / "b.wav")], catch_exceptions=False)
    assert r.exit_code == 2 and "not a usable TTS profile" in r.stderr
    # doctor tells the same story as speak: a named broken profile fails, it is not "built-in knobs"
    status, summary, fix, _ = describe("piper-joe-medium", str(path))
    assert status == "fail" and "speak stops" in summary and fix and "config unset tts.profile" in fix
