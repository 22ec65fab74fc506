"""`voxcli config path|show|get|set|unset`: the user config file from the command line."""
from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from voxcli.cli.errors import err, guarded
from voxcli.cli.complete import complete_config_key
from voxcli.cli.options import JsonOpt

HELP = """\
Show and change the user config file (TOML).

Precedence for every setting: command-line flag > environment
(VOXCLI_SECTION_KEY, e.g. VOXCLI_TTS_VOICE) > config file > built-in default.

[bold]Examples[/bold]

  voxcli config path                     where the file is
  voxcli config show                     every value and its source
  voxcli config set tts.voice piper-joe-medium
  voxcli config set bench.max_p95_ms 250    a CI latency budget
  voxcli config unset chat.llm_url
  voxcli config show --json | jq -r '.values["asr.model"].value'
"""

KeyArg = Annotated[str, typer.Argument(metavar="KEY", help="Dotted key, e.g. tts.voice (see `voxcli config show`).",
                                       autocompletion=complete_config_key)]


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


@guarded
def config_path_cmd() -> None:
    """Print the config file's path (it may not exist yet)."""
    from voxcli.config import config_path

    print(config_path())


@guarded
def config_show(json_out: JsonOpt = False) -> None:
    """Print every key's effective value and where it came from."""
    from voxcli.config import config_path, load_config
    from voxcli.config_write import effective_settings

    cfg = load_config()
    settings = effective_settings()
    if json_out:
        print(json.dumps({
            "path": str(config_path()), "exists": cfg.exists, "warnings": list(cfg.warnings),
            "values": {s.key: {"value": s.value, "source": s.source, "env": s.env, "type": s.type}
                       for s in settings},
        }, indent=2))
        return
    for w in cfg.warnings:
        err(f"voxcli: warning: {w}")
    err(f"# {cfg.path}" + ("" if cfg.exists else " (not created yet)"))
    width = max(len(s.key) for s in settings)
    vwidth = min(40, max(len(_fmt(s.value)) for s in settings))
    for s in settings:
        where = {"env": f"env {s.env}", "config": "config file"}.get(s.source, s.source)
        print(f"{s.key:<{width}}  {_fmt(s.value):<{vwidth}}  {where}")


@guarded
def config_get(key: KeyArg) -> None:
    """Print one key's effective value (empty line if unset)."""
    from voxcli.config_write import check_key, effective_settings

    check_key(key)
    s = next(s for s in effective_settings() if s.key == key)
    print("" if s.value is None else s.value)


@guarded
def config_set(key: KeyArg, value: Annotated[str, typer.Argument(metavar="VALUE", help="New value.")]) -> None:
    """Set KEY to VALUE in the config file (type-checked; comments and layout are kept)."""
    from voxcli.config import config_path
    from voxcli.config_write import set_key

    v = set_key(key, value)
    err(f"{key} = {v!r} in {config_path()}")


@guarded
def config_unset(key: KeyArg) -> None:
    """Remove KEY from the config file (back to env/default)."""
    from voxcli.config_write import unset_key

    err(f"{key} removed" if unset_key(key) else f"{key} was not set in the config file")


SUBCOMMAND_HELP = {
    "path": "Print the config file's path (it may not exist yet).\n\n  voxcli config path",
    "show": "Print every key's effective value and where it came from.\n\n"
            "  voxcli config show\n\n  voxcli config show --json",
    "get": "Print one key's effective value (empty line if unset).\n\n  voxcli config get tts.voice",
    "set": "Set KEY to VALUE in the config file (type-checked; comments and layout are kept).\n\n"
           "  voxcli config set asr.endpoint_ms 400\n\n  voxcli config set devices.output pulse",
    "unset": "Remove KEY from the config file (back to env/default).\n\n  voxcli config unset chat.llm_url",
}


def register(app: typer.Typer) -> None:
    config_app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode="rich",
                             short_help="Show and change the user config file.")
    app.add_typer(config_app, name="config")
    for name, fn in (("path", config_path_cmd), ("show", config_show), ("get", config_get),
                     ("set", config_set), ("unset", config_unset)):
        config_app.command(name, help=SUBCOMMAND_HELP[name])(fn)
