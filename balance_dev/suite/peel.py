"""Peeling: the suite at B run past each import of a vLLM name B no longer has, one stand-in per blocker.

At B a conftest (or a test module) that imports a gone vLLM name stops there: pytest reports the first
blocker and nothing after it. Peeling reads that blocker from Python's own message (``cannot import name
'X' from 'vllm.a'``, ``No module named 'vllm.a.b'``, ``module 'vllm.a' has no attribute 'X'``; never
from ``impact``: the truth stays independent of the code under test), adds a stand-in for exactly that
name (the pytest plugin ``balance_suite_peel``, in ``site/``), and collects again (``--collect-only``),
until collection gets through, no blocker left is a vLLM name, or ``limit`` peels are made. Each round
peels every blocker it sees (one behind a conftest, many among test modules), each recorded with the
error that asked for it. Then the whole suite runs at B with the stand-ins: a test that uses one fails
with ``GoneAtB: vllm.a.X is not in vLLM B (peeled; imported at path:line, ...)``, which attribute.py names.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from balance_dev.downstream import say
from balance_dev.suite import run
from balance_dev.suite.outcomes import SuiteRun

DEFAULT_LIMIT = 100
CANNOT_IMPORT = re.compile(r"^ImportError: cannot import name '(\w+)' from '([\w.]+)'")
NO_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'$")
NO_ATTRIBUTE = re.compile(r"^AttributeError: module '([\w.]+)' has no attribute '(\w+)'$")


@dataclass(frozen=True, order=True)
class Peel:
    module: str
    name: str = ""  # empty: the module itself is gone

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}" if self.name else self.module


@dataclass(frozen=True)
class Peeled:
    peel: Peel
    round: int
    where: str  # the conftest's folder or the test module that could not import
    error: str  # Python's message that asked for it
    asked_by: int = 1  # collection errors of that round that asked for it


@dataclass
class Peeling:
    peels: list[Peeled] = field(default_factory=list)
    rounds: int = 0  # collections with stand-ins (the unpeeled run at B is round 0)
    stopped: str = ""  # collects / unpeelable / limit
    left: list[dict[str, str]] = field(default_factory=list)  # collection errors no stand-in answers
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "peels": [
                {"round": p.round, "name": p.peel.path, "gone": "name" if p.peel.name else "module"}
                | {"where": p.where, "error": p.error, "asked_by": p.asked_by}
                for p in self.peels
            ],
            "rounds": self.rounds,
            "stopped": self.stopped,
            "left": self.left,
            "seconds": round(self.seconds),
        }

    @staticmethod
    def from_json(raw: dict[str, object]) -> Peeling:
        peels = raw["peels"]
        assert isinstance(peels, list)
        out = Peeling(rounds=int(str(raw["rounds"])), stopped=str(raw["stopped"]), seconds=float(str(raw["seconds"])))
        left = raw.get("left") or []
        assert isinstance(left, list)
        out.left = left
        for p in peels:
            module, _, name = str(p["name"]).rpartition(".") if p["gone"] == "name" else (p["name"], "", "")
            out.peels.append(Peeled(Peel(module, name), int(p["round"]), p["where"], p["error"], int(p["asked_by"])))
        return out


def peel_of(error: str) -> Peel | None:
    """The gone vLLM name a collection error's first line names, or None (not a gone vLLM name: a circular
    import's "partially initialized module", a module under a non-package, anything else)."""
    if match := CANNOT_IMPORT.match(error):
        peel = Peel(match[2], match[1])
    elif match := NO_MODULE.match(error):
        peel = Peel(match[1])
    elif (match := NO_ATTRIBUTE.match(error)) and "partially initialized" not in error:
        peel = Peel(match[1], match[2])
    else:
        return None
    return peel if peel.module == "vllm" or peel.module.startswith("vllm.") else None


def write_peels(path: Path, peels: Sequence[Peel], uses: Path) -> None:
    """The file the plugin reads ($BALANCE_SUITE_PEELS)."""
    doc = {"peels": [{k: v for k, v in asdict(p).items() if v} for p in peels], "uses": str(uses)}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def blockers(collected: SuiteRun) -> list[tuple[str, str]]:
    return sorted((node, o.error) for node, o in collected.collect_errors.items())


