"""Each bump failure named with the coupling(s) it hit (pure: failures + couplings -> attributed failures).

A coupling is what ``impact --format json`` lists (kind, site, upstream, status, verdict when ``impact``
gives one), with its scope read from the tree (scopes.py) and its upstream's two definitions (``symbols``).
Only couplings whose upstream is not ``unchanged`` can explain a failure. The rules, each named in the
result:

- ``name``: an ImportError, ModuleNotFoundError or AttributeError names a vLLM name (``cannot import name
  'X' from 'M'``, ``No module named 'M'``, ``module 'M' has no attribute 'X'``, ``'C' object has no
  attribute 'X'``): the couplings of that name (or under it) at a file of the traceback; a peeled run's
  ``GoneAtB: M.X is not in vLLM B (peeled; imported at P:L, ...)`` (peel.py): the couplings of ``M.X`` (or
  under it) in the file ``P`` that imported it (the import ran at collection, outside the test's traceback);
- ``frame``: a traceback frame inside a coupling's scope (its import statement, its copied or overriding
  function, its patch statement and the patch's function); not the other names of an import statement
  whose error names one (``from m import (A, B)`` failing on ``B`` names ``B`` only);
- ``call``: a TypeError at a call (``Q() got an unexpected keyword argument``, ``missing ... required``,
  ``takes N positional arguments``): the couplings of an upstream ``...Q`` whose signature changed at a
  file of the traceback, and the tree's own override named ``Q`` (vLLM at B calls it its new way);
- ``upstream``: a frame inside B's definition of a coupling's changed upstream, the coupling at a file
  of the traceback (the tree called into code that changed);
- ``class``: the error names a class of the tree (``Q.__init__()`` refusing an argument, ``Can't instantiate
  abstract class Q``, a property of ``Q`` it cannot set, an attribute ``Q`` lacks): the couplings, in ``Q``'s
  file, of the vLLM base whose methods ``Q`` overrides (B changed the base under the subclass).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from generator.judge.explain.outcomes import Frame, Outcome
from generator.judge.explain.scopes import Scope

NAME_ERRORS = ("ImportError", "ModuleNotFoundError", "AttributeError", "GoneAtB")
GONE = re.compile(r"^GoneAtB: ([\w.]+) is not in vLLM B \(peeled; imported at (\S+?):\d+")
CANNOT_IMPORT = re.compile(r"cannot import name '([\w.]+)' from '([\w.]+)'")
NO_MODULE = re.compile(r"No module named '([\w.]+)'")
MODULE_ATTR = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
# unittest.mock's word when the target of a patch lacks the attribute (``patch.object(C, "x")``, ``patch("m.C.x")``).
MOCK_ATTR = re.compile(r"<(?:class|module) '([\w.]+)'(?: from '[^']*')?> does not have the attribute '(\w+)'")
OBJECT_ATTR = re.compile(r"(?:type object|object of type)? ?'(\w+)'(?: object)? has no attribute '(\w+)'")
CALL = re.compile(r"^TypeError: ([\w.<>]+)\(\) (?:got an unexpected keyword|missing \d+ required|takes )")
CONSTRUCTORS = (".__init__", ".__new__")  # a class's call, as the TypeError names it (``Q.__new__()``: a NamedTuple)
# An error naming a class of the tree whose vLLM base changed under it (a new field, a new abstract method,
# a property where the tree assigns): the base is what its overrides override (``Q.m`` of ``vllm.x.Base.m``).
CLASS_NAMED = (
    re.compile(r"^TypeError: (\w+)\.__init__\(\) "),
    re.compile(r"^TypeError: Can't instantiate abstract class (\w+)"),
    re.compile(r"^AttributeError: property '\w+' of '(\w+)' object has no setter"),
    re.compile(r"^AttributeError: '(\w+)' object has no attribute '\w+'"),
    re.compile(r"^AttributeError: <class '(?:[\w.]+\.)?(\w+)'> does not have the attribute '\w+'"),
)
# A class of the tree -> (its file, a vLLM base it overrides methods of).
Bases = Mapping[str, set[tuple[str, str]]]

VERDICTS = ("breaks", "review", "info")


@dataclass(frozen=True)
class Coupling:
    kind: str
    site: str
    upstream: str
    status: str
    verdict: str | None
    scope: Scope
    signature_changed: bool = False
    rule: str = ""  # impact's rule (``call-refused``: B refuses a call the tree makes of it)
    at_to: tuple[str, int, int] | None = None  # B's definition: path, first, last line
    at_line: int = 0  # the line impact's rule points at, when not the site's (a refused call)
    at_path: str = ""  # its file, when not the site's
    at_end: int = 0  # the rule points at a function of the tree (B's call reaches it): its last line
    receiver: str = ""  # that function's qualified name, as a TypeError names it
    refused: str = ""  # a refused call's callee (``call-refused``: the name whose call B refuses)

    @property
    def path(self) -> str:
        return self.site.rpartition(":")[0]


@dataclass(frozen=True)
class Hit:
    site: str
    upstream: str
    verdict: str | None
    rule: str
    status: str = ""  # impact's status of the upstream name (removed, moved, changed, unresolved, ...)


@dataclass(frozen=True)
class Attributed:
    test: str
    error: str
    hits: tuple[Hit, ...]

    @property
    def verdict(self) -> str:
        """The failure's class: the strongest verdict among its couplings, ``unjudged``, or ``nothing``."""
        found = {hit.verdict for hit in self.hits}
        return next((v for v in VERDICTS if v in found), "unjudged" if self.hits else "nothing")


