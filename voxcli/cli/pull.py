"""`voxcli pull`, `voxcli models`, `voxcli rm`: the model cache from the command line."""
from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.complete import complete_installed_model, complete_model
from voxcli.errors import UsageError

PULL_HELP = """\
Download, verify and install models into the cache.

NAME is a catalog name (see `voxcli models`), an https:// URL of a file or
archive (.tar.gz, .tar.bz2, .zip), or a local directory or archive.
Models that ship inside an installed Python package are found in place.

[bold]Examples[/bold]

  voxcli pull --defaults                         the default TTS, ASR and VAD models
  voxcli pull moonshine-tiny-en
  voxcli pull smollm2-135m-instruct              the on-device chat LLM (98 MB)
  voxcli pull ./my-voice.tar.gz --name myvoice   a voice of your own
  voxcli pull https://example.org/v.onnx --name v --sha256 HEX
"""

MODELS_HELP = """\
List known and installed models: kind, size, licence, status.

[bold]Examples[/bold]

  voxcli models
  voxcli models --json | jq '.[] | select(.status != "missing") | .name'
  voxcli models --path piper-joe-medium          print the model's directory
"""

RM_HELP = """\
Remove a model (and what was built from it) from the cache.

[bold]Example[/bold]

  voxcli rm smollm2-135m-instruct
"""


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n else "-"


def register(app: typer.Typer) -> None:
    @app.command("pull", help=PULL_HELP, short_help="Download, verify and install models into the cache.")
    @guarded
    def pull_cmd(
        names: Annotated[Optional[list[str]], typer.Argument(metavar="NAME|URL|PATH", help="Model(s) to install.", show_default=False, autocompletion=complete_model)] = None,
        defaults: Annotated[bool, typer.Option("--defaults", help="Install every default model.")] = False,
        name: Annotated[Optional[str], typer.Option("--name", help="Name for a model pulled from a URL or path.")] = None,
        sha256: Annotated[Optional[str], typer.Option("--sha256", help="Expected sha256 of a URL/path download.")] = None,
        kind: Annotated[Optional[str], typer.Option("--kind", help="Kind of a URL/path model (tts, asr, vad, llm, data); guessed if omitted.")] = None,
        force: Annotated[bool, typer.Option("--force", help="Download and install again even if present.")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Progress and results as JSON lines on stdout.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    ) -> None:
        from voxcli.cli.views.progress import make_progress
        from voxcli.hub.adhoc import pull_adhoc
        from voxcli.hub.catalog import load_catalog
        from voxcli.hub.registry import default_names, pull_many

        targets = list(names or [])
        if defaults:
            targets = default_names() + [t for t in targets if t not in default_names()]
        if not targets:
            raise UsageError("nothing to pull", hint="give a model name (see `voxcli models`) or --defaults")
        if STATE.offline:
            raise UsageError("cannot pull while offline", hint="drop --offline / unset VOXCLI_OFFLINE")
        if sha256 is not None and (len(sha256) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha256)):
            raise UsageError(f"--sha256 must be 64 hex digits, got {sha256!r}")
        catalog = load_catalog()
        known = [t for t in targets if t in catalog]
        other = [t for t in targets if t not in catalog]
        if name and len(other) != 1:
            raise UsageError("--name applies to exactly one URL or path")
        progress = make_progress(json_out, quiet)
        try:
            bundles = pull_many(known, force=force, on_progress=progress) if known else []
            for src in other:
                if not src.startswith(("http://", "https://")) and "/" not in src and not src.startswith("."):
                    from pathlib import Path

                    if not Path(src).exists():
                        from voxcli.errors import ModelNotFoundError

                        raise ModelNotFoundError(
                            f"unknown model {src!r}",
                            hint="known models: " + ", ".join(sorted(catalog)) + "; or give a URL or a path",
                        )
                bundles.append(pull_adhoc(src, name=name, sha256=sha256, kind=kind, force=force, on_progress=progress))
        finally:
            close = getattr(progress, "close", None)
            if close:
                close()
        if json_out:
            for b in bundles:
                print(json.dumps({"event": "installed", "name": b.name, "kind": b.kind, "origin": b.origin, "path": str(b.path)}))

    @app.command("models", help=MODELS_HELP, short_help="List known and installed models.")
    @guarded
    def models_cmd(
        json_out: Annotated[bool, typer.Option("--json", help="One JSON array on stdout.")] = False,
        path: Annotated[Optional[str], typer.Option("--path", metavar="NAME", help="Print the directory of an installed model.", autocompletion=complete_installed_model)] = None,
        kind: Annotated[Optional[str], typer.Option("--kind", help="Only models of this kind.")] = None,
    ) -> None:
        from voxcli.hub.cache import Cache
        from voxcli.hub.catalog import load_catalog
        from voxcli.hub.registry import installed_bundle, status

        cache = Cache.default()
        if path is not None:
            b = installed_bundle(path, cache)
            if b is None:
                from voxcli.errors import ModelNotFoundError

                raise ModelNotFoundError(f"model {path!r} is not installed", hint=f"run `voxcli pull {path}`")
            print(b.path)
            return
        rows = []
        for entry in load_catalog().values():
            rows.append({
                "name": entry.name, "kind": entry.kind, "default": entry.default, "size": entry.size,
                "license": entry.license, "status": status(entry, cache), "description": entry.description,
            })
        known = {r["name"] for r in rows}
        for n, m in cache.installed().items():
            if n not in known:
                rows.append({
                    "name": n, "kind": m.get("kind", "data"), "default": False,
                    "size": sum(f.get("size", 0) for f in m.get("files", [])), "license": m.get("license", ""),
                    "status": "installed", "description": "pulled from " + ", ".join(m.get("sources", [])),
                })
        if kind:
            rows = [r for r in rows if r["kind"] == kind]
        if json_out:
            print(json.dumps(rows, indent=2))
            return
        from voxcli.cli.views.progress import fancy_terminal

        if fancy_terminal():
            from rich.console import Console
            from rich.table import Table

            t = Table(title=f"models (cache: {cache.root})", title_justify="left")
            for col in ("name", "kind", "size", "licence", "status", "description"):
                t.add_column(col, no_wrap=col != "description")
            style = {"package": "green", "installed": "green", "missing": "yellow"}
            for r in rows:
                t.add_row(r["name"] + (" [bold]*[/]" if r["default"] else ""), r["kind"], _fmt_size(r["size"]),
                          r["license"], f"[{style[r['status']]}]{r['status']}[/]", r["description"])
            Console(stderr=False).print(t)
            err("* default model")
        else:
            for r in rows:
                print(f"{r['name'] + ('*' if r['default'] else ''):26} {r['kind']:5} {_fmt_size(r['size']):>9}  "
                      f"{r['license']:11} {r['status']:9} {r['description']}")

    @app.command("rm", help=RM_HELP, short_help="Remove a model from the cache.")
    @guarded
    def rm_cmd(name: Annotated[str, typer.Argument(help="Model name.", autocompletion=complete_installed_model)]) -> None:
        from voxcli.hub.registry import remove

        remove(name)
        err(f"removed {name}")
