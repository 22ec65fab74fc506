"""The streaming chat-completions client against a real HTTP server on 127.0.0.1."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from tests.llm.chat_completions_server import ChatServer, free_port
from voxcli.errors import LLMError, UsageError
from voxcli.llm.base import METRIC_KEYS, LLMClient
from voxcli.llm.openai_compat import LLMTimeouts, OpenAICompatClient

KEY = "sk-test-THIS-MUST-NEVER-LEAK-42"
MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


@pytest.fixture
def server():
    with ChatServer() as srv:
        yield srv


def collect(client, messages=MSGS):
    return list(client.stream(messages))


def test_deltas_arrive_in_order_and_end_with_metrics(server):
    server.script.replies = ["Hello there. How can I help you today?"]
    with OpenAICompatClient(server.url, "m") as c:
        assert isinstance(c, LLMClient)
        deltas = collect(c)
    body = deltas[:-1]
    assert len(body) > 5 and all(not d.is_final for d in body)
    assert [d.index for d in body] == list(range(len(body)))
    assert "".join(d.text for d in body) == "Hello there. How can I help you today?"
    final = deltas[-1]
    assert final.is_final and final.text == ""
    assert set(METRIC_KEYS) <= set(final.metrics)
    assert final.metrics["prompt_tokens"] == 17 and "cut_off" not in final.metrics
    rec = server.records[0]
    assert rec.body["stream"] is True and rec.body["model"] == "m" and rec.body["messages"] == MSGS


def test_first_token_delay_is_measured(server):
    server.script.first_token_delay = 0.4
    with OpenAICompatClient(server.url) as c:
        final = collect(c)[-1]
    assert final.metrics["ttft_s"] >= 0.4


def test_persistent_connection_is_reused_across_turns(server):
    with OpenAICompatClient(server.url) as c:
        for i in range(3):
            assert collect(c)[-1].metrics.get("cut_off") is None
            if i == 1:
                time.sleep(5.5)  # longer than httpx's default keep-alive expiry: turns are seconds apart
    assert len(server.records) == 3
    assert len({r.client_port for r in server.records}) == 1


def test_cancel_mid_stream_closes_the_connection(server):
    server.script.replies = [" ".join(f"word{i}" for i in range(200))]
    server.script.token_delay = 0.02
    with OpenAICompatClient(server.url) as c:
        got = []
        t0 = None
        for d in c.stream(MSGS):
            got.append(d)
            if len(got) == 5:
                t0 = time.perf_counter()
                threading.Thread(target=c.cancel).start()
        dt = time.perf_counter() - t0
        assert got[-1].is_final and got[-1].metrics["cancelled"] == 1.0
        assert len(got) < 30 and dt < 1.0
        assert server.wait_for(lambda: server.records[0].client_gone, 3.0)
        # The next turn works on a fresh connection.
        server.script.token_delay = 0.0
        server.script.replies = ["Again."]
        assert "".join(d.text for d in c.stream(MSGS)) == "Again."
    assert server.records[1].client_port != server.records[0].client_port


def test_cancel_wakes_a_reader_blocked_before_the_first_token(server):
    server.script.first_token_delay = 10.0
    with OpenAICompatClient(server.url) as c:
        threading.Timer(0.3, c.cancel).start()
        t0 = time.perf_counter()
        deltas = collect(c)
        assert time.perf_counter() - t0 < 2.0
    assert len(deltas) == 1 and deltas[0].metrics["cancelled"] == 1.0


def test_server_down_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with OpenAICompatClient(url) as c, pytest.raises(LLMError) as e:
        collect(c)
    assert url in str(e.value) and "refused" in str(e.value)


@pytest.mark.parametrize("status", [401, 429, 500])
def test_http_errors_carry_status_and_server_message(server, status):
    server.script.status = status
    server.script.error_message = f"scripted failure {status}"
    with OpenAICompatClient(server.url) as c, pytest.raises(LLMError) as e:
        collect(c)
    assert f"HTTP {status}" in str(e.value) and f"scripted failure {status}" in str(e.value)


def test_drop_mid_answer_gives_what_arrived_then_a_cut_off_final(server):
    server.script.replies = ["One two three four five six seven eight nine ten."]
    server.script.drop_after_bytes = 700
    with OpenAICompatClient(server.url) as c:
        deltas = collect(c)
    text = "".join(d.text for d in deltas[:-1])
    assert text and "One two three four five six seven eight nine ten.".startswith(text)
    assert text != "One two three four five six seven eight nine ten."
    assert deltas[-1].is_final and deltas[-1].metrics["cut_off"] == 1.0


def test_drop_before_any_token_is_an_error(server):
    server.script.drop_after_bytes = 0
    with OpenAICompatClient(server.url) as c, pytest.raises(LLMError, match="closed the connection"):
        collect(c)


def test_first_token_timeout_with_keepalive_comments(server):
    server.script.first_token_delay = 3.0
    server.script.keepalive_comments = True
    with OpenAICompatClient(server.url, timeouts=LLMTimeouts(first_token=0.5)) as c:
        t0 = time.perf_counter()
        with pytest.raises(LLMError, match="within 0.5 s"):
            collect(c)
        assert time.perf_counter() - t0 < 2.5


def test_malformed_lines_are_skipped(server):
    server.script.reply_fn = lambda msgs: "fine"
    server.script.preamble = b'data: {not json\n\ndata: [1, 2]\n\nevent: ping\ndata: {}\n\nretry: x\nbogus line\n\n'
    with OpenAICompatClient(server.url) as c:
        assert "".join(d.text for d in collect(c)) == "fine"


def test_api_key_is_sent_but_never_shown(server, monkeypatch, caplog):
    monkeypatch.setenv("VOX_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    c = OpenAICompatClient(server.url, api_key_env="VOX_TEST_KEY")
    collect(c)
    assert server.records[0].headers["authorization"] == f"Bearer {KEY}"
    server.script.status = 401
    server.script.error_message = f"Incorrect API key provided: {KEY}"
    with pytest.raises(LLMError) as e:
        collect(c)
    c.close()
    shown = " ".join([str(e.value), repr(e.value), e.value.hint or "", repr(c), repr(c.__dict__), caplog.text])
    assert "HTTP 401" in shown and "<redacted>" in str(e.value)
    assert KEY not in shown


def test_missing_key_env_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("VOX_TEST_NOKEY", raising=False)
    with pytest.raises(UsageError, match="VOX_TEST_NOKEY"):
        OpenAICompatClient("http://127.0.0.1:1/v1", api_key_env="VOX_TEST_NOKEY")
