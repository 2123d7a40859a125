"""The tree's own version gates applied to its couplings' verdicts: code under a gate false at B never runs there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from generator.judge import gates
from generator.judge.couplings import sites, verdicts
from generator.judge.couplings.record import Coupling
from generator.judge.gates import dead_value


def gate_helpers(scans: Sequence[sites.FileScan]) -> dict[str, str]:
    """The tree's gate helpers (``gates.helper_op``), by dotted path and by their bare name (``?name``)."""
    out: dict[str, str] = {}
    for scan in scans:
        for path, op in scan.helpers.items():
            out[path] = op
            out[f"?{path.rpartition('.')[2]}"] = op
            if path.startswith("src."):
                out[path.removeprefix("src.")] = op
    return out


def gated(scans: Sequence[sites.FileScan], couplings: list[Coupling], release: str) -> list[Coupling]:
    """A coupling whose code sits in a branch of the tree's own version gate that is false at B never runs at
    B: whatever B changed, it breaks nothing there (``gated``, info). Its line and the line its rule points at
    (a refused call, in its file) are both asked."""
    helpers = gate_helpers(scans)
    if not helpers:
        return couplings
    regions = {scan.path: scan.regions for scan in scans if scan.regions}
    out = []
    for c in couplings:
        found = regions.get(c.path)
        lines = [c.line] + ([c.at_line] if c.at_line and not c.at_path else [])
        if (
            c.verdict != verdicts.INFO
            and found
            and any(not gates.runs_at(line, found, helpers, release) for line in lines)
        ):
            given = verdicts.BY_NAME["gated"]
            reason = f"line {c.line if not gates.runs_at(c.line, found, helpers, release) else c.at_line} runs only "
            reason += f"under a version gate false at {release}; {c.rule} ({c.verdict}) holds where it runs"
            c = replace(c, verdict=given.verdict, rule=given.name, reason=reason)
        out.append(c)
    return out


def dead_gates(
    scans: Sequence[sites.FileScan], helpers: dict[str, str], release: str
) -> tuple[tuple[str, int, str], ...]:
    """The tree's gates that no release from ``release`` on takes another way (``vllm_version_is`` of an older
    release): each (file, line, the release it names), once; what ``adapt`` retires."""
    by_name = {**helpers, **{f"?{path.rpartition('.')[2]}": op for path, op in helpers.items()}}
    out: set[tuple[str, int, str]] = set()
    for scan in scans:
        for region in scan.regions:
            for helper, named in gates.releases(region.cond):
                op = by_name.get(helper)
                if op is not None and dead_value(op, named, release) is not None:
                    out.add((scan.path, region.line, named))
    return tuple(sorted(out))
