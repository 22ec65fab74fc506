"""`voxcli chat` end to end: our TTS speaks the user's turns, the real ASR hears them, a real
HTTP server on 127.0.0.1 answers, our TTS speaks the replies into a file, our ASR reads them back.

Conversations run in real time (turn taking and barge-in are wall-clock behaviour), so each
test takes 10-20 s; assertions are on behaviour (what was heard, what the server saw), not speed.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.no_portaudio import env_without_portaudio
from tests.llm.chat_completions_server import ChatServer, Script, free_port
from voxcli.asr.models import chat_asr
from voxcli.bench.wer import word_errors
from voxcli.cli.app import app

KEY = "sk-chat-test-SECRET-0123456789"
Q1 = "What is the capital of France?"
Q2 = "Wait, stop. Tell me about Germany instead."
A1 = ("The capital of France is Paris. It is a large city on the river Seine, famous for the Eiffel Tower, "
      "its museums, its cafes and its long history of art and science.")
A2 = "Germany is in central Europe. Its capital is Berlin."


@pytest.fixture(scope="session")
def turns(tmp_path_factory, voice_bundle) -> dict[str, Path]:
    """The user's utterances, spoken by our own TTS (at 22.05 kHz; chat resamples to 16 kHz)."""
    pytest.importorskip("voxcli.runtimes.piper.voice", reason="the Piper voice engine has not landed yet")
    from voxcli.audio.files import AtomicAudioWriter
    from voxcli.tts.streamer import load_voice

    voice = load_voice()
    d = tmp_path_factory.mktemp("chat-turns")
    out = {}
    for name, text in (("q1", Q1), ("q2", Q2)):
        with AtomicAudioWriter(d / f"{name}.wav", voice.sample_rate) as w:
            w.write(voice.synthesize(text))
        out[name] = d / f"{name}.wav"
    return out


@pytest.fixture(scope="session")
def asr_model(asr_bundle):
    from voxcli.runtimes.moonshine import MoonshineASR

    return MoonshineASR.load(asr_bundle.path)


@pytest.fixture
def runner(real_cache, monkeypatch) -> CliRunner:
    monkeypatch.setenv("COLUMNS", "120")
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates them
        return CliRunner()


