"""What a tree keeps, as data: its pin, and each copy of an upstream function it holds (a *spec*).

Three layouts, told apart by what the root holds:

- a declared layout: ``balance-patchgen.toml`` at the root lists the copies (docs/copies.md);
- vllm-ascend's own: its balance patch file holds ``class BalanceScheduler`` with its own
  ``schedule()``; the tool knows this layout, so the tree needs no file of the tool's;
- this project's: the copy is a whole generated module (``generated/balance_scheduler.py``),
  rendered from the jinja2 template (``pipeline``), not a region in somebody's file.

A spec names the upstream function, the destination (file, class, method) and the edits. An edit
is data (an anchor and what goes before, after or instead of it: ``edits``), or Python shipped with
the tool and named in the spec (``balance``: the three deltas, whose gate reads upstream's cap check).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from generator.builder.copy_forms import gate_form_names
from generator.builder.edit_data import KINDS, Edit, check_statements
from generator.errors import UsageError
from generator.judge.couplings.registry import RegistryFormat
from generator.pins.pin import PIN_FILE
from generator.pins.refs import MAIN_VERIFIED_FILE
from generator.sources.base import UPSTREAM_PATH
from generator.tags import validate_tag

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's machines run 3.11
    import tomli as tomllib

SPEC_FILE = Path("balance-patchgen.toml")
# vllm-ascend's layout (read from its source tree, 0.13.0rc1 on): the balance copy lives here.
VLLM_ASCEND_PATCH = Path("vllm_ascend/patch/platform/patch_balance_schedule.py")
VLLM_ASCEND_CLASS = "BalanceScheduler"
PROJECT_MODULE = Path("generated/balance_scheduler.py")
PROJECT_RUNTIME = (Path("vllm_ascend"), Path("generated"))
BALANCE = "balance"  # the Python edits named by a spec's `python = "balance"`


@dataclass(frozen=True)
class CopySpec:
    name: str
    upstream_class: str
    upstream_method: str
    destination: Path  # relative to the tree's root
    dest_class: str
    dest_method: str
    python: str | None = None  # named Python edits (only BALANCE today), applied before the data edits
    edits: tuple[Edit, ...] = ()
    gate_form: str | None = None  # balance only: the delta-2 form (copy_forms.FORMS); None: the copy's own
    upstream_file: str = UPSTREAM_PATH
    optional: bool = False  # skipped (and said so) where the tree has no such file or class
    # Kept by hand (its edits cannot be data yet): never rewritten; regen and check say how far it is
    # from upstream at the pin, statement by statement, so its drift stays visible.
    hand_kept: bool = False
    # The first vLLM release the edits were written against: a copy not yet generated (no markers) in a
    # tree pinned to an older release is left as it is, and said so; a generated one is always regenerated.
    since: str | None = None
    # Shipped with the tool (tree/layouts/), not the tree's own balance-patchgen.toml: its fix is in the tree's
    # copy of the specs, which ``specs export`` writes.
    shipped: bool = False

    @property
    def label(self) -> str:
        return f"{self.dest_class}.{self.dest_method}"

    @property
    def is_balance(self) -> bool:
        return self.python == BALANCE


@dataclass(frozen=True)
class Layout:
    root: Path
    kind: str  # "declared", "vllm-ascend", "project"
    origin: str  # where the specs come from, for messages
    copies: tuple[CopySpec, ...] = field(default=())
    pin: Path = PIN_FILE
    main_verified: Path = MAIN_VERIFIED_FILE
    # What couplings and impact read besides the code (docs/impact.md): the tree's patch registry, symbols
    # it declares by name, and the folders to read (none: the whole tree).
    registry: RegistryFormat | None = None
    declared: tuple[str, ...] = ()
    couplings_paths: tuple[Path, ...] = ()
    # The tree's own version gate helper, declared (``[gates] helper``, ``compares``): what ``adapt --span``
    # writes its gates with when the tree's reading finds none, or another than the one meant.
    gate_helper: str | None = None
    gate_op: str = "=="

    @property
    def is_tree(self) -> bool:
        """A consumer's tree: copies are regions of its files, not this project's generated module."""
        return self.kind != "project"

    def balance(self) -> CopySpec:
        found = [c for c in self.copies if c.is_balance]
        if len(found) != 1:
            raise UsageError(
                f'{self.origin} declares {len(found)} balance copies (python = "{BALANCE}"): declare exactly one'
            )
        return found[0]


def detect(root: Path) -> Layout:
    """The layout of ``root``: declared, vllm-ascend's, or this project's (the default)."""
    if (root / SPEC_FILE).is_file():
        return load(root)
    patch = root / VLLM_ASCEND_PATCH
    # This project has a patch file of that name too (its reference runtime, whose schedule() wraps the
    # generated module's): a root holding the generated module is this project's layout.
    if (root / PROJECT_MODULE).is_file():
        # Its couplings to vLLM are the reference runtime's (the tests and tools couple by design).
        return Layout(root, "project", "this project's layout", couplings_paths=PROJECT_RUNTIME)
    if patch.is_file():  # without the class or its schedule(), the copy's locator says which is missing
        return load_text(_known(BUILT_IN), root, "vllm-ascend", f"vllm-ascend's layout (built in: {BUILT_IN})")
    return Layout(root, "project", "this project's layout")


# The specs the tool ships for vllm-ascend's layout: the same format a tree declares its own in.
BUILT_IN = "layouts/vllm-ascend.toml"


def _known(name: str) -> str:
    return resources.files("generator.tree").joinpath(name).read_text(encoding="utf-8")


def require_tree(layout: Layout) -> Layout:
    """The command needs copies in a tree: refuse a root that is neither vllm-ascend's nor declares any."""
    if not layout.is_tree:
        raise UsageError(
            f"{layout.root} is no vllm-ascend tree ({VLLM_ASCEND_PATCH} with class {VLLM_ASCEND_CLASS} and its "
            f"schedule()) and declares no copies ({SPEC_FILE}): pass a vllm-ascend source tree, or declare the "
            "copies (docs/copies.md)"
        )
    return layout


