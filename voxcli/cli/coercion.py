"""Plain option values (str, int, float, bool, Path) converted without pydantic.

Why: typer 0.29 converts every parameter through a pydantic `TypeAdapter` it
builds on first use, even for an option left at its default of None, and the
first one imports pydantic: ~45-60 ms of every `voxcli` start, about half of
what `speak --raw` had to lose to reach its cold-start target (issue 15). No
way of declaring an option avoids it (`parser=` is wrapped in an adapter too).

Every voxcli option is a plain scalar, so `install()` gives typer's parameters
a conversion that handles None itself and converts the values it can prove
equal to the adapter's (tests/cli/test_cold_start.py checks that law against
typer's own adapters for every option of every command). Anything else --
other types, odd spellings ("1_000", "1.0" for an int), and every value it
would reject -- goes to typer's adapter, so errors read exactly as before.
It replaces one private typer method, so it is gated on the typer minor version
it was checked against (`TESTED_TYPER`): any other typer keeps its own
conversion (correct, only slower), and a fast path that meets an unexpected
shape falls back to typer's own method.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable

TESTED_TYPER = "0.29."
"""The typer minor version whose `_TyperParameter.get_runtime_param` this module replaces."""
DECLINE: Any = object()
"""`fast_value`'s answer when only typer's adapter may decide."""

_INT = re.compile(r"[+-]?[0-9]{1,18}", re.ASCII)
"""At most 18 digits: int() refuses strings past 4,300 digits (ValueError), the adapter says why."""
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_BOOLS = {"": False, "0": False, "off": False, "f": False, "false": False, "n": False, "no": False,
          "1": True, "on": True, "t": True, "true": True, "y": True, "yes": True}
"""pydantic's lax bool strings (case-insensitive; typer turns blank into False first)."""


def _in_range(v: float, info: Any) -> Any:
    if (info.min is not None and v < info.min) or (info.max is not None and v > info.max):
        return DECLINE  # the adapter's message names the bound
    return v


def _number(annotation: type, info: Any, value: Any) -> Any:
    t = type(value)
    if annotation is int:
        if t is int:
            return _in_range(value, info)
        return _in_range(int(value), info) if t is str and _INT.fullmatch(value) else DECLINE
    if t is float or t is int:
        v = float(value)
    elif t is str and _FLOAT.fullmatch(value):
        v = float(value)
    else:
        return DECLINE
    return _in_range(v, info) if math.isfinite(v) else DECLINE


def fast_value(annotation: Any, info: Any, value: Any, param: Any = None, ctx: Any = None) -> Any:
    """`value` (not None) as typer's adapter for `annotation` would give it, or DECLINE."""
    if info.parser is not None or info.clamp:
        return DECLINE
    if annotation is str:
        return value if type(value) is str else DECLINE
    if annotation is bool:
        if type(value) is bool:
            return value
        return _BOOLS.get(value.strip().lower(), DECLINE) if type(value) is str else DECLINE
    if annotation is int or annotation is float:
        return _number(annotation, info, value)
    if annotation is Path and info.path_type is None:
        if type(value) is str and value and "\x00" not in value:
            value = Path(value)
        if not isinstance(value, Path):
            return DECLINE
        from typer._param_types import coerce_cli_path

        try:  # the same existence/permission checks as the adapter; a failure: let it say so
            return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)
        except Exception:  # noqa: BLE001 - the adapter re-raises it as typer's usage error
            return DECLINE
    return DECLINE


class _FastParam:
    """typer's `RuntimeParam` contract; typer's own one is built only when a value needs it."""

    def __init__(self, desc: Any, build: Callable[[], Any]) -> None:
        self.desc = desc
        self._build = build
        self._real: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:  # as typer's RuntimeParam.coerce, without building an adapter first
            return () if multi else None
        if not multi:
            v = fast_value(self.desc.annotation, self.desc.parameter_info, value, param, ctx)
            if v is not DECLINE:
                return v
        if self._real is None:
            self._real = self._build()
        return self._real.coerce(value, param=param, ctx=ctx)


def install() -> None:
    """Route typer's parameter conversion through `_FastParam` (once per process)."""
    import typer

    if not getattr(typer, "__version__", "").startswith(TESTED_TYPER):
        return  # another typer: its own conversion (correct, only slower)
    try:
        from typer._coercion import build_runtime_param
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - a reshaped typer: its own conversion
        return
    original = getattr(_TyperParameter, "get_runtime_param", None)
    if getattr(_TyperParameter, "_voxcli_fast", False) or original is None:
        return

    def get_runtime_param(self: Any) -> Any:
        try:
            if self._runtime_param is None:
                desc = self.type_descriptor
                self._runtime_param = (_FastParam(desc, lambda: build_runtime_param(desc))
                                       if desc.file_annotation is None else build_runtime_param(desc))
            return self._runtime_param
        except AttributeError:  # a field this module relies on is gone: typer's own method decides
            return original(self)

    _TyperParameter.get_runtime_param = get_runtime_param  # type: ignore[method-assign]
    _TyperParameter._voxcli_fast = True  # type: ignore[attr-defined]