def hear(asr_model, path: Path) -> str:
    """What our ASR understands in the reply file (VAD-segmented, lower case, no punctuation)."""
    from voxcli.audio.files import read_audio
    from voxcli.asr.endpointer import speech_segments
    from voxcli.runtimes.silero_vad import SileroVAD

    audio, _ = read_audio(path, 16000)
    vad = SileroVAD.resolve()
    words = []
    for a, b in speech_segments(vad, audio):
        words += [w.text for w in asr_model.transcribe(audio[a:b])]
    return " ".join("".join(ch for ch in " ".join(words).lower() if ch.isalnum() or ch.isspace()).split())


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_two_turns_spoken_heard_answered_and_read_back(runner, turns, asr_model, tmp_path, monkeypatch):
    monkeypatch.setenv("VOX_CHAT_KEY", KEY)
    out = tmp_path / "replies.wav"
    with ChatServer(Script(replies=[A2.replace("Germany", "France").replace("Berlin", "Paris"), A2],
                           token_delay=0.02)) as srv:
        r = runner.invoke(app, ["--debug", "chat", "--llm-url", srv.url, "--llm-model", "m1",
                                "--api-key-env", "VOX_CHAT_KEY", "--system", "Be brief.",
                                "--input", str(turns["q1"]), "--input", str(turns["q2"]), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.stderr
    evs = events(r.stdout)
    recs = [e for e in evs if e["event"] == "turn"]
    assert len(recs) == 2 and not any(t["interrupted"] or t["cut_off"] for t in recs)
    assert "capital of france" in recs[0]["user"].lower()
    for t in recs:  # every latency term of the turn was measured, in order
        assert 0 == t["speech_end_ms"] < t["endpoint_ms"] <= t["asr_final_ms"]
        if t["preemptive"]:  # asked on the speculative final (during the hold): nothing played before the endpoint
            assert t["endpoint_ms"] <= t["first_audio_ms"]
        else:
            assert t["asr_final_ms"] <= t["llm_request_ms"]
        assert t["llm_request_ms"] <= t["llm_first_token_ms"] <= t["first_audio_ms"]
        assert set(t["terms"]) >= {"endpoint_ms", "asr_tail_ms", "llm_ttft_ms", "tts_first_audio_ms"}
    assert any(e["event"] == "caption" and not e["is_final"] for e in evs)
    # The server saw the system prompt, the model name, the key, and the first exchange in the second request.
    # Q2 pauses after "Wait, stop.": a reply started on that speculative final is cancelled and counted.
    wasted = sum(t["wasted_preemptive"] for t in recs)
    assert len(srv.records) == 2 + wasted
    first, second = srv.records[0].body, srv.records[-1].body
    assert first["model"] == "m1" and first["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"].startswith("France is in central Europe.")
    assert srv.records[0].headers["authorization"] == f"Bearer {KEY}"
    if not wasted:  # (a cancelled stream closes its connection)
        assert len({rec.client_port for rec in srv.records}) == 1  # one connection for the conversation
    heard = hear(asr_model, out)
    # The voice samples its noise, so the ASR hears "its capital is Paris" as "its capitalist pairs" in one run
    # and "France" as "Francis" in another (2026-12-02): both replies, in order, by their word error rate
    # (those two: 0.167 and 0.111; a reply missing: 0.5).
    spoken = f"{A2.replace('Germany', 'France').replace('Berlin', 'Paris')} {A2}"
    assert word_errors(spoken, heard).rate <= 0.3, heard
    log = tmp_path / "data" / "turns.jsonl"
    log_text = log.read_text()
    assert len(log_text.splitlines()) == 2
    # each turn names the recognizer that heard it: chat's own (the fast tier unless asr.model says otherwise)
    assert {json.loads(x)["asr"] for x in log_text.splitlines()} == {chat_asr()}
    assert KEY not in r.stdout + r.stderr + log_text


def test_barge_in_cancels_the_reply_and_history_keeps_what_was_heard(runner, turns, asr_model, tmp_path):
    out = tmp_path / "replies.wav"
    with ChatServer(Script(replies=[A1, A2], token_delay=0.12)) as srv:
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--input", str(turns["q1"]),
                                "--input", f"{turns['q2']}@1.2", "-o", str(out), "--json"])
        assert r.exit_code == 0, r.stderr
        assert srv.wait_for(lambda: srv.records[0].client_gone, 3.0)  # the LLM request was cancelled mid-answer
    evs = events(r.stdout)
    recs = [e for e in evs if e["event"] == "turn"]
    assert recs[0]["interrupted"] and not recs[1]["interrupted"]
    barge = next(e for e in evs if e["event"] == "barge_in")
    kept = recs[0]["assistant"]
    assert kept == barge["heard"] and kept and A1.startswith(kept) and len(kept) < len(A1) / 2
    assert barge["user_words"]
    second = srv.records[1].body["messages"]
    assert second[1] == {"role": "assistant", "content": kept}
    heard = hear(asr_model, out)
    assert "capital of fran" in heard and "berlin" in heard, heard
    assert "museums" not in heard and "science" not in heard  # the cancelled tail was never played


def test_half_duplex_does_not_barge_in(runner, turns, tmp_path):
    with ChatServer(Script(replies=[A2], token_delay=0.01)) as srv:
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--half-duplex", "--input", str(turns["q1"]),
                                "--input", f"{turns['q2']}@0.3", "--json", "--no-log", "--verbose"])
    assert r.exit_code == 0, r.stderr
    assert "voxcli: threads per model: TTS " in r.stderr  # --verbose after the subcommand shows the budget
    recs = [e for e in events(r.stdout) if e["event"] == "turn"]
    assert recs and not recs[0]["interrupted"] and recs[0]["assistant"] == A2
    assert not any(e["event"] == "barge_in" for e in events(r.stdout))
    assert not (tmp_path / "data" / "turns.jsonl").exists()


def test_dropped_connection_speaks_what_arrived_then_says_so(runner, turns, asr_model, tmp_path):
    out = tmp_path / "replies.wav"
    with ChatServer(Script(replies=["Paris is the capital. It has many old bridges and parks."],
                           drop_after_bytes=1400)) as srv:
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--input", str(turns["q1"]), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.stderr
    rec = next(e for e in events(r.stdout) if e["event"] == "turn")
    assert rec["cut_off"] and rec["assistant"].startswith("Paris is the capital.")
    assert "parks" not in rec["assistant"]
    heard = hear(asr_model, out)
    # The voice samples its noise, so the ASR sometimes hears "parishes"/"iris": check the words that carry the meaning.
    assert "the capital" in heard.split("cut off")[0] and "cut off" in heard, heard
    assert heard.index("capital") < heard.index("cut off")