def load(root: Path) -> Layout:
    path = root / SPEC_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path} ({exc}): check the file") from None
    return load_text(text, root, "declared", str(SPEC_FILE))


def load_text(text: str, root: Path, kind: str, where: str) -> Layout:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where} is not valid TOML ({exc}): fix it (docs/copies.md)") from None
    _only(data, {"pin", "main_verified", "copy", "registry", "couplings", "gates"}, where)
    raw = data.get("copy", [])
    registry = _registry(data.get("registry"), f"{where} [registry]")
    declared, paths = _couplings(data.get("couplings"), f"{where} [couplings]")
    helper, op = _gates(data.get("gates"), f"{where} [gates]")
    if not isinstance(raw, list) or not (raw or registry or declared or paths or helper):
        raise UsageError(f"{where} declares no [[copy]]: add one per copied function (docs/copies.md)")
    copies = tuple(_copy(entry, f"{where} [[copy]] #{n}", kind != "declared") for n, entry in enumerate(raw, 1))
    names = [c.name for c in copies]
    if len(set(names)) != len(names):
        raise UsageError(f"{where}: copy names repeat ({', '.join(names)}): give each copy its own name")
    return Layout(
        root,
        kind,
        where,
        copies,
        pin=_relative(data.get("pin", str(PIN_FILE)), f"{where} pin"),
        main_verified=_relative(data.get("main_verified", str(MAIN_VERIFIED_FILE)), f"{where} main_verified"),
        registry=registry,
        declared=declared,
        couplings_paths=paths,
        gate_helper=helper,
        gate_op=op,
    )


def _registry(raw: object, where: str) -> RegistryFormat | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must be a table: see docs/impact.md")
    _only(raw, {"file", "symbol", "entry", "item", "field"}, where)
    optional = {}
    for key in ("entry", "item", "field"):
        if key in raw:
            optional[key] = _str(raw, key, where)
    found = RegistryFormat(_relative(raw.get("file"), f"{where} file"), _str(raw, "symbol", where), **optional)
    found.check(where)
    return found


def _couplings(raw: object, where: str) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    if raw is None:
        return (), ()
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must be a table: see docs/impact.md")
    _only(raw, {"declared", "paths"}, where)
    declared, paths = raw.get("declared", []), raw.get("paths", [])
    if not (isinstance(declared, list) and all(isinstance(d, str) and d.startswith("vllm.") for d in declared)):
        raise UsageError(f'{where}: declared must be a list of vLLM names ("vllm.module.Name")')
    if not isinstance(paths, list):
        raise UsageError(f"{where}: paths must be a list of folders of the tree")
    return tuple(declared), tuple(_relative(p, f"{where} paths") for p in paths)


_GATE_OPS = ("==", ">=")


def _gates(raw: object, where: str) -> tuple[str | None, str]:
    if raw is None:
        return None, "=="
    if not isinstance(raw, dict):
        raise UsageError(f'{where} must be a table: helper = "pkg.utils.vllm_version_is"')
    _only(raw, {"helper", "compares"}, where)
    helper, op = raw.get("helper"), raw.get("compares", "==")
    if not isinstance(helper, str) or "." not in helper or not all(p.isidentifier() for p in helper.split(".")):
        raise UsageError(
            f'{where}: helper must be the dotted name of the tree\'s function, e.g. "pkg.utils.vllm_version_is"'
        )
    if op not in _GATE_OPS:
        raise UsageError(f"{where}: compares must be one of {', '.join(_GATE_OPS)} (how the helper asks the version)")
    return helper, str(op)


