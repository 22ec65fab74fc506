"""`voxcli doctor`'s asr-tier: a real measurement of Moonshine tiny, cached, read back, and the advice it gives."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.whisper.conftest import installed
from voxcli.asr import live_tier
from voxcli.asr.live_tier import LIVE_RTF, Measurement, cache_key, files_digest, machine_id, tier_of
from voxcli.cli.app import app

runner = CliRunner()


def doctor_tier(*args: str) -> dict:
    r = runner.invoke(app, ["doctor", "--only", "asr-tier", "--json", *args], catch_exceptions=False)
    assert r.exit_code == 0, r.stdout + r.stderr
    (line,) = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    return line


def test_tiers_by_worker_rtf():
    assert tier_of(0.2) == tier_of(LIVE_RTF) == "live"
    assert tier_of(0.6) == "tight" and tier_of(0.95) == tier_of(3.0) == "files"


def test_measured_once_then_read_from_the_cache(real_cache):
    installed("moonshine-tiny-en")
    before = doctor_tier()
    assert before["status"] == "ok" and "not measured" in before["summary"] and before["fix"] is None

    rep = live_tier.report(measure=True, only=["moonshine-tiny-en"])
    (row,) = rep.details["models"]
    assert row["model"] == "moonshine-tiny-en" and row["measured_now"] and row["worker_rtf"] > 0
    assert row["tier"] == tier_of(row["worker_rtf"]) and row["dev_set_wer"] > 0
    saved = json.loads(live_tier.cache_path().read_text())["measurements"]
    assert [m["worker_rtf"] for m in saved.values()] == [row["worker_rtf"]]
    assert 8.0 < next(iter(saved.values()))["audio_s"] < 20.0  # the script is about 12 s of speech

    after = doctor_tier()  # plain doctor: the figure from the cache, nothing measured
    rows = {m["model"]: m for m in after["details"]["models"]}
    assert rows["moonshine-tiny-en"]["worker_rtf"] == row["worker_rtf"]
    assert not rows["moonshine-tiny-en"]["measured_now"]
    assert "moonshine-tiny-en (RTF" in after["summary"]


def _plant(model: str, rtf: float, machine: str | None = None) -> None:
    bundle = installed(model)
    machine = machine or machine_id()
    m = Measurement(model, rtf, 12.0, 12.0 * rtf, "2026-01-01T00:00:00+0000", machine,
                    cache_key(model, files_digest(bundle), machine))
    cached = live_tier.load_cached()
    cached[m.key] = m
    live_tier.save(cached)


def test_a_configured_model_too_slow_for_live_is_a_warning(real_cache, monkeypatch):
    _plant("moonshine-tiny-en", 0.25)
    _plant("whisper-base", 1.2)
    monkeypatch.setenv("VOXCLI_ASR_MODEL", "whisper-base")
    r = doctor_tier()
    assert r["status"] == "warn" and r["details"]["recommended_live"] == "moonshine-tiny-en"
    assert "files only: whisper-base (RTF 1.20)" in r["summary"]
    assert "may fall behind" in r["fix"] and "--model moonshine-tiny-en" in r["fix"]
    monkeypatch.delenv("VOXCLI_ASR_MODEL")
    assert doctor_tier()["status"] == "ok"  # the default (moonshine-tiny-en) is live here


def test_figures_of_another_machine_are_not_trusted(real_cache):
    _plant("moonshine-tiny-en", 0.25, machine="Some Other CPU x64")
    r = doctor_tier()
    rows = {m["model"]: m for m in r["details"]["models"]}
    assert rows["moonshine-tiny-en"]["worker_rtf"] is None and "not measured" in r["summary"]


def test_doctor_measure_flag_measures_and_caches(real_cache, monkeypatch):
    """`voxcli doctor --measure` goes through the check (restricted to Moonshine tiny to keep the test short)."""
    installed("moonshine-tiny-en")
    every = live_tier.installed_asr
    monkeypatch.setattr(live_tier, "installed_asr", lambda only=None: every(["moonshine-tiny-en"]))
    r = doctor_tier("--measure")
    (row,) = r["details"]["models"]
    assert row["measured_now"] and row["worker_rtf"] > 0 and live_tier.cache_path().exists()
    assert not doctor_tier()["details"]["models"][0]["measured_now"]


@pytest.mark.parametrize("content", ["[]", "null", '{"measurements": []}',
                                     '{"measurements": {"k": {"model": "m", "worker_rtf": "fast"}}}'])
def test_a_cache_file_that_is_not_ours_is_measured_again_not_a_crash(real_cache, content):
    live_tier.cache_path().parent.mkdir(parents=True, exist_ok=True)
    live_tier.cache_path().write_text(content)
    assert live_tier.load_cached() == {}