def couplings_of(
    impact: Mapping[str, object], scopes: Mapping[str, Scope], couplings: Iterable[Mapping[str, object]]
) -> list[Coupling]:
    """``impact``'s couplings that can explain a failure (not unchanged), with their scopes and B's lines."""
    symbols = impact.get("symbols") or {}
    assert isinstance(symbols, dict)
    out = []
    for raw in couplings:
        status, upstream, site = str(raw["status"]), str(raw["upstream"]), str(raw["site"])
        if status == "unchanged":
            continue
        symbol = symbols.get(upstream) or {}
        to = symbol.get("to") or {}
        lines = to.get("lines")
        verdict = raw.get("verdict")
        out.append(
            Coupling(
                kind=str(raw["kind"]),
                site=site,
                upstream=upstream,
                status=status,
                verdict=str(verdict) if verdict is not None else None,
                scope=scopes.get(site, Scope(site.rpartition(":")[0], ())),
                signature_changed="signature" in (symbol.get("parts") or ()),
                rule=str(raw.get("rule") or ""),
                at_to=(str(to["path"]), int(lines[0]), int(lines[1])) if to.get("path") and lines else None,
                at_line=int(str(raw.get("at_line") or 0)),
                at_path=str(raw.get("at_path") or ""),
                at_end=int(str(raw.get("at_end") or 0)),
                receiver=str(raw.get("receiver") or ""),
                refused=_refused_name(str(raw.get("why") or "")) if raw.get("rule") == "call-refused" else "",
            )
        )
    return out


REFUSED_CALL = re.compile(r"^the call of ([\w.]+) at ")


def _refused_name(why: str) -> str:
    """The callee ``impact``'s ``call-refused`` names (``the call of vllm.x.Cls at line 12: ...``)."""
    found = REFUSED_CALL.match(why)
    return found[1] if found else ""


def class_bases(
    scopes: Mapping[str, Scope], couplings: Iterable[Mapping[str, object]]
) -> dict[str, set[tuple[str, str]]]:
    """Each class of the tree with an override: its file and the vLLM classes whose methods it overrides
    (unchanged overrides too: the base may change elsewhere than in the methods the tree overrides)."""
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for raw in couplings:
        scope = scopes.get(str(raw["site"]))
        if raw["kind"] != "override" or scope is None or "." not in scope.qualname:
            continue
        out[scope.qualname.split(".")[-2]].add((scope.path, str(raw["upstream"]).rpartition(".")[0]))
    return dict(out)


def named(error: str) -> tuple[list[str], list[str]]:
    """(full vLLM names, ``Class.attr`` suffixes) an error line names."""
    if not error.startswith(NAME_ERRORS):
        return [], []
    if match := GONE.match(error):
        return [match[1]], []
    if match := CANNOT_IMPORT.search(error):
        return [f"{match[2]}.{match[1]}"], []
    if match := NO_MODULE.search(error):
        return [match[1]], []
    if match := MODULE_ATTR.search(error):
        return [f"{match[1]}.{match[2]}"], []
    if match := MOCK_ATTR.search(error):
        return [f"{match[1]}.{match[2]}"], []
    if match := OBJECT_ATTR.search(error):
        return [], [f"{match[1]}.{match[2]}"]
    return [], []


def _under(upstream: str, name: str) -> bool:
    return upstream == name or upstream.startswith(f"{name}.")


def files_touched(failures: Iterable[Outcome]) -> set[str]:
    """The tree's files the failures touch: a frame's, the test's module, where a stand-in was imported."""
    out: set[str] = set()
    for failure in failures:
        out |= {frame.path for frame in failure.frames} | {failure.test.split("::", 1)[0]}
        if gone := GONE.match(failure.error):
            out.add(gone[2])
    return out


def classes_named(failures: Iterable[Outcome]) -> set[str]:
    """The tree's classes the errors name (the ``class`` rule asks for their vLLM bases)."""
    return {m[1] for f in failures for pattern in CLASS_NAMED if (m := pattern.match(f.error))}


