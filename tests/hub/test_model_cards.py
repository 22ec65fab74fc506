"""Model cards: every catalog recognizer has a complete one, `voxcli models` shows it, `--json` carries it."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from voxcli.asr.models import RUNTIMES
from voxcli.cli.app import app
from voxcli.errors import UsageError
from voxcli.hub.catalog import load_catalog
from voxcli.hub.model_cards import ASR_FIELDS, card_problems

runner = CliRunner()
CARD_KEYS = {"name", "kind", "runtime", "languages", "params_m", "precision", "size_bytes", "license",
             "timestamps", "wer", "wer_words", "wer_espeak", "wer_espeak_words", "rtf", "streams", "dev_set",
             "reference_machine"}


def vox(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_every_catalog_asr_model_has_a_complete_card():
    asr = [e for e in load_catalog().values() if e.kind == "asr"]
    assert len(asr) >= 4
    for entry in asr:
        card = entry.card  # parsed and checked with the catalog
        assert card is not None and card.runtime in RUNTIMES and card.languages, entry.name
        assert 0 < card.wer < 0.5 and card.wer_words >= 100 and card.rtf > 0 and card.params_m > 0
        assert card.timestamps in ("real", "estimated") and card.size_bytes == entry.size and card.license
    # Whisper aligns words with its cross-attention; Moonshine's times are spread over the audio.
    by = {e.name: e.card for e in asr}
    assert by["whisper-tiny-en"].timestamps == "real" and by["moonshine-tiny-en"].timestamps == "estimated"
    assert all(e.card is None for e in load_catalog().values() if e.kind != "asr")


BAD_CARD = ('[models.my-asr]\nkind = "asr"\nlicense = "MIT"\nruntime = "moonshine"\n'
            '[models.my-asr.card]\nlanguages = ["en"]\nparams_m = 27\nprecision = "int8"\n'
            'timestamps = "guessed"\nwer = "low"\nwer_words = 10\nrtf = 0.3\n')


def test_a_card_with_missing_or_wrong_fields_is_named():
    raw = {"languages": ["en"], "params_m": 27, "precision": "int8", "timestamps": "guessed", "wer": "low",
           "wer_words": 10, "rtf": 0.3}  # BAD_CARD's table
    problems = card_problems(raw, runtime="moonshine", license="MIT")
    assert "streams missing" in problems and "wer should be int or float" in problems
    assert any(p.startswith("timestamps must be one of") for p in problems)
    missing = card_problems(raw, runtime=None, license="")
    assert "runtime missing (catalog `runtime` key)" in missing and "license missing" in missing
    assert card_problems("x", runtime="moonshine", license="MIT") == ["[card] is not a table"]
    assert set(ASR_FIELDS) <= CARD_KEYS


def test_a_malformed_card_is_one_error_line_when_the_catalog_loads(tmp_path, monkeypatch):
    cat = tmp_path / "cat.toml"
    cat.write_text(BAD_CARD)
    monkeypatch.setenv("VOXCLI_CATALOG", str(cat))
    with pytest.raises(UsageError, match=r"cat\.toml: bad catalog entry 'my-asr': bad card: .*streams missing"):
        load_catalog()
    for args in (["models"], ["models", "--path", "silero-vad"], ["models", "--info", "my-asr"]):
        r = vox(*args)
        assert r.exit_code != 0 and r.stdout == "", args
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert "bad card" in lines[0] and "my-asr" in lines[0] and "wer should be int or float" in lines[0], args


def test_a_card_on_another_kind_does_not_stop_the_catalog(tmp_path, monkeypatch):
    """Cards are ASR's: a user's TTS entry with a `card` table of its own loads, its table kept in `extra`."""
    cat = tmp_path / "cat.toml"
    cat.write_text('[models.my-voice]\nkind = "tts"\nlicense = "MIT"\n'
                   '[models.my-voice.card]\nnotes = "my own fields"\nwer = "n/a"\n')
    monkeypatch.setenv("VOXCLI_CATALOG", str(cat))
    entry = load_catalog()["my-voice"]
    assert entry.card is None and entry.extra["card"] == {"notes": "my own fields", "wer": "n/a"}
    r = vox("models", "--info", "my-voice")
    assert r.exit_code == 0 and "my-voice" in r.stdout, r.stderr


def test_models_info_shows_the_card(real_cache):
    r = vox("models", "--info", "whisper-base")
    assert r.exit_code == 0
    lines = dict(line.split(":", 1) for line in r.stdout.splitlines())
    assert lines["runtime"].strip() == "whisper-ct2" and lines["timestamps"].strip() == "real"
    assert "% on" in lines["WER"] and "words" in lines["WER"] and lines["licence"].strip() == "MIT"
    other = vox("models", "--info", "silero-vad")
    assert other.exit_code == 0 and "card:" in other.stdout and "WER" not in other.stdout
    missing = vox("models", "--info", "no-such-model")
    assert missing.exit_code != 0 and "unknown model 'no-such-model'" in missing.stderr


def test_models_json_carries_the_cards(real_cache):
    rows = json.loads(vox("models", "--json").stdout)
    for row in rows:
        if row["kind"] == "asr" and row["name"] in load_catalog():
            assert set(row["card"]) == CARD_KEYS, row["name"]
        elif row["kind"] != "asr":
            assert row["card"] is None
    one = json.loads(vox("models", "--info", "whisper-tiny-en", "--json").stdout)
    assert one["name"] == "whisper-tiny-en" and one["card"]["runtime"] == "whisper-ct2"
    table = vox("models", "--kind", "asr").stdout  # the plain table (not a terminal) adds the card in brief
    assert all("WER" in line and "RTF" in line for line in table.splitlines() if line.strip())
