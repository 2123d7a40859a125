"""The vLLM symbols a tree's patch registry declares, read by a format given as data.

vllm-ascend keeps its registry as comments (``vllm_ascend/patch/__init__.py``): entries headed by the
file that patches (``# ** 3. File: platform/patch_x.py**``), numbered items naming the symbols in
backticks, then fields (``Why:``, ``How:``...) whose prose may name symbols too but declares none.
A format is four regular expressions (``tree/layouts/*.toml``, or a tree's ``balance-patchgen.toml``):
``entry`` (its ``file`` group, relative to the registry's folder), ``item`` (a line that starts an
item; the lines after it continue it), ``field`` (a line that ends the items), ``symbol`` (its
``symbol`` group, searched in item lines). Without ``item``, every line declares what it names.
A registry is documentation: what it declares is compared with what the code does, never trusted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from generator.errors import UsageError


@dataclass(frozen=True)
class RegistryFormat:
    file: Path  # relative to the tree's root
    symbol: str
    entry: str | None = None
    item: str | None = None
    field: str | None = None

    def check(self, where: str) -> None:
        """Each pattern compiles and has the groups it must: bad input, refused before any tree is read."""
        for name, pattern, group in (
            ("symbol", self.symbol, "symbol"),
            ("entry", self.entry, "file"),
            ("item", self.item, None),
            ("field", self.field, None),
        ):
            if pattern is None:
                continue
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"{where}: {name} {pattern!r} is not a regular expression ({exc})") from None
            if group is not None and group not in compiled.groupindex:
                raise UsageError(f"{where}: {name} {pattern!r} needs a group named {group!r}: (?P<{group}>...)")


@dataclass(frozen=True)
class Declared:
    symbol: str  # as the registry writes it
    path: str  # the registry's file, relative to the root
    line: int
    entry: str | None = None  # the file the entry names, relative to the root (None: no entry header)


def read(text: str, registry: RegistryFormat) -> list[Declared]:
    """Every symbol ``text`` (the registry file) declares, in order."""
    symbol = re.compile(registry.symbol)
    entry = re.compile(registry.entry) if registry.entry else None
    item = re.compile(registry.item) if registry.item else None
    field = re.compile(registry.field) if registry.field else None
    folder = registry.file.parent
    out: list[Declared] = []
    current: str | None = None
    in_items = item is None
    for number, line in enumerate(text.splitlines(), 1):
        if entry is not None and (found := entry.search(line)) is not None:
            current = (folder / found["file"]).as_posix()
            in_items = item is None
            continue
        if item is not None and item.search(line):
            in_items = True
        elif field is not None and field.search(line):
            in_items = item is None
            continue
        if in_items:
            out += [Declared(m["symbol"], registry.file.as_posix(), number, current) for m in symbol.finditer(line)]
    return out


def listed(symbols: list[str], path: str, text: str) -> list[Declared]:
    """Symbols a tree lists by name (``[couplings] declared`` in balance-patchgen.toml), at their lines there."""
    lines = text.splitlines()
    out = []
    for symbol in symbols:
        line = next((n for n, content in enumerate(lines, 1) if f'"{symbol}"' in content), 0)
        out.append(Declared(symbol, path, line))
    return out