def test_slow_first_token_still_completes_and_is_logged(runner, turns):
    with ChatServer(Script(replies=["Paris."], first_token_delay=1.5)) as srv:
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--input", str(turns["q1"]), "--json"])
    assert r.exit_code == 0, r.stderr
    rec = next(e for e in events(r.stdout) if e["event"] == "turn")
    assert rec["terms"]["llm_ttft_ms"] >= 1500 and rec["assistant"] == "Paris."
    assert "ttft" in r.stderr


def test_server_down_exits_1_naming_the_url(runner, turns):
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = runner.invoke(app, ["chat", "--llm-url", url, "--input", str(turns["q1"])])
    assert r.exit_code == 1
    assert f"voxcli: error: cannot reach the LLM server at {url}/chat/completions" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("status", [401, 500])
def test_http_error_exits_1_with_status_and_message(runner, turns, status):
    with ChatServer(Script(status=status, error_message=f"model exploded ({status})")) as srv:
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--input", str(turns["q1"])])
    assert r.exit_code == 1
    assert f"HTTP {status}" in r.stderr and f"model exploded ({status})" in r.stderr


def test_usage_errors(runner, tmp_path):
    r = runner.invoke(app, ["chat", "--output", str(tmp_path / "x.wav")])
    assert r.exit_code == 2 and "--output needs --input" in r.stderr
    r = runner.invoke(app, ["chat", "--input", str(tmp_path / "missing.wav")])
    assert r.exit_code == 2 and "missing.wav" in r.stderr


def test_endpoint_mode_is_checked_before_models_load(runner, tmp_path, monkeypatch):
    r = runner.invoke(app, ["chat", "--endpoint", "psychic"])
    assert r.exit_code == 2 and "vad or semantic" in r.stderr and "Traceback" not in r.stderr
    monkeypatch.setenv("VOXCLI_ASR_ENDPOINT", "sometimes")
    r = runner.invoke(app, ["chat"])
    assert r.exit_code == 2 and "asr.endpoint" in r.stderr


def test_semantic_endpoint_answers_a_complete_question_after_the_short_hold(runner, turns, tmp_path):
    """--endpoint semantic: "What is the capital of France?" is a complete thought, so the turn ends
    after the streamer's short hold (`SEMANTIC_MIN_HOLD_MS`, 200 ms), not the VAD's 500 ms."""
    from voxcli.chat.turn_detector import SEMANTIC_MIN_HOLD_MS

    with ChatServer(Script(replies=["Paris."])) as srv:
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--endpoint", "semantic",
                                "--input", str(turns["q1"]), "--json", "--no-log"])
    assert r.exit_code == 0, r.stderr
    recs = [e for e in events(r.stdout) if e["event"] == "turn"]
    assert len(recs) == 1 and "capital of france" in recs[0]["user"].lower()
    # (stamps map samples to wall time at the 32 ms granularity of the mic's sends: a few ms either way)
    assert SEMANTIC_MIN_HOLD_MS - 40 <= recs[0]["endpoint_ms"] < 400
    assert recs[0]["first_audio_ms"] is not None