def _only(table: dict[str, Any], keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))}): see docs/copies.md")


def _str(table: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: {key} must be a non-empty string: see docs/copies.md")
    return value


def _relative(value: object, where: str) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where} must be a non-empty path: see docs/copies.md")
    path = Path(value)
    if path.is_absolute() or ".." in path.parts:
        raise UsageError(f"{where} {value!r} must be a path inside the tree, relative to its root")
    return path


def _qualified(value: str, key: str, where: str) -> tuple[str, str, str]:
    """``path/file.py:Class.method`` -> (path, Class, method)."""
    file, _, qualified = value.rpartition(":")
    cls, _, method = qualified.partition(".")
    if not (file and cls.isidentifier() and method.isidentifier()):
        raise UsageError(f"{where}: {key} {value!r} must be `path/to/file.py:Class.method`")
    return file, cls, method


def _copy(entry: object, where: str, shipped: bool) -> CopySpec:
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a table: see docs/copies.md")
    keys = {"name", "upstream", "destination", "python", "gate_form", "edit", "optional", "hand_kept", "since"}
    _only(entry, keys, where)
    name = _str(entry, "name", where)
    up_file, up_cls, up_method = _qualified(_str(entry, "upstream", where), "upstream", where)
    if up_file != UPSTREAM_PATH:
        raise UsageError(
            f"{where}: upstream file {up_file!r} cannot be read yet: the sources read {UPSTREAM_PATH} (name it)"
        )
    dest_file, dest_cls, dest_method = _qualified(_str(entry, "destination", where), "destination", where)
    python = entry.get("python")
    if python is not None and python != BALANCE:
        raise UsageError(f"{where}: python = {python!r} names no edits the tool ships (known: {BALANCE!r})")
    gate_form = entry.get("gate_form")
    if gate_form is not None and (python != BALANCE or gate_form not in gate_form_names()):
        raise UsageError(
            f"{where}: gate_form {gate_form!r} needs python = {BALANCE!r} and one of: " + ", ".join(gate_form_names())
        )
    raw_edits = entry.get("edit", [])
    if not isinstance(raw_edits, list):
        raise UsageError(f"{where}: edit must be an array of tables ([[copy.edit]])")
    edits = tuple(_edit(e, f"{where} edit #{n}") for n, e in enumerate(raw_edits, 1))
    optional, hand_kept = entry.get("optional", False), entry.get("hand_kept", False)
    if not isinstance(optional, bool) or not isinstance(hand_kept, bool):
        raise UsageError(f"{where}: optional and hand_kept must be true or false")
    if hand_kept and (python is not None or edits):
        raise UsageError(f"{where}: a hand_kept copy declares no edits (it is never rewritten): drop one of them")
    since = entry.get("since")
    if since is not None:
        since = (
            validate_tag(since, origin=f"{where} since")
            if isinstance(since, str)
            else validate_tag("", origin=f"{where} since")
        )
    if python is None and not edits and not hand_kept:
        raise UsageError(f"{where}: declares no edits: add [[copy.edit]] tables or python = {BALANCE!r}")
    return CopySpec(
        name=name,
        upstream_class=up_cls,
        upstream_method=up_method,
        destination=_relative(dest_file, f"{where} destination"),
        dest_class=dest_cls,
        dest_method=dest_method,
        python=python,
        edits=edits,
        gate_form=gate_form,
        optional=optional,
        hand_kept=hand_kept,
        since=since,
        shipped=shipped,
    )


def _edit(entry: object, where: str) -> Edit:
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a table: see docs/copies.md")
    _only(entry, {"name", "anchor", "until", "why", *KINDS}, where)
    kinds = [k for k in KINDS if k in entry]
    if len(kinds) != 1:
        raise UsageError(f"{where}: give exactly one of {', '.join(KINDS)} (found {len(kinds)})")
    (kind,) = kinds
    code = entry[kind]
    if not isinstance(code, str) or (kind != "instead" and not code.strip()):
        raise UsageError(f"{where}: {kind} must be the statements to put there, as a string")
    anchor = _str(entry, "anchor", where)
    check_statements(anchor, f"{where} anchor")
    if code.strip():
        check_statements(code, f"{where} {kind}")
    until = entry.get("until")
    if until is not None:
        until = validate_tag(until if isinstance(until, str) else "", origin=f"{where} until")
        if not isinstance(entry.get("why"), str) or not entry["why"].strip():
            raise UsageError(f"{where}: until needs why, the reason the edit stops there: see docs/copies.md")
    elif "why" in entry:
        raise UsageError(f"{where}: why goes with until (the release the edit stops after): see docs/copies.md")
    why = " ".join(str(entry.get("why", "")).split())
    return Edit(name=_str(entry, "name", where), anchor=anchor, kind=kind, code=code, until=until, why=why)
