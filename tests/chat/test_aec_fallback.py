"""`chat`'s echo-canceller choice and `doctor`'s report, with the package present and made missing."""
from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from voxcli.audio import aec
from voxcli.cli.app import app
from voxcli.cli.chat import _echo_canceller
from voxcli.doctor import check_aec


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pywebrtc_audio", None)  # the import raises ImportError


def test_default_is_aec_and_the_flags_reach_it() -> None:
    if aec.unavailable() is not None:
        pytest.skip(str(aec.unavailable()))
    cfg = _echo_canceller(half_duplex=False, no_aec=False, ns=True, agc=False, quiet=False)
    assert cfg == aec.AECConfig(ns=True, agc=False)
    assert _echo_canceller(half_duplex=True, no_aec=False, ns=False, agc=False, quiet=False) is None
    assert _echo_canceller(half_duplex=False, no_aec=True, ns=False, agc=False, quiet=False) is None


def test_missing_package_warns_once_and_falls_back(no_package, capsys) -> None:
    assert _echo_canceller(half_duplex=False, no_aec=False, ns=False, agc=False, quiet=False) is None
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("voxcli: warning: echo cancellation unavailable: pywebrtc-audio")
    assert err[0].endswith("half-duplex (mic closed while the assistant speaks)")
    assert _echo_canceller(half_duplex=False, no_aec=False, ns=False, agc=False, quiet=True) is None
    assert capsys.readouterr().err == ""
    # with --no-aec the user chose full duplex without it: nothing to warn about
    assert _echo_canceller(half_duplex=False, no_aec=True, ns=False, agc=False, quiet=False) is None
    assert capsys.readouterr().err == ""


def test_half_duplex_and_no_aec_contradict() -> None:
    r = CliRunner().invoke(app, ["chat", "--half-duplex", "--no-aec"])
    assert r.exit_code == 2 and "either --half-duplex or --no-aec" in r.output


def test_doctor_reports_aec(no_package) -> None:
    r = check_aec()
    assert r.status == "warn" and "pywebrtc-audio" in r.summary and "half-duplex" in (r.fix or "")


def test_doctor_reports_aec_available() -> None:
    if aec.unavailable() is not None:
        pytest.skip(str(aec.unavailable()))
    r = check_aec()
    assert r.status == "ok" and r.details["package"] == "pywebrtc-audio"
