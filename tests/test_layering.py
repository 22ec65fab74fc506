"""The layout's import rules, checked on the sources (docs/architecture.md says why each exists).

- Nothing below `cli/` imports typer, rich or click: the engine is a library.
- Each concern imports only the layers under it: `hub` knows nothing of speech,
  `runtimes` never sees the CLI or the streamers, `tts`/`asr` never see `chat`.
- `import voxcli` is free: no onnxruntime, numpy or httpx until a function is used.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "voxcli"

#: Top-level modules every layer may use: they import nothing of the layers below.
BASE = {"errors", "events", "paths", "config", "fsutil", "signals", "__init__"}

#: layer -> the voxcli layers (besides BASE and itself) it may import.
ALLOWED: dict[str, set[str]] = {
    "hub": set(),
    "audio": set(),
    "runtimes": {"hub"},
    "llm": {"runtimes", "hub"},
    "tts": {"runtimes", "hub", "audio"},
    "asr": {"runtimes", "hub", "audio"},
    "chat": {"tts", "asr", "llm", "runtimes", "hub", "audio"},
    "corpus": {"tts", "asr", "runtimes", "hub", "audio"},  # batches of files/lines over processes or Ray
    "bench": {"tts", "asr", "chat", "llm", "runtimes", "hub", "audio"},
    "doctor": {"tts", "asr", "runtimes", "hub", "audio", "llm"},
    # `config set asr.model X` checks X against the catalog; `config show` names the recognizer an unset
    # asr.model runs (asr.models.default_asr: the accurate tier where it was measured live here)
    "config_write": {"hub", "asr"},
}
ENGINE_LAYERS = sorted(set(ALLOWED) | BASE - {"__init__"})


def _layer(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[str]:
    """Every module named by an import statement anywhere in the file (also inside functions)."""
    names: list[str] = []
    pkg = ".".join(("voxcli",) + path.relative_to(ROOT).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the package
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names.append(mod)
            if mod == "voxcli":  # `from voxcli import tts` names a layer (`__version__` is no layer)
                names += [f"voxcli.{a.name}" for a in node.names if not a.name.startswith("__")]
    return names


def _engine_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if _layer(p) != "cli"]


def test_nothing_below_cli_imports_typer_rich_or_click():
    offenders = sorted(
        f"{p.relative_to(ROOT)}: {m}" for p in _engine_files() for m in _imports(p)
        if m.split(".")[0] in ("rich", "typer", "click")
    )
    assert offenders == []


def test_layers_import_only_what_they_sit_on():
    offenders = []
    for path in _engine_files():
        layer = _layer(path)
        if layer in BASE - {"__init__"}:
            allowed: set[str] = set()
        elif layer == "__init__" or layer == "__main__":
            continue  # the public API (lazy) and `python -m voxcli` may name any layer
        else:
            assert layer in ALLOWED, f"new top-level module or folder {layer!r}: give it a row in ALLOWED"
            allowed = ALLOWED[layer]
        for mod in _imports(path):
            parts = mod.split(".")
            if parts[0] != "voxcli" or len(parts) < 2:
                continue
            target = parts[1]
            if target in BASE or target == layer or target in allowed:
                continue
            offenders.append(f"{path.relative_to(ROOT)} ({layer}) imports {mod}")
    assert offenders == []


@pytest.mark.parametrize("forbidden, layer", [("cli", "runtimes"), ("tts", "hub"), ("asr", "hub"),
                                              ("chat", "tts"), ("chat", "asr")])
def test_rules_the_issue_names(forbidden: str, layer: str):
    """Spelled out: runtimes never import cli, hub knows nothing of TTS/ASR, the streamers not the agent."""
    assert forbidden not in ALLOWED[layer]
    offenders = [p for p in (ROOT / layer).rglob("*.py")
                 if any(m.startswith(f"voxcli.{forbidden}") for m in _imports(p))]
    assert offenders == []


def test_base_modules_import_no_layer():
    for name in sorted(BASE - {"__init__"}):
        mods = [m for m in _imports(ROOT / f"{name}.py") if m.startswith("voxcli.")]
        assert all(m.split(".")[1] in BASE for m in mods), (name, mods)


def test_rich_lives_only_under_cli_views():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "cli").rglob("*.py")
                 if "views" not in p.relative_to(ROOT).parts
                 and any(m.split(".")[0] == "rich" for m in _imports(p))]
    assert offenders == []


def test_engine_imports_neither_typer_nor_rich_at_run_time():
    mods = sorted({".".join(("voxcli",) + p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                   for p in _engine_files() if p.name != "__main__.py"})
    code = (
        "import sys, importlib\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        # httpx's own __init__ imports rich/click for its CLI when they are installed,
        # so at run time only typer is a reliable signal; the AST tests above cover rich.
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'typer')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_import_voxcli_is_cheap():
    code = "import sys, voxcli; print(','.join(m for m in ('onnxruntime', 'numpy', 'httpx') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == ""


def _function_lengths() -> list[tuple[str, int]]:
    out = []
    for path in _engine_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}",
                            node.end_lineno - node.lineno + 1))  # type: ignore[operator]
    return out


def test_modules_stay_small():
    big = [f"{p.relative_to(ROOT)}: {n}" for p in ROOT.rglob("*.py")
           if (n := p.read_text(encoding="utf-8").count("\n")) > 400]
    assert big == []


def test_functions_stay_short_outside_cli():
    assert [f"{name}: {n} lines" for name, n in _function_lengths() if n > 60] == []
