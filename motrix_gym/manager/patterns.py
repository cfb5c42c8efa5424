"""Names matched by regular expressions (full match), the way every table of the task refers to
joints and bodies."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

T = TypeVar("T")


def first_match(patterns: Iterable[str], name: str) -> int | None:
    """Index of the first of ``patterns`` that matches ``name`` in full, or None."""
    return next((i for i, p in enumerate(patterns) if re.fullmatch(p, name)), None)


def lookup(table: Mapping[str, T], name: str) -> T | None:
    """The value of the first key of ``table`` (a regex) that matches ``name`` in full, or None."""
    i = first_match(table, name)
    return None if i is None else list(table.values())[i]
