"""Eager argument validation for strategies; messages quote ``name=value``."""

from __future__ import annotations

from typing import Any, Iterable

from triton_conformance.errors import InvalidArgument


def check_bounds(where: str, *, min_value: int, max_value: int) -> None:
    for name, v in (("min_value", min_value), ("max_value", max_value)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InvalidArgument(f"{where}: {name}={v!r}, expected a non-negative int")
    if max_value < min_value:
        raise InvalidArgument(f"{where}: cannot have max_value={max_value!r} < min_value={min_value!r}")


def check_one_of(where: str, name: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidArgument(f"{where}: {name}={value!r}, expected one of {allowed}")
