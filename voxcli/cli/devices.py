"""`voxcli devices`: list the audio devices PortAudio sees (for `--device`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from voxcli.cli.errors import guarded

HELP = """\
List audio input and output devices (index, name, host API, channels,
default rate). Pass an index or part of a name to `--device`.

[bold]Examples[/bold]

  voxcli devices
  voxcli devices --json | jq -r 'select(.max_output_channels > 0) | .name'
  voxcli speak "Hello." --device pulse
"""


def register(app: typer.Typer) -> None:
    @app.command("devices", help=HELP)
    @guarded
    def devices(
        json_lines: Annotated[bool, typer.Option("--json", help="One JSON object per device on stdout.")] = False,
    ) -> None:
        from voxcli.audio.devices import list_devices
        from voxcli.cli.views.tts import render_devices
        from voxcli.errors import DeviceUnavailableError

        found = list_devices()
        if json_lines:
            for d in found:
                print(json.dumps(asdict(d)), flush=True)
            return
        if not found:
            raise DeviceUnavailableError("no audio devices found", hint="use -o out.wav or --raw to write audio instead")
        render_devices(found)