def test_help_shows_config_section_names(runner):
    """rich took `[chat]` in "default: config [chat] llm_url" for a markup tag and printed nothing."""
    r = runner.invoke(app, ["chat", "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0
    assert "default: config [chat] llm_url" in r.stdout


def test_settings_mic_is_devices_input_and_speaker_devices_output(isolated_env, monkeypatch):
    """Before: the mic was opened with devices.output and asr.model was ignored."""
    from voxcli.cli.chat import chat_settings

    (isolated_env / "config.toml").write_text(
        '[devices]\ninput = "cfg-mic"\noutput = "cfg-speaker"\n[asr]\nmodel = "cfg-asr"\n[chat]\nbarge_in_ms = 450\n')
    s = chat_settings()
    assert (s.mic_device, s.speaker_device, s.asr_model) == ("cfg-mic", "cfg-speaker", "cfg-asr")
    assert (s.endpoint_ms, s.barge_in_ms, s.url) == (500.0, 450.0, None)
    monkeypatch.setenv("VOXCLI_DEVICES_INPUT", "env-mic")
    monkeypatch.setenv("VOXCLI_ASR_ENDPOINT_MS", "800")
    s = chat_settings()
    assert (s.mic_device, s.speaker_device, s.endpoint_ms) == ("env-mic", "cfg-speaker", 800.0)
    s = chat_settings(device="headset", model="flag-asr", endpoint_ms=300)  # --device names both directions
    assert (s.mic_device, s.speaker_device, s.asr_model, s.endpoint_ms) == ("headset", "headset", "flag-asr", 300.0)


def test_reply_flush_follows_tts_max_buffer_flush_ms(isolated_env, monkeypatch):
    """chat's replies honour the user's tts.max_buffer_flush_ms (before: always the built-in 1500 ms)."""
    from voxcli.cli.chat import chat_settings
    from voxcli.errors import UsageError

    assert chat_settings().flush_ms == 1500.0
    (isolated_env / "config.toml").write_text("[tts]\nmax_buffer_flush_ms = 400\n")
    assert chat_settings().flush_ms == 400.0
    monkeypatch.setenv("VOXCLI_TTS_MAX_BUFFER_FLUSH_MS", "-5")
    with pytest.raises(UsageError, match="max_buffer_flush_ms must be a finite number >= 0"):
        chat_settings()


def test_asr_model_from_the_config_is_used(runner, turns, isolated_env):
    (isolated_env / "config.toml").write_text('[asr]\nmodel = "no-such-asr-model"\n')
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = runner.invoke(app, ["chat", "--llm-url", url, "--input", str(turns["q1"]), "--no-log"])
    assert r.exit_code == 3, r.stderr  # before: the default model ran and the dead server failed the turn (exit 1)
    assert "unknown asr model 'no-such-asr-model'" in r.stderr


def test_the_microphone_is_devices_input(real_cache, isolated_env):
    """The mic comes from devices.input (before: devices.output, so this config was never read)."""
    (isolated_env / "config.toml").write_text('[devices]\ninput = "no-such-mic-anywhere"\n')
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = subprocess.run([sys.executable, "-m", "voxcli", "chat", "--llm-url", url, "--no-log"],
                       capture_output=True, text=True, timeout=180, env={**os.environ, "NO_COLOR": "1"})
    assert r.returncode == 5, r.stderr
    assert "no input device matches 'no-such-mic-anywhere'" in r.stderr
    assert "hint: chat from files instead: voxcli chat --input q.wav" in r.stderr


def test_without_portaudio_the_hint_fits_chat(tmp_path, real_cache):
    """Before: chat loaded four models, then hinted speak's "use -o out.wav or --raw"."""
    env = env_without_portaudio(tmp_path / "site")
    url = f"http://127.0.0.1:{free_port()}/v1"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "voxcli", "chat", "--llm-url", url, "--no-log"],
                       capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 5, r.stderr
    assert "PortAudio library not found" in r.stderr
    hint = [line for line in r.stderr.splitlines() if line.startswith("hint:")]
    assert hint and "voxcli chat --input q.wav -o replies.wav" in hint[0] and "--raw" not in hint[0], r.stderr
    assert time.monotonic() - t0 < 20  # no models loaded first


def test_ctrl_c_while_speaking_exits_130_promptly(turns, real_cache, tmp_path):
    with ChatServer(Script(replies=[A1 * 3], token_delay=0.05)) as srv:
        env = {**os.environ, "VOXCLI_CACHE_DIR": str(real_cache), "NO_COLOR": "1"}
        p = subprocess.Popen([sys.executable, "-m", "voxcli", "chat", "--llm-url", srv.url,
                              "--input", str(turns["q1"]), "-o", str(tmp_path / "r.wav"), "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        deadline = time.monotonic() + 90
        spoken = False
        for line in p.stdout:  # wait until the reply is being spoken
            if '"event": "spoken"' in line:
                spoken = True
                break
            assert time.monotonic() < deadline
        assert spoken
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=10)
        assert rc == 130 and time.monotonic() - t0 < 5.0
        assert "Traceback" not in p.stderr.read()
        assert srv.wait_for(lambda: srv.records[0].client_gone or srv.records[0].t_end is not None, 3.0)
    assert not (tmp_path / "r.wav").exists()  # no half-written output


def _pulse_null_sink() -> str | None:
    """The PulseAudio null sink .ci/run sets up (default sink, its monitor the default source)."""
    import shutil

    if not shutil.which("pactl") or not shutil.which("paplay"):
        return None
    r = subprocess.run(["pactl", "get-default-sink"], capture_output=True, text=True)
    return r.stdout.strip() or None if r.returncode == 0 else None


@pytest.mark.device
@pytest.mark.parametrize("duplex", ["--half-duplex", "--verbose"])
def test_live_mic_and_speaker_through_the_null_sink(turns, real_cache, duplex):
    """The real device path: speech played into the null sink is heard on its monitor, the reply is
    played into the same sink at full level; with --half-duplex the assistant never hears (and answers)
    itself, and full duplex (the default: the echo canceller on, --verbose to see its report) neither."""
    from voxcli.audio.devices import portaudio_error

    if (why := portaudio_error()) is not None:
        pytest.skip(f"{why} (apt-get install libportaudio2 to run the device tests)")
    sink = _pulse_null_sink()
    if sink is None:
        pytest.skip("no PulseAudio null sink here (see .ci/run)")
    if duplex == "--verbose":
        from voxcli.audio import aec

        if (why := aec.unavailable()) is not None:
            pytest.skip(f"{why}: chat runs half-duplex here, with no canceller to report")
    with ChatServer(Script(replies=[A2], token_delay=0.02)) as srv:
        env = {**os.environ, "VOXCLI_CACHE_DIR": str(real_cache), "NO_COLOR": "1"}
        p = subprocess.Popen([sys.executable, "-m", "voxcli", "chat", "--llm-url", srv.url, "--device", "pulse",
                              duplex, "--json", "--no-log"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            deadline = time.monotonic() + 90
            for line in p.stderr:  # models loaded, mic open (a fixed sleep was too short on a busy machine)
                if "Ctrl-C to end" in line:
                    break
                assert time.monotonic() < deadline
            tail: list[str] = []  # the rest of stderr, drained as it comes (--verbose logs every turn)
            drain = threading.Thread(target=lambda: tail.extend(p.stderr), daemon=True)
            drain.start()
            subprocess.run(["paplay", "-d", sink, str(turns["q1"])], check=True, timeout=30)
            assert srv.wait_for(lambda: srv.records and srv.records[0].t_end is not None, 30)
            time.sleep(6)  # the reply plays; any self-heard echo would start a second turn here
        finally:
            p.send_signal(signal.SIGINT)
            rc = p.wait(timeout=15)
        recs = [e for e in events(p.stdout.read()) if e["event"] == "turn"]
        drain.join(5)
        rest = "".join(tail)
    assert rc == 130
    assert len(srv.records) == 1 and "capital of france" in srv.records[0].body["messages"][-1]["content"].lower()
    assert len(recs) == 1 and recs[0]["assistant"] == A2 and not recs[0]["interrupted"]
    if duplex == "--verbose":  # the canceller ran, measured the sink's echo path and says so
        assert re.search(r"echo canceller: [\d.]+ s of reply heard; echo -?\d+ ms later than the devices' "
                         r"timestamps say; ERLE [\d.]+ dB", rest), rest[-2000:]


def test_json_into_a_closed_pipe_ends_quietly(turns, real_cache):
    """`voxcli chat --json | head -n 2`: no traceback from the worker threads, exit 0."""
    with ChatServer(Script(replies=[A2], token_delay=0.01)) as srv:
        chat = subprocess.Popen(
            [sys.executable, "-m", "voxcli", "chat", "--llm-url", srv.url, "--input", str(turns["q1"]), "--json", "--no-log"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1"},
        )
        assert chat.stdout is not None
        first = [chat.stdout.readline() for _ in range(2)]
        chat.stdout.close()  # what `head -n 2` does
        _, err = chat.communicate(timeout=120)
    assert all(line.startswith("{") for line in first)
    assert chat.returncode == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err


def test_progress_timeout_cuts_off_a_server_that_only_sends_keep_alives(runner, turns):
    """Issue 18 item 6: after the first tokens the server sends only SSE comments; `--progress-timeout 1` ends
    the answer after 1 s without new text (before, `chat` had no such flag and waited for first-token-timeout)."""
    script = Script(replies=["Paris is the capital of France."], stall_after=3, stall_mode="comments")
    with ChatServer(script) as srv:
        t0 = time.monotonic()
        r = runner.invoke(app, ["chat", "--llm-url", srv.url, "--input", str(turns["q1"]),
                                "--progress-timeout", "1", "--json", "--no-log"])
    assert r.exit_code == 0, r.stderr
    evs = events(r.stdout)
    notice = next(e for e in evs if e["event"] == "notice" and e.get("kind") == "cut_off")
    assert "no new text for 1 s" in notice["message"]
    rec = next(e for e in evs if e["event"] == "turn")
    assert rec["cut_off"] and time.monotonic() - t0 < 30
