"""Issue 16: the default recognizer is the accurate tier where this machine was measured to run it live.

The tier record is the one `voxcli doctor --measure` and `voxcli pull moonshine-base-en` write (each
test has its own empty data dir, so nothing of the developer's machine leaks in). `_plant` writes a
record with a chosen RTF to test the policy; the pull test measures for real.
"""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.whisper.conftest import installed
from tests.whisper.test_live_tier import _plant
from voxcli.asr import live_tier
from voxcli.asr.models import ACCURATE_ASR, DEFAULT_ASR, chat_final_asr, default_asr
from voxcli.cli.app import app

runner = CliRunner()


def test_unmeasured_the_default_is_the_fast_tier(real_cache):
    installed(ACCURATE_ASR)  # installed but never timed here: no reason to believe it keeps real time
    assert default_asr() == DEFAULT_ASR == "moonshine-tiny-en"


def test_measured_live_the_accurate_tier_is_the_default(real_cache):
    _plant(ACCURATE_ASR, 0.3)
    assert default_asr() == ACCURATE_ASR
    _plant(ACCURATE_ASR, 0.7)  # "tight": real time only on an idle CPU
    assert default_asr() == DEFAULT_ASR


def test_a_record_of_another_machine_or_a_removed_model_does_not_count(real_cache, monkeypatch):
    _plant(ACCURATE_ASR, 0.3, machine="Some Other CPU x64")
    assert default_asr() == DEFAULT_ASR
    _plant(ACCURATE_ASR, 0.3)
    monkeypatch.setattr(live_tier, "installed_asr", lambda only=None: [])  # as after `voxcli rm moonshine-base-en`
    assert default_asr() == DEFAULT_ASR