def attribute_one(failure: Outcome, couplings: Iterable[Coupling], bases: Bases | None = None) -> Attributed:
    by_path: dict[str, list[Coupling]] = defaultdict(list)
    for coupling in couplings:
        by_path[coupling.path].append(coupling)
    return _attribute(failure, by_path, bases or {})


def _attribute(failure: Outcome, by_path: Mapping[str, list[Coupling]], bases: Bases) -> Attributed:
    """Every rule needs the coupling's site in a file of the traceback, but an override named by a
    TypeError: only those couplings are looked at (a failure's frames touch a handful of files)."""
    files = {frame.path for frame in failure.frames} | {failure.test.split("::", 1)[0]}
    if gone := GONE.match(failure.error):
        files.add(gone[2])  # where the stand-in was imported: the coupling's file
    full, suffixes = named(failure.error)
    call = CALL.match(failure.error)
    callee = call[1] if call else ""
    for suffix in CONSTRUCTORS:
        callee = callee.removesuffix(suffix)
    hits: dict[tuple[str, str], set[str]] = {}
    verdicts: dict[tuple[str, str], str | None] = {}
    statuses: dict[tuple[str, str], str] = {}
    candidates = [c for path in sorted(files) for c in by_path.get(path, ())]
    if callee:  # vLLM at B calls the tree's function its new way: an override, what a patch installs
        candidates += [
            c for cs in by_path.values() for c in cs if (c.kind == "override" or c.receiver) and c.path not in files
        ]
    for coupling in candidates:
        rules = set()
        in_files = coupling.path in files
        if in_files and any(_under(coupling.upstream, name) for name in full):
            rules.add("name")
        # ``'Q' object has no attribute 'x'``: the member, or the vLLM class Q itself (its member is gone)
        if in_files and any(coupling.upstream.endswith((f".{s}", f".{s.rpartition('.')[0]}")) for s in suffixes):
            rules.add("name")
        if any(coupling.scope.holds(frame.path, frame.line) for frame in failure.frames):
            rules.add("frame")
        refused = coupling.signature_changed or coupling.rule == "call-refused"
        if callee and in_files and refused and coupling.upstream.endswith(f".{callee}"):
            rules.add("call")
        if callee and in_files and coupling.refused and (coupling.refused + ".").endswith(f".{callee}."):
            rules.add("call")  # an import of the module whose member's call B refuses
        if callee and coupling.kind == "override" and coupling.scope.qualname == call[1]:  # type: ignore[index]
            rules.add("call")
        if callee and coupling.receiver and coupling.receiver == call[1]:  # type: ignore[index]
            rules.add("call")
        if in_files and coupling.at_to is not None:
            path, first, last = coupling.at_to
            if any(frame.path == path and first <= frame.line <= last for frame in failure.frames):
                rules.add("upstream")
        if rules:
            key = (coupling.site, coupling.upstream)
            hits.setdefault(key, set()).update(rules)
            verdicts[key] = coupling.verdict
            statuses[key] = coupling.status
    for name in {m[1] for pattern in CLASS_NAMED if (m := pattern.match(failure.error))}:
        for path, base in sorted(bases.get(name, ())):
            for coupling in by_path.get(path, ()):
                if _under(coupling.upstream, base):
                    key = (coupling.site, coupling.upstream)
                    hits.setdefault(key, set()).add("class")
                    verdicts[key], statuses[key] = coupling.verdict, coupling.status
    # An import that failed on a name it names: the statement's other names imported fine (their frame
    # is the same line), so a frame alone does not name them.
    named_sites = {site for (site, _), rules in hits.items() if "name" in rules}
    for key in [k for k, rules in hits.items() if k[0] in named_sites and rules == {"frame"}]:
        del hits[key]
    return Attributed(
        failure.test,
        failure.error,
        tuple(
            Hit(site, up, verdicts[(site, up)], "+".join(sorted(hits[(site, up)])), statuses[(site, up)])
            for site, up in sorted(hits)
        ),
    )


def attribute(failures: Iterable[Outcome], couplings: list[Coupling], bases: Bases | None = None) -> list[Attributed]:
    """Each failure attributed; failures alike (error, frames, test module) are judged once."""
    by_path: dict[str, list[Coupling]] = defaultdict(list)
    for coupling in couplings:
        by_path[coupling.path].append(coupling)
    memo: dict[tuple[str, tuple[Frame, ...], str], tuple[Hit, ...]] = {}
    out = []
    for failure in sorted(failures, key=lambda f: f.test):
        key = (failure.error, failure.frames, failure.test.split("::", 1)[0])
        if key not in memo:
            memo[key] = _attribute(failure, by_path, bases or {}).hits
        out.append(Attributed(failure.test, failure.error, memo[key]))
    return out
