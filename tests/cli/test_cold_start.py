"""The cold start of `speak --raw` stays lean (issue 15), in behaviour terms, never timing.

What made it slow: typer's pydantic adapters (imported to convert options
left at None), every command module imported and converted to click for one
command, `hub.pull` imported to set a progress hook, and numpy's OpenBLAS
worker spinning a core while the voice loaded. The guards: a real `speak
--raw` imports none of them (and runs BLAS on one thread) and still writes
its PCM; the plain-value conversion that replaces the adapters gives exactly
what the adapter gives, for every option of every command; a command line
builds only its command's module, and every name in `COMMANDS` is what that
module registers.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import typer
import typer.main

from voxcli.cli import coercion
from voxcli.cli.app import COMMAND_MODULES, COMMANDS, app, build_app, modules_for

NOT_ON_THE_SPEAK_PATH = ("pydantic", "typer._adapters", "voxcli.hub.pull", "voxcli.cli.transcribe",
                         "voxcli.cli.chat", "voxcli.cli.pull", "voxcli.cli.bench", "voxcli.cli.ledger")


# `python -m voxcli speak ...` that lists the modules loaded by the time it exits (after the audio).
_LIST_MODULES = ("import atexit, os, runpy, sys; "
                 "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + chr(10) + "
                 "'BLAS ' + os.environ.get('OPENBLAS_NUM_THREADS', '-') + chr(10))); "
                 "runpy.run_module('voxcli', run_name='__main__', alter_sys=True)")


def test_speak_raw_writes_pcm_without_the_modules_it_does_not_need() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", _LIST_MODULES, "speak", "Hello there.", "--raw", "--quiet"],
                       capture_output=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert len(r.stdout) > 4000 and len(r.stdout) % 2 == 0  # s16le samples of real speech
    line = [ln for ln in r.stderr.decode().splitlines() if ln.startswith("MODULES ")]
    imported = set(line[-1].split()[1:])
    assert {"voxcli.cli.speak", "onnxruntime"} <= imported  # the list is the right one
    assert not [m for m in NOT_ON_THE_SPEAK_PATH if m in imported]
    # no OpenBLAS worker spinning a core while the sessions load (app._one_blas_thread)
    assert "BLAS 1" in r.stderr.decode().splitlines()


def test_a_command_line_builds_only_its_command() -> None:
    assert modules_for(["speak", "--raw", "hi"]) == ["speak"]
    assert modules_for(["--debug", "-v", "--offline", "models"]) == ["pull"]
    assert modules_for(["config", "get", "tts.voice"]) == ["config_cmd"]
    for everything in ([], ["--help"], ["-h", "speak"], ["--version"], ["no-such-command"], ["--zzz", "speak"]):
        assert modules_for(everything) == COMMAND_MODULES


def test_completion_builds_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_VOXCLI_COMPLETE", "complete_bash")
    assert modules_for(["speak"]) == COMMAND_MODULES


def _names(cli: typer.Typer) -> set[str]:
    return set(typer.main.get_command(cli).commands)  # type: ignore[attr-defined]


def test_commands_table_is_what_the_modules_register() -> None:
    assert _names(app) == set(COMMANDS)
    for module in COMMAND_MODULES:
        assert _names(build_app([module])) == {name for name, m in COMMANDS.items() if m == module}


def _params() -> Iterator[tuple[str, Any]]:
    def walk(prefix: str, cmd: Any) -> Iterator[tuple[str, Any]]:
        for p in cmd.params:
            yield prefix, p
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(f"{prefix} {name}", sub)

    yield from walk("voxcli", typer.main.get_command(app))


SAMPLES = ["hello", "", " x ", "\udcff", "12", "007", "+5", "-3", " 12 ", "1_000", "1.0", "1.5", ".5", "5.", "-0",
           "1e3", "1e400", "nan", "inf", "0x10", "99999999999999999999", "yes", "Off", " TRUE ", "2", "out.wav",
           "~/x", "a\x00b", "/", 0, 7, 100000, 1.5, True, False, Path("x.wav")]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def test_plain_values_convert_exactly_as_typers_adapters_do() -> None:
    from typer._coercion import build_runtime_param

    checked = 0
    for path, param in _params():
        desc = param.type_descriptor
        if param.multiple or param.nargs == -1 or desc.file_annotation is not None:
            continue
        real = build_runtime_param(desc)
        for value in [*SAMPLES, param.default]:
            if value is None:
                continue
            fast = coercion.fast_value(desc.annotation, desc.parameter_info, value, param, None)
            if fast is coercion.DECLINE:
                continue
            expected = real.coerce(value, param=param, ctx=None)
            assert _same(fast, expected), f"{path} {param.name}: {value!r} -> {fast!r}, typer: {expected!r}"
            checked += 1
    assert checked > 500  # the law was exercised on the real options, not vacuously


@pytest.mark.parametrize("args", [
    ["--rate", "1_0x"],
    ["--rate", "9" * 5000],  # past int()'s 4,300-digit limit: typer's usage error, not a traceback
    ["--max-buffer-flush-ms", "-5"],
])
def test_bad_values_still_get_typers_own_error(args: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "voxcli", "speak", "Hi.", "--raw", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    # the adapter's own wording follows (pydantic's, which may change); voxcli adds only the frame
    assert len(lines) == 2 and lines[0].startswith(f"voxcli: error: Invalid value for '{args[0]}': ")
    assert lines[1] == "hint: see `voxcli speak --help`"


def test_another_typer_keeps_its_own_conversion() -> None:
    """The fast path replaces a private typer method: only on the typer minor version it was checked against."""
    code = ("import typer; typer.__version__ = '0.99.0'\n"
            "from voxcli.cli.app import build_app; build_app(['speak'])\n"
            "from typer.core import _TyperParameter; print(getattr(_TyperParameter, '_voxcli_fast', False))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    r = subprocess.run([sys.executable, "-c", code.replace("0.99.0", typer.__version__)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == str(typer.__version__.startswith(coercion.TESTED_TYPER)), r.stderr
