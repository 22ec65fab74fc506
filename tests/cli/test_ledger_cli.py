"""`voxcli ledger` and its subcommands through typer's CliRunner (stdout and stderr apart)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    monkeypatch.setenv("VOXCLI_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("VOXCLI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "100")
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates them
        return CliRunner()


def test_ledger_json_default_preset(runner):
    r = runner.invoke(app, ["ledger", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["total_ms"] == 1045.0
    assert doc["critical_parallel"] == "asr_tail_ms"
    assert doc["sensitivity_ms"]["endpoint_ms"] == 0.0
    assert doc["sources"]["llm_ttft_ms"] == "preset"
    assert [s["term"] for s in doc["segments"]][:3] == ["uplink_ms", "endpoint_ms", "asr_tail_ms"]
    assert r.stderr == ""


def test_ledger_waterfall_goes_to_stderr_only(runner):
    r = runner.invoke(app, ["ledger", "--sensitivity"], catch_exceptions=False)
    assert r.exit_code == 0
    assert r.stdout == ""
    assert "ASR tail is on the critical path; shortening the endpoint hold gains nothing" in r.stderr
    assert "1045" in r.stderr and "1,400 ms limit" in r.stderr
    assert "ASR tail *" in r.stderr  # the critical branch is marked
    assert "-100" in r.stderr  # sensitivity column


def test_flags_beat_config_beat_preset(runner, tmp_path):
    (tmp_path / "config.toml").write_text('[ledger]\npreset = "telephony"\nllm_ttft_ms = 500\nhops_ms = 10\n')
    r = runner.invoke(app, ["ledger", "--json", "--hops-ms", "20"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert doc["terms"]["uplink_ms"] == 190 and doc["preset"] == "telephony"  # preset from the config
    assert doc["terms"]["llm_ttft_ms"] == 500 and doc["sources"]["llm_ttft_ms"] == "config"
    assert doc["terms"]["hops_ms"] == 20 and doc["sources"]["hops_ms"] == "flag"
    assert doc["total_ms"] == 190 + max(1200, 970) + 20 + 500 + 540 + 190


def test_endpoint_longer_than_asr_tail_becomes_critical(runner):
    r = runner.invoke(app, ["ledger", "--json", "--endpoint-ms", "500"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert doc["total_ms"] == 1195.0 and doc["critical_parallel"] == "endpoint_ms"
    assert doc["sensitivity_ms"]["asr_tail_ms"] == 0.0 and doc["sensitivity_ms"]["endpoint_ms"] == 100.0


def test_bad_preset_and_bad_config_are_one_line_usage_errors(runner, tmp_path):
    r = runner.invoke(app, ["ledger", "--preset", "moon"])
    assert r.exit_code == 2 and "unknown preset 'moon'" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "config.toml").write_text("[ledger\n")
    r = runner.invoke(app, ["ledger"])
    assert r.exit_code == 2 and "config.toml: invalid TOML" in r.stderr


def test_schedule_json_and_table(runner):
    r = runner.invoke(app, ["ledger", "schedule", "--words", "3,8,16", "--rtf", "0.9", "--overhead-ms", "60",
                            "--wpm", "150", "--json"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert not doc["safe"]
    assert doc["chunks"][1]["underrun_s"] == pytest.approx(1.74)
    r = runner.invoke(app, ["ledger", "schedule", "--words", "3,8,16", "--rtf", "0.3"], catch_exceptions=False)
    assert r.stdout == "" and "safe" in r.stderr and "UNDERRUN" not in r.stderr
    r = runner.invoke(app, ["ledger", "schedule", "--rtf", "0.9"], catch_exceptions=False)
    assert "UNDERRUN: 1.74 s hole" in r.stderr


def test_schedule_bad_words(runner):
    r = runner.invoke(app, ["ledger", "schedule", "--words", "3,x"])
    assert r.exit_code == 2 and "--words must be comma-separated" in r.stderr


def test_environment_sits_between_flag_and_config(runner, tmp_path, monkeypatch):
    """Every ledger key goes through the one resolver: flag > VOXCLI_LEDGER_* > config > preset."""
    (tmp_path / "config.toml").write_text("[ledger]\nhops_ms = 10\nllm_ttft_ms = 500\n")
    monkeypatch.setenv("VOXCLI_LEDGER_HOPS_MS", "40")
    monkeypatch.setenv("VOXCLI_LEDGER_PRESET", "webrtc")
    doc = json.loads(runner.invoke(app, ["ledger", "--json"], catch_exceptions=False).stdout)
    assert doc["preset"] == "webrtc"
    assert doc["terms"]["hops_ms"] == 40 and doc["sources"]["hops_ms"] == "env"
    assert doc["terms"]["llm_ttft_ms"] == 500 and doc["sources"]["llm_ttft_ms"] == "config"
    doc = json.loads(runner.invoke(app, ["ledger", "--json", "--hops-ms", "5", "-p", "default"]).stdout)
    assert doc["preset"] == "default" and doc["terms"]["hops_ms"] == 5 and doc["sources"]["hops_ms"] == "flag"


def test_endpoint_ms_has_the_cli_wide_range(runner):
    """--endpoint-ms had three ranges (>= 0 here); it is 100..10000 ms in every command now."""
    r = runner.invoke(app, ["ledger", "--json", "--endpoint-ms", "50"])
    assert r.exit_code == 2 and "--endpoint-ms" in r.stderr
    assert runner.invoke(app, ["ledger", "--json", "--endpoint-ms", "100"]).exit_code == 0


def test_waterfall_is_plain_text_off_a_terminal_and_rich_on_one(capsys):
    from voxcli.bench import ledger as model
    from voxcli.bench.ledger_knobs import derive, preset
    from voxcli.cli.views.ledger import show_ledger

    led = model.compute(derive(preset("default")))
    sources = {t: "preset" for t in model.TERMS}
    show_ledger(led, sources, {}, "default", sensitivity=True, fancy=False)
    plain = capsys.readouterr().err
    assert "\x1b[" not in plain
    row = next(line for line in plain.splitlines() if line.startswith("ASR tail *"))
    assert row.split()[3:6] == ["350", "preset", "100"] and "█" in row
    show_ledger(led, sources, {}, "default", sensitivity=True, fancy=True)
    rich = capsys.readouterr().err
    assert "ASR tail *" in rich and "1,400 ms limit" in rich and "-100" in rich


def test_knobs_derive_the_terms_as_the_seeds_instrument(runner):
    doc = json.loads(runner.invoke(app, ["ledger", "--json", "--agreement", "3", "--chunk-ms", "300"],
                                   catch_exceptions=False).stdout)
    assert doc["knobs"] == {"chunk_ms": 300.0, "agreement": 3, "first_chunk_words": 1, "endpoint_ms": 250.0,
                            "network": "default"}
    assert doc["derivation"]["asr_tail_parts"] == {"chunk_ms": 300.0, "stability_ms": 600.0, "compute_ms": 70.0}
    assert doc["terms"]["asr_tail_ms"] == 970.0 and doc["sources"]["asr_tail_ms"] == "flag"
    assert doc["sources"]["tts_first_audio_ms"] == "preset"
    assert doc["total_ms"] > 1400 and doc["within_limit"] is False
    words = json.loads(runner.invoke(app, ["ledger", "--json", "--first-chunk-words", "12"]).stdout)
    assert words["total_ms"] - 1045.0 == pytest.approx(440.0, abs=20)
    flat = {json.loads(runner.invoke(app, ["ledger", "--json", "--chunk-ms", str(c), "--endpoint-ms", "500"]).stdout
                       )["total_ms"] for c in (40, 90, 140)}
    assert flat == {1195.0}


def test_telephony_preset_is_the_seeds_worst_case_and_network_is_one_knob(runner):
    worst = json.loads(runner.invoke(app, ["ledger", "--json", "-p", "telephony"], catch_exceptions=False).stdout)
    assert worst["total_ms"] > 2500 and not worst["within_limit"] and worst["knobs"]["network"] == "telephony"
    net = json.loads(runner.invoke(app, ["ledger", "--json", "--network", "telephony"]).stdout)
    assert net["knobs"]["chunk_ms"] == 140.0 and net["sources"]["uplink_ms"] == "flag"
    assert net["terms"]["asr_tail_ms"] == 350.0 and net["total_ms"] < worst["total_ms"]
    r = runner.invoke(app, ["ledger", "-p", "telephony"], catch_exceptions=False)
    assert "over the 1,400 ms limit" in r.stderr and "network telephony" in r.stderr


def test_bad_knobs_are_one_line_errors(runner):
    for args, msg in ((["--network", "moon"], "unknown network 'moon'"), (["--chunk-ms", "0"], "--chunk-ms"),
                      (["--agreement", "0"], "--agreement"), (["--first-chunk-words", "x"], "--first-chunk-words")):
        r = runner.invoke(app, ["ledger", "--json", *args])
        assert r.exit_code == 2 and msg in r.stderr and "Traceback" not in r.stderr and r.stdout == "", args
    r = runner.invoke(app, ["ledger", "frontier", "--chunks", "150"])
    assert r.exit_code == 2 and "multiples of --grid-ms" in r.stderr
    r = runner.invoke(app, ["ledger", "frontier", "--agreements", "1,x"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1


def test_help_teaches_the_knobs(runner):
    out = runner.invoke(app, ["ledger", "--help"]).stdout
    for text in ("--chunk-ms", "14 frames", "--agreement", "LocalAgreement", "--first-chunk-words", "RTF 0.1",
                 "--endpoint-ms", "--network", "telephony", "worst case", "max(endpoint hold, ASR tail)"):
        assert text in out, text


def test_experiments_command_runs_the_seeds_four(runner):
    r = runner.invoke(app, ["ledger", "experiments", "--json"], catch_exceptions=False)
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["all_hold"] and len(doc["experiments"]) == 4
    assert doc["experiments"][1]["figures"]["added_ms"] == pytest.approx(440, abs=20)
    r = runner.invoke(app, ["ledger", "experiments"], catch_exceptions=False)
    assert r.stdout == "" and r.stderr.count("holds") == 4 and "DOES NOT HOLD" not in r.stderr


def test_frontier_table_and_json_on_real_speech(runner, real_cache):
    args = ["ledger", "frontier", "--seconds", "5", "--grid-ms", "250", "--chunks", "250,500", "--agreements", "1,3"]
    r = runner.invoke(app, [*args, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["run"]["decodes"] == 20 and len(doc["points"]) == 4
    pts = {(p["agreement"], p["chunk_ms"]): p for p in doc["points"]}
    assert pts[(3, 500.0)]["turn_ms"] > pts[(1, 250.0)]["turn_ms"]
    assert pts[(3, 250.0)]["flicker"] <= pts[(1, 250.0)]["flicker"]
    r = runner.invoke(app, args, catch_exceptions=False)
    assert r.stdout == "" and "flicker /100 w" in r.stderr and "on the frontier" in r.stderr


def test_measured_uses_the_configuration_in_force_and_the_real_overlap(runner, real_cache, tmp_path):
    """The engine holds asr.endpoint_ms (not the preset's 250 ms) and the ledger measures what it overlapped."""
    from voxcli.chat.models import LOCAL_FIRST_WORDS
    from voxcli.config import DEFAULT_AGREEMENT, DEFAULT_STEP_MS

    from voxcli.chat.turnlog import TurnClock, append_turn, make_record

    (tmp_path / "config.toml").write_text("[asr]\nendpoint_ms = 420\n")
    for ttft in (0.15, 0.2, 0.25):  # three chat turns of 0.45 + ttft + 0.1 s
        clock = TurnClock(speech_end=0.0, endpoint=0.42, asr_final=0.44, llm_request=0.45,
                          llm_first_token=0.45 + ttft, first_audio=0.55 + ttft)
        append_turn(make_record(1, clock, user="hi", assistant="hello", interrupted=False, cut_off=False, llm="t"))
    r = runner.invoke(app, ["ledger", "--measured", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["knobs"]["endpoint_ms"] == 420 and doc["knob_sources"]["endpoint_ms"] == "config"
    assert doc["knobs"]["agreement"] == DEFAULT_AGREEMENT and doc["knobs"]["chunk_ms"] == DEFAULT_STEP_MS
    assert doc["knobs"]["first_chunk_words"] == LOCAL_FIRST_WORDS  # chat's first chunk with the on-device LLM
    assert doc["terms"]["endpoint_ms"] == 420 and doc["sources"]["endpoint_ms"] == "config"
    assert doc["sources"]["asr_tail_ms"] == "measured" and doc["sources"]["uplink_ms"] == "assumed"
    assert doc["sources"]["llm_ttft_ms"] == "turn log" and doc["terms"]["llm_ttft_ms"] == pytest.approx(200.0)
    turns = doc["measured_turns"]  # the prediction next to the turns really measured
    assert turns["turns"] == 3 and turns["total_ms_p50"] == pytest.approx(750.0)
    engine = doc["measurements"]["engine"]["value_ms"]  # chat's schedule on the terms its turn log measured:
    # these turns were not preemptive, so final 440 + hops 10 + first token 200 + first audio 100 in series
    assert turns["predicted_ms"] == pytest.approx(engine, abs=0.01) and engine == pytest.approx(750.0)
    assert turns["prediction_error_pct"] == pytest.approx(100 * (engine - 750.0) / 750.0, abs=0.1)
    assert doc["knobs"]["network"] == "device" and doc["terms"]["downlink_ms"] == 0  # voxcli runs on-device
    timeline = doc["measurements"]["asr_start_ms"]["data"]
    assert timeline["hold_ms"] == 420 and timeline["confirm_ms"] >= 420 * 0.9
    ov = doc["overlap"]
    assert ov["asr_start_ms"] == pytest.approx(timeline["asr_start_ms"], abs=0.01)
    assert ov["endpoint_start_ms"] == pytest.approx(timeline["hold_start_ms"], abs=0.01)
    assert 0 <= ov["overlap_ms"] <= ov["possible_overlap_ms"]
    # the ledger's parallel branch ends where the engine really was: endpoint fired and transcript ready
    assert ov["parallel_end_ms"] == pytest.approx(max(timeline["confirm_ms"], timeline["ready_ms"]), abs=1.0)
    # without a config the engine's own default hold is used, not the preset's 250 ms
    (tmp_path / "config.toml").unlink()
    from voxcli.cli.ledger import _knobs
    from voxcli.config import DEFAULT_ENDPOINT_MS, load_config

    knobs, sources, _ = _knobs(None, {k: None for k in ("chunk_ms", "agreement", "first_chunk_words",
                                                        "endpoint_ms", "network")}, True, load_config())
    assert knobs.endpoint_ms == DEFAULT_ENDPOINT_MS != 250 and sources["endpoint_ms"] == "engine default"