def test_transcribe_without_a_model_runs_the_measured_default_and_config_wins(real_cache, speech_samples,
                                                                           monkeypatch):
    _plant(ACCURATE_ASR, 0.3)
    audio = str(speech_samples["beckett"])
    r = runner.invoke(app, ["transcribe", audio, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    models = {json.loads(x).get("model") for x in r.stdout.splitlines() if x.strip()} - {None}
    assert models == {ACCURATE_ASR}
    monkeypatch.setenv("VOXCLI_ASR_MODEL", DEFAULT_ASR)
    r = runner.invoke(app, ["transcribe", audio, "--json"], catch_exceptions=False)
    models = {json.loads(x).get("model") for x in r.stdout.splitlines() if x.strip()} - {None}
    assert r.exit_code == 0 and models == {DEFAULT_ASR}


def test_pull_times_the_accurate_tier_once_and_the_default_follows(real_cache):
    installed(ACCURATE_ASR)
    skipped = runner.invoke(app, ["pull", ACCURATE_ASR, "--json", "--no-measure"], catch_exceptions=False)
    assert skipped.exit_code == 0 and '"measured"' not in skipped.stdout and default_asr() == DEFAULT_ASR
    r = runner.invoke(app, ["pull", ACCURATE_ASR, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    (measured,) = [e for e in events if e["event"] == "measured"]
    assert measured["name"] == ACCURATE_ASR and measured["worker_rtf"] > 0
    assert measured["tier"] == live_tier.tier_of(measured["worker_rtf"])  # live or not: the load decides
    assert measured["default_asr"] == default_asr() == (ACCURATE_ASR if measured["tier"] == "live" else DEFAULT_ASR)
    again = runner.invoke(app, ["pull", ACCURATE_ASR, "--json"], catch_exceptions=False)
    assert again.exit_code == 0 and '"measured"' not in again.stdout  # timed once per machine and model files
    retimed = runner.invoke(app, ["pull", ACCURATE_ASR, "--json", "--measure"], catch_exceptions=False)
    assert retimed.exit_code == 0 and '"measured"' in retimed.stdout  # asked for: timed again, no download


def test_chat_and_its_ledger_keep_the_fast_tier_unless_configured(real_cache):
    from voxcli.asr.models import chat_asr

    _plant(ACCURATE_ASR, 0.3)
    assert default_asr() == ACCURATE_ASR
    assert chat_asr() == chat_asr(None) == DEFAULT_ASR and chat_asr(ACCURATE_ASR) == ACCURATE_ASR


def test_a_batch_names_the_default_once_in_the_driver(real_cache, speech_samples, tmp_path):
    """The library's batch (not only the CLI) resolves the default before any worker starts, so a Ray node
    with another record, or none, runs the model the manifest names."""
    import voxcli

    _plant(ACCURATE_ASR, 0.3)
    out = tmp_path / "out"
    results = list(voxcli.transcribe_many([str(speech_samples["beckett"])], out, jobs=1))
    assert [r.status for r in results] == ["done"]
    manifest = json.loads(next(out.glob("*manifest*")).read_text())
    assert ACCURATE_ASR in json.dumps(manifest) and DEFAULT_ASR not in json.dumps(manifest)


def test_chat_decodes_its_finals_on_the_accurate_tier_where_it_is_the_default(real_cache):
    """Issue 14's two passes: chat's captions on the fast tier, its finals on the accurate one, chosen by the
    same measured record as the default recognizer; a configured value wins ("none" turns it off)."""
    installed(ACCURATE_ASR)
    assert chat_final_asr(None, DEFAULT_ASR) is None  # not timed here: chat as before
    _plant(ACCURATE_ASR, 0.3)
    assert chat_final_asr(None, DEFAULT_ASR) == ACCURATE_ASR
    assert chat_final_asr(None, ACCURATE_ASR) is None  # chat runs the accurate tier already
    assert chat_final_asr(None, "whisper-tiny-en") is None  # a recognizer the user chose is left alone
    assert chat_final_asr("none", DEFAULT_ASR) is None and chat_final_asr("Off", DEFAULT_ASR) is None
    assert chat_final_asr("whisper-base", DEFAULT_ASR) == "whisper-base"
    assert chat_final_asr(DEFAULT_ASR, DEFAULT_ASR) is None and chat_final_asr(" ", DEFAULT_ASR) is None  # no 2nd copy


def test_a_chosen_final_model_that_cannot_load_leaves_chat_on_one_recognizer(real_cache, caplog):
    """Chosen by the tier record (not configured), a final model that fails to load (here: a name the cache does not
    know) is logged, and chat runs on its recognizer alone, as before; configured, it is the error it is."""
    from voxcli.chat.models import open_chat_models

    with caplog.at_level("INFO", logger="voxcli"):  # the CLI turns it into its one-line warning
        models = open_chat_models(url="http://127.0.0.1:9/v1", final_asr="no-such-final-asr", final_optional=True,
                                  offline=True)
    assert models.asr.final_model is None and "no-such-final-asr" in caplog.text
    models.asr.cancel()
    with pytest.raises(Exception, match="no-such-final-asr"):
        open_chat_models(url="http://127.0.0.1:9/v1", final_asr="no-such-final-asr", offline=True)


def test_chat_logs_both_recognizers_and_final_model_none_turns_the_second_off(real_cache, tmp_path):
    from tests.llm.chat_completions_server import ChatServer, Script
    from voxcli.audio.files import AtomicAudioWriter
    from voxcli.tts.streamer import load_voice

    _plant(ACCURATE_ASR, 0.3)
    voice = load_voice()
    q = tmp_path / "q.wav"
    with AtomicAudioWriter(q, voice.sample_rate) as w:
        w.write(voice.synthesize("What is the capital of France?"))
    data = tmp_path / "data"  # each test's own (tests/conftest.py): the turn log and the tier record
    seen = {}
    for flag in ([], ["--final-model", "none"]):
        with ChatServer(Script(replies=["Paris."], token_delay=0.01)) as srv:
            r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--input", str(q), "-o", str(tmp_path / "r.wav"),
                                    *flag])
        assert r.exit_code == 0, r.stderr
        last = json.loads((data / "turns.jsonl").read_text().splitlines()[-1])
        assert "capital of france" in last["user"].lower(), last["user"]
        seen[tuple(flag)] = last["asr"]
    assert seen == {(): f"{DEFAULT_ASR}+{ACCURATE_ASR}", ("--final-model", "none"): DEFAULT_ASR}
