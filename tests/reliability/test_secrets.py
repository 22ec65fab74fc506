"""The API key never leaves the Authorization header: not in stdout, stderr, logs, the turn log,
exception messages, reprs or `--debug` tracebacks, even when the server echoes it back."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from tests.cli.test_chat import runner, turns  # noqa: F401 - fixtures (real TTS-spoken user turns)
from tests.llm.chat_completions_server import ChatServer, Script, free_port
from voxcli.cli.app import app
from voxcli.errors import LLMError
from voxcli.llm.openai_compat import OpenAICompatClient

KEY = "sk-reliability-NEVER-SHOW-7f3a9c1e"
ENV = "VOX_RELIABILITY_KEY"


def _everything_written(root: Path) -> str:
    """Every byte voxcli could have written under the test's dirs (data dir, turn log, config, cache)."""
    out = []
    for p in root.rglob("*"):
        if p.is_file() and p.stat().st_size < 5_000_000:
            out.append(p.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(out)


SCENARIOS = {
    "ok": Script(replies=["Paris is the capital of France."]),
    "401-echoes-the-key": Script(status=401, error_message=f"invalid api key {KEY}"),
    "500-echoes-the-key": Script(status=500, error_message=f"upstream said Bearer {KEY} was bad"),
    "error-event-echoes-the-key": Script(replies=["x"], preamble=f'data: {{"error": {{"message": "bad key {KEY}"}}}}\n\n'.encode()),
    "drop-mid-answer": Script(replies=["Paris is the capital of France, a large city."], drop_after_bytes=300),
    # A proxy that echoes the request headers into the answer itself: spoken, printed, logged unless redacted.
    "reply-echoes-the-key": Script(replies=["Paris is the capital. Your request said"], echo_header="Authorization"),
    "one-delta-echoes-the-key": Script(replies=["Paris. Headers were"], echo_header="Authorization", one_delta=True),
}
ANSWERED = ("ok", "drop-mid-answer", "reply-echoes-the-key", "one-delta-echoes-the-key")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_key_never_appears_in_output_logs_turn_log_or_debug_traces(runner, turns, tmp_path, monkeypatch, caplog, scenario):  # noqa: F811
    monkeypatch.setenv(ENV, KEY)
    caplog.set_level(logging.DEBUG)  # httpx / httpcore debug logging included
    with ChatServer(SCENARIOS[scenario]) as srv:
        r = runner.invoke(app, ["--debug", "chat", "--llm-url", srv.url, "--api-key-env", ENV, "--input",
                                str(turns["q1"]), "-o", str(tmp_path / "out.wav"), "--json"])
        assert srv.records and srv.records[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert r.exit_code == (0 if scenario in ANSWERED else 1), r.stderr
    if scenario not in ANSWERED:
        assert "voxcli: error:" in r.stderr and "<redacted>" in r.stderr
    if "echoes-the-key" in scenario and scenario in ANSWERED:
        # The rest of the answer still arrives, with the key masked, in --json stdout and the turn log.
        assert "Bearer <redacted>" in r.stdout
        assert "Bearer <redacted>" in (tmp_path / "data" / "turns.jsonl").read_text()
    for where, text in (("stdout", r.stdout), ("stderr", r.stderr), ("logs", caplog.text),
                        ("files", _everything_written(tmp_path))):
        assert KEY not in text, f"the key leaked into {where}"
    if scenario == "ok":
        assert (tmp_path / "data" / "turns.jsonl").exists()  # the turn log was written and checked


def test_key_never_appears_in_exceptions_reprs_or_tracebacks(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    client = OpenAICompatClient(f"http://127.0.0.1:{free_port()}/v1", api_key_env=ENV)
    texts = [repr(client), str(client.__dict__), repr(client._client.auth), repr(vars(client._client))]
    with ChatServer(Script(status=403, error_message=f"key {KEY} revoked")) as srv:
        c = OpenAICompatClient(srv.url, api_key_env=ENV)
        with pytest.raises(LLMError) as e:
            list(c.stream([{"role": "user", "content": "hi"}]))
    texts += [str(e.value), repr(e.value), e.value.hint or "",
              "".join(traceback.format_exception(e.type, e.value, e.tb))]
    for t in texts:
        assert KEY not in t


def test_key_not_in_a_real_process_debug_run(turns, real_cache, tmp_path):  # noqa: F811
    """The console program itself (not CliRunner): --debug, an echoing server, stderr and stdout."""
    env = {**os.environ, ENV: KEY, "VOXCLI_CACHE_DIR": str(real_cache), "NO_COLOR": "1"}
    with ChatServer(Script(status=401, error_message=f"nope {KEY}")) as srv:
        p = subprocess.run([sys.executable, "-m", "voxcli", "--debug", "chat", "--llm-url", srv.url,
                            "--api-key-env", ENV, "--input", str(turns["q1"]), "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1 and "HTTP 401" in p.stderr
    assert KEY not in p.stdout + p.stderr + _everything_written(tmp_path)


@pytest.mark.parametrize("one_delta", [False, True], ids=["key-split-across-deltas", "key-in-one-delta"])
def test_a_key_echoed_into_the_answer_is_masked_before_any_consumer_sees_it(monkeypatch, one_delta):
    """The client boundary: every delta handed on is already redacted, wherever the server cut the key."""
    monkeypatch.setenv(ENV, KEY)
    script = Script(replies=["Your request said"], echo_header="Authorization", one_delta=one_delta)
    with ChatServer(script) as srv:
        deltas = list(OpenAICompatClient(srv.url, api_key_env=ENV).stream([{"role": "user", "content": "hi"}]))
    assert not one_delta or len(deltas) == 2  # the whole answer in one delta (+ the final)
    assert all(KEY not in d.text for d in deltas)
    assert "".join(d.text for d in deltas) == "Your request said Authorization: Bearer <redacted>"
    assert "cut_off" not in deltas[-1].metrics