def peel_rounds(first: SuiteRun, collect: Callable[[int, list[Peel]], SuiteRun], limit: int) -> Peeling:
    """Peel from ``first`` (the unpeeled run at B) until collection gets through; ``collect(round, peels)``
    collects with those stand-ins. A peel already made whose error comes back is not made again."""
    out, made, started = Peeling(), list[Peel](), time.monotonic()
    current = first
    while True:
        errors = blockers(current)
        new: dict[Peel, Peeled] = {}
        for node, error in errors:
            peel = peel_of(error)
            if peel is None or peel in made:
                continue
            if peel in new:
                new[peel] = Peeled(peel, out.rounds + 1, new[peel].where, error, new[peel].asked_by + 1)
            else:
                new[peel] = Peeled(peel, out.rounds + 1, node, error)
        if not errors or not new or len(made) >= limit:
            out.stopped = "collects" if not errors else ("limit" if new else "unpeelable")
            out.left = [{"where": node, "error": error} for node, error in errors]
            break
        for peeled in list(new.values())[: limit - len(made)]:
            out.peels.append(peeled)
            made.append(peeled.peel)
            say(f"peel {len(made)} (round {peeled.round}): {peeled.peel.path} ({peeled.where}: {peeled.error})")
        out.rounds += 1
        current = collect(out.rounds, made)
    out.seconds = time.monotonic() - started
    return out


def run_peeled(
    label: str,
    python: Path,
    tree: Path,
    work: Path,
    tests: Sequence[str],
    timeout: int,
    first: SuiteRun,
    limit: int = DEFAULT_LIMIT,
    extra_env: dict[str, str] | None = None,
    ci: run.CI = run.ASCEND,
) -> tuple[Peeling, SuiteRun]:
    """Peeling from the unpeeled run ``first`` at B, then the whole suite with the stand-ins (``LABEL-peeled``).
    No peel (B collects, or its first blocker is no vLLM name): the unpeeled run is the peeled one."""
    peels_file, uses = work / f"{label}-peeled.peels.json", work / f"{label}-peeled.uses.jsonl"

    def collect(round_: int, peels: list[Peel]) -> SuiteRun:
        write_peels(peels_file, peels, work / f"{label}-collect.uses.jsonl")
        name = f"{label}-collect-{round_}"
        return run.run_suite(name, python, tree, work, tests, timeout, peels=peels_file, collect_only=True,
                             extra_env=extra_env, ci=ci)  # fmt: skip

    peeling = peel_rounds(first, collect, limit)
    say(f"{label}: {len(peeling.peels)} peels in {peeling.rounds} rounds, {peeling.stopped}")
    (work / f"{label}-peeled.peeling.json").write_text(json.dumps(peeling.to_json(), indent=1) + "\n", "utf-8")
    if not peeling.peels:
        return peeling, first
    write_peels(peels_file, [p.peel for p in peeling.peels], uses)
    uses.unlink(missing_ok=True)
    peeled = run.run_suite(f"{label}-peeled", python, tree, work, tests, timeout, peels=peels_file,
                           extra_env=extra_env, ci=ci)  # fmt: skip
    return peeling, peeled


def reread_peeled(label: str, tree: Path, work: Path, first: SuiteRun) -> tuple[Peeling, SuiteRun] | None:
    """A peeled run made before (``--reuse-runs``), or None."""
    saved = work / f"{label}-peeled.peeling.json"
    if not saved.is_file():
        return None
    peeling = Peeling.from_json(json.loads(saved.read_text("utf-8")))
    if not peeling.peels:
        return peeling, first
    if not run.has_run(f"{label}-peeled", work):
        return None
    return peeling, run.reread(f"{label}-peeled", tree, work)


def _ours(path: str) -> bool:
    """A frame of the stand-ins' plugin: a peeled module's ``__getattr__`` refusing a name not (yet) peeled."""
    return path.rsplit("/", 1)[-1] == "balance_suite_peel.py"


def refused_imports(label: str, tree: Path, work: Path, peeling: Peeling) -> set[tuple[str, int, str]]:
    """Python's own word that an import statement of the tree fails at B: each collection error a peel
    answered, as (the statement's path, its line, the gone name). The statement is the traceback's last
    frame outside vLLM; the peeled run then imports past it, so no test fails there again."""
    made = {p.peel for p in peeling.peels}
    out: set[tuple[str, int, str]] = set()
    for name in [label, *(f"{label}-collect-{n}" for n in range(1, peeling.rounds + 1))]:
        if not run.has_run(name, work):
            continue
        for outcome in run.reread(name, tree, work).collect_errors.values():
            peel = peel_of(outcome.error)
            frame = next(
                (f for f in reversed(outcome.frames) if not f.path.startswith("vllm/") and not _ours(f.path)), None
            )
            if peel is not None and peel in made and frame is not None:
                out.add((frame.path, frame.line, peel.path))
    return out


def collection_uses(work: Path, label: str) -> list[dict[str, object]]:
    """What the stand-ins absorbed while the peeled run collected: each (name, use, where) with its count."""
    path = work / f"{label}-peeled.uses.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
