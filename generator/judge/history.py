"""``make history``: every hand copy vllm-ascend released, judged by ``migrate`` against the vLLM it runs with.

Reads ``patch_balance_schedule.py`` from each vllm-ascend release on the package index (range reads
of the wheel, or the checked sdist; cached), pairs vllm-ascend X.Y.Z[rcN] with vLLM vX.Y.Z, and
writes the table (and each copy's full report) between the markers in ``docs/history.md``. The
method text around the markers is the page's own. Timings go to stderr, never into the page, so
the same inputs write the same bytes.

    python -m generator.cli.history [--out docs/history.md] [--since 0.13.0rc1]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from generator.atomic import write_all_or_nothing
from generator.errors import UsageError
from generator.judge import provenance
from generator.judge.capcheck import Difference
from generator.judge.migrate import CopyReport, judge
from generator.sources import copies, index
from generator.sources.releases import released_tags
from generator.sources.resolve import fetch_upstream

BEGIN = "<!-- history:begin (written by `make history`; edit the text around it, not this) -->"
END = "<!-- history:end -->"
T = TypeVar("T")


@dataclass(frozen=True)
class Row:
    version: str  # vllm-ascend's
    kind: str  # the artifact read: wheel or sdist
    tag: str  # the vLLM release it runs with
    report: CopyReport | None
    note: str = ""  # why there is no report


def judge_all(
    found: Sequence[tuple[copies.Artifact, bytes | None]], releases: Sequence[provenance.Release]
) -> list[Row]:
    """One row per release, in the order given; a release's copy is judged against its vLLM release."""
    by_tag = {r.tag: r for r in releases}
    rows = []
    for artifact, data in found:
        tag = copies.vllm_tag(artifact.version)
        if data is None:
            rows.append(Row(artifact.version, artifact.kind, tag, None, f"ships no `{copies.MEMBER}`"))
        elif tag not in by_tag:
            rows.append(Row(artifact.version, artifact.kind, tag, None, f"vLLM {tag} is not among the releases read"))
        else:
            text = data.decode("utf-8", errors="replace")
            rows.append(Row(artifact.version, artifact.kind, tag, judge(text, tag, by_tag[tag].text, lambda: releases)))
    return rows


def _deltas(report: CopyReport) -> str:
    found = ", ".join(f"{d.number} ({d.form})" for d in report.deltas) or "none"
    absent = [m.split(":")[0] for m in report.missing]
    return found + "".join(f"; {a}" for a in absent)


def _gate(report: CopyReport) -> str:
    return _summary(report.gate_differences, "upstream's question") if report.gates else "no gate"


def _cap(report: CopyReport) -> str:
    return _summary(report.cap_differences, "upstream's") if report.cap_known else "unknown shape"


def _summary(differences: Sequence[Difference], same: str) -> str:
    return "; ".join(dict.fromkeys(d.short for d in differences)) or same


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(rows: Sequence[Row], releases: Sequence[provenance.Release]) -> str:
    """The table, then each copy's full ``migrate`` report; deterministic for the same inputs."""
    scanned = f"{releases[0].tag} to {releases[-1].tag}" if releases else "none"
    out = [
        f"{len(rows)} vllm-ascend releases from the package index; vLLM releases scanned: {len(releases)} ({scanned}).",
        "",
        "| vllm-ascend | read from | runs vLLM | verdict | extra edits | deltas found | gate against upstream's check "
        "| own cap check against upstream's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row.report is None:
            out.append(f"| {row.version} | {row.kind} | {row.tag} | {_cell(row.note)} | | | | |")
            continue
        r = row.report
        out.append(
            f"| {row.version} | {row.kind} | {row.tag} | {_cell(r.verdict)} | {len(r.extra_edits)} "
            f"| {_cell(_deltas(r))} | {_cell(_gate(r))} | {_cell(_cap(r))} |"
        )
    out += ["", "### Each copy's report (`balance-patchgen migrate`)", ""]
    for row in rows:
        if row.report is None:
            continue
        out += [f"#### vllm-ascend {row.version} ({row.kind}), with vLLM {row.tag}", "", "```"]
        out += row.report.lines()
        out += ["```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def place(page: str, table: str) -> str:
    """``page`` with everything between the markers replaced by ``table``."""
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        raise UsageError("the history page needs one begin and one end marker, in that order: restore them")
    head, rest = page.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def _timed(label: str, timings: list[tuple[str, float]], work: Callable[[], T]) -> T:
    start = time.perf_counter()
    result = work()
    timings.append((label, time.perf_counter() - start))
    return result


def progress(message: str) -> None:
    print(f"history: {message}", file=sys.stderr)


def run(out: Path, since: str) -> list[tuple[str, float]]:
    """Read, judge, write. Returns the time each phase took."""
    timings: list[tuple[str, float]] = []
    page = out.read_text(encoding="utf-8")
    place(page, "")  # refuse a page without markers before any network work

    def read_copies() -> list[tuple[copies.Artifact, bytes | None]]:
        artifacts = copies.artifacts(index.list_files(copies.PROJECT), since)
        return [(a, copies.fetch(a, progress)) for a in artifacts]

    def read_releases() -> list[provenance.Release]:
        tags = released_tags(provenance.FIRST_RELEASE)
        return [provenance.Release(t, fetch_upstream(t, progress=progress).text) for t in tags]

    found = _timed("read vllm-ascend copies", timings, read_copies)
    releases = _timed("read vLLM releases", timings, read_releases)
    _timed(
        f"parse the {len(releases)} releases' schedule()",
        timings,
        lambda: [provenance.upstream_method(r.text) for r in releases],
    )
    rows = _timed(f"judge {len(found)} copies, each scanned against them", timings, lambda: judge_all(found, releases))
    write_all_or_nothing({out: place(page, render(rows, releases)).encode()})
    judged = sum(r.report is not None for r in rows)
    progress(f"wrote {out}: {len(rows)} releases, {judged} judged against {len(releases)} vLLM releases")
    return timings
