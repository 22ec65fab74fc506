"""`voxcli bench ttfa` / `bench history` and `ledger --measured` through CliRunner, on the real voice."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    monkeypatch.setenv("COLUMNS", "110")
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates them
        return CliRunner()


@pytest.fixture
def real_voice(real_cache, voice_bundle):
    pytest.importorskip("voxcli.runtimes.piper.voice", reason="the Piper voice engine has not landed yet")
    return voice_bundle


def _history(isolated_env):
    path = isolated_env / "data" / "bench_history.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_bench_ttfa_json_on_the_real_voice(runner, real_voice, isolated_env):
    r = runner.invoke(app, ["bench", "ttfa", "--runs", "2", "--warmup", "0", "--json", "--compare", "batch"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout is exactly one JSON document
    assert doc["schema"] == "voxcli.bench.ttfa/1" and doc["sample_rate"] == 22050
    assert [t["name"] for t in doc["texts"]] == ["short", "sentence", "paragraph", "llm-push"]
    for t in doc["texts"]:
        assert len(t["runs"]) == 2
        for run in t["runs"]:
            # our stopwatch and the streamer's own StreamStats (what `speak` prints) agree in kind
            assert run["ttfa_ms"] > 0 and run["stats_ttfa_ms"] is not None
            assert abs(run["ttfa_ms"] - run["stats_ttfa_ms"]) < max(25.0, 0.25 * run["ttfa_ms"])
            assert run["audible_ttfa_ms"] >= run["ttfa_ms"] - 1e-6
            assert 0 < run["rtf"] < 2 and run["audio_s"] > 0.3 and run["chunks"] >= 1
        assert t["summary"]["ttfa_ms"]["min"] <= t["summary"]["ttfa_ms"]["p50"] <= t["summary"]["ttfa_ms"]["max"]
    para = next(t for t in doc["texts"] if t["name"] == "paragraph")
    # streaming's first audio comes well before a whole-paragraph synthesis
    assert para["batch"]["ratio_p50"] < 0.8
    assert doc["budgets"]["ok"] and doc["budgets"]["violations"] == []
    hist = _history(isolated_env)
    assert len(hist) == 1 and hist[0]["metrics"]["ttfa_ms"]["p50"] == doc["overall"]["ttfa_ms"]["p50"]


def test_budget_exceeded_exits_1_naming_metric_and_value(runner, real_voice, isolated_env):
    r = runner.invoke(app, ["bench", "ttfa", "--text", "Hello there.", "--runs", "2", "--warmup", "0", "--json",
                            "--max-p95-ms", "0.5"], catch_exceptions=False)
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    measured = doc["overall"]["ttfa_ms"]["p95"]
    assert f"budget exceeded: TTFA p95 {measured:.1f} ms > 0.5 ms" in r.stderr
    assert doc["budgets"]["violations"][0]["option"] == "--max-p95-ms"
    assert len(_history(isolated_env)) == 1 and _history(isolated_env)[0]["budgets_ok"] is False


def test_budget_from_config_and_table_on_stderr(runner, real_voice, isolated_env):
    (isolated_env / "config.toml").write_text("[bench]\nmax_p50_ms = 0.25\n")
    r = runner.invoke(app, ["bench", "ttfa", "--text", "Hi.", "--runs", "2", "--warmup", "0"],
                      catch_exceptions=False)
    assert r.exit_code == 1 and r.stdout == ""
    assert "TTFA ms" in r.stderr and "histogram" in r.stderr
    assert "budget exceeded: TTFA p50" in r.stderr and "(--max-p50-ms" in r.stderr
    # a generous flag beats the config
    r = runner.invoke(app, ["bench", "ttfa", "--text", "Hi.", "--runs", "1", "--warmup", "0", "--quiet",
                            "--max-p50-ms", "60000", "--no-history"], catch_exceptions=False)
    assert r.exit_code == 0 and len(_history(isolated_env)) == 1


def test_bench_history_trend(runner, isolated_env):
    r = runner.invoke(app, ["bench", "history"], catch_exceptions=False)
    assert r.exit_code == 0 and "no bench history yet" in r.stderr
    data = isolated_env / "data"
    data.mkdir()
    lines = []
    for i, p50 in enumerate((80.0, 60.0, 45.0)):
        lines.append(json.dumps({
            "schema": "voxcli.bench.history/1", "timestamp": f"2026-01-0{i + 1}T00:00:00", "voxcli_version": "0",
            "voice": "v", "texts": ["short"], "runs": 5, "budgets_ok": True,
            "metrics": {"ttfa_ms": {"p50": p50, "p95": p50 * 2}, "rtf": {"p50": 0.1, "p95": 0.2}},
        }))
    (data / "bench_history.jsonl").write_text("\n".join(lines) + "\nnot json\n")
    r = runner.invoke(app, ["bench", "history"], catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout == ""
    assert "3 run(s)" in r.stderr and "TTFA ms" in r.stderr and "-25%" in r.stderr  # 60 -> 45
    r = runner.invoke(app, ["bench", "history", "--json", "--last", "2"], catch_exceptions=False)
    assert [e["metrics"]["ttfa_ms"]["p50"] for e in json.loads(r.stdout)] == [60.0, 45.0]


def test_bench_ttfa_usage_errors(runner):
    r = runner.invoke(app, ["bench", "ttfa", "--text", "a", "--file", "b"])
    assert r.exit_code == 2 and "not both" in r.stderr
    r = runner.invoke(app, ["bench", "ttfa", "--compare", "piper"])
    assert r.exit_code == 2 and "--compare must be 'batch'" in r.stderr
    r = runner.invoke(app, ["bench", "ttfa", "--file", "/nonexistent/x.txt"])
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_dash_v_is_verbose_not_voice(runner):
    """`-v` is the global --verbose; `bench ttfa -v` used to take the next word as a voice name."""
    r = runner.invoke(app, ["bench", "ttfa", "-v", "--compare", "piper"])
    assert r.exit_code == 2 and "--compare must be 'batch'" in r.stderr, r.stderr
    r = runner.invoke(app, ["bench", "ttfa", "--help"], env={"COLUMNS": "200"})
    voice_line = next(line for line in r.stdout.splitlines() if "--voice" in line)
    assert "-v " not in voice_line and "-v," not in voice_line


def test_settings_come_from_env_and_config_and_the_flag_wins(runner, isolated_env, monkeypatch):
    """bench ttfa reads tts.voice, bench.runs/warmup and the budgets through the one resolver."""
    from voxcli.cli.bench import TTFASettings, ttfa_settings

    (isolated_env / "config.toml").write_text('[tts]\nvoice = "cfg-voice"\n[bench]\nruns = 7\nmax_p95_ms = 300\n')
    monkeypatch.setenv("VOXCLI_BENCH_RUNS", "3")
    monkeypatch.setenv("VOXCLI_BENCH_MAX_P50_MS", "120")
    assert ttfa_settings(None, None, None, None, None) == TTFASettings(
        voice="cfg-voice", runs=3, warmup=1, max_p50_ms=120.0, max_p95_ms=300.0)
    assert ttfa_settings("flag-voice", 2, 0, 50.0, 60.0) == TTFASettings(
        voice="flag-voice", runs=2, warmup=0, max_p50_ms=50.0, max_p95_ms=60.0)


def test_views_render_plain_and_rich_from_the_same_rows(capsys):
    """Without a terminal the bench tables are plain aligned text; on one, rich draws the same rows."""
    from voxcli.cli.views.bench import show_history

    entries = [{"timestamp": f"2026-01-0{i}", "metrics": {"ttfa_ms": {"p50": v, "p95": v * 2}}}
               for i, v in ((1, 80.0), (2, 60.0), (3, 45.0))]
    show_history(entries, ("ttfa_ms", "rtf"), "h.jsonl", fancy=False)
    plain = capsys.readouterr().err
    assert plain.splitlines()[0] == "bench history: 3 run(s), 2026-01-01 .. 2026-01-03 (h.jsonl)"
    assert plain.splitlines()[2].split() == ["TTFA", "ms", "█▄▁", "80.0", "60.0", "45.0", "90.0", "-25%"]
    show_history(entries, ("ttfa_ms", "rtf"), "h.jsonl", fancy=True)
    rich = capsys.readouterr().err
    assert "3 run(s)" in rich and "█▄▁" in rich and "-25%" in rich


def test_ledger_measured_marks_each_term(runner, real_cache, isolated_env):
    from voxcli.chat.turnlog import TurnClock, append_turn, make_record

    (isolated_env / "config.toml").write_text("[asr]\nendpoint_ms = 420\n")
    for ttft in (0.2, 0.3, 0.4):
        clock = TurnClock(speech_end=0.0, endpoint=0.42, asr_final=0.45, llm_request=0.46,
                          llm_first_token=0.46 + ttft, first_audio=0.56 + ttft)
        append_turn(make_record(1, clock, user="hi", assistant="hello", interrupted=False, cut_off=False, llm="t"))
    r = runner.invoke(app, ["ledger", "--measured", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    src = doc["sources"]
    assert src["endpoint_ms"] == "config" and doc["terms"]["endpoint_ms"] == 420
    assert src["llm_ttft_ms"] == "turn log" and doc["terms"]["llm_ttft_ms"] == pytest.approx(300.0)
    assert src["uplink_ms"] == src["downlink_ms"] == src["hops_ms"] == "assumed"
    assert src["asr_tail_ms"] == "measured" and 0 < doc["terms"]["asr_tail_ms"] < 5000
    import importlib.util

    if importlib.util.find_spec("voxcli.runtimes.piper.voice") is not None:
        assert src["tts_first_audio_ms"] == "measured"
        assert 0 < doc["terms"]["tts_first_audio_ms"] < 5000
        assert doc["measurements"]["tts_first_audio_ms"]["detail"].startswith("median warm TTFA of 5 runs")
    assert doc["measurements"]["asr_tail_ms"]["detail"].startswith("median of 3 final decodes")


def test_cold_runs_are_reported_separately(runner, real_voice, isolated_env):
    r = runner.invoke(app, ["bench", "ttfa", "--text", "Hi there.", "--runs", "1", "--warmup", "0", "--cold",
                            "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    cold = doc["texts"][0]["cold"]["runs"]
    assert len(cold) == 1 and doc["cold"]["runs"] == 1
    # a fresh process pays interpreter start, imports and the model load on top of the warm TTFA
    assert cold[0] > doc["texts"][0]["runs"][0]["ttfa_ms"]
    assert doc["overall"]["ttfa_ms"]["n"] == 1  # cold runs are not pooled with warm ones
    assert "cold_ttfa_ms" in _history(isolated_env)[0]["metrics"]


def test_bench_ttfa_agrees_with_speak_stats(runner, real_voice, isolated_env):
    text = "Hello there. This is a test."
    out = isolated_env / "speak.wav"
    speak_ttfa = []
    for _ in range(3):
        r = runner.invoke(app, ["speak", text, "-o", str(out), "--json"], catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        final = [json.loads(x) for x in r.stdout.splitlines() if x.strip()][-1]
        speak_ttfa.append(final["stats"]["ttfa_s"] * 1000.0)
    r = runner.invoke(app, ["bench", "ttfa", "--text", text, "--runs", "3", "--warmup", "1", "--json"],
                      catch_exceptions=False)
    bench = json.loads(r.stdout)["texts"][0]["summary"]["ttfa_ms"]
    speak_p50 = sorted(speak_ttfa)[1]
    # same text, same streamer: the same order of magnitude on a shared, noisy CPU
    assert bench["p50"] / 4 - 50 < speak_p50 < bench["p50"] * 4 + 50
