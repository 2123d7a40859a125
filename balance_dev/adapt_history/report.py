"""The results as JSON (benchmarks/results/adapt-history.json) and as the markdown table docs/adapt.md shows."""

from __future__ import annotations

import json
from typing import Any


def to_json(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=2, sort_keys=True) + "\n"


def _pair(row: dict[str, Any]) -> str:
    to = f" -> {row['to_version']}" if row["to_version"] else ""
    return f"{row['project']} {row['from_version']}{to}"


def table(results: dict[str, Any]) -> str:
    head = (
        "| pair | vLLM | adapt | moved names P_B rewrote: adapt same / other / left | adapt's other rewrites "
        "(P_B kept / spells / dropped / file gone) | copies, upstream changed | P_B re-synced: adapt equal / "
        "conflict / other | statements P_B took: adapt holds / in conflict / missing | P_B left stale: adapt "
        "re-synced / conflict / other | adapt re-synced: pass the re-check |"
    )
    out = [head, "|" + "---|" * 10]
    for row in results["pairs"]:
        if row["to_version"] is None:
            continue
        n, c = row["names"], row["copies"]
        only = n["adapt_only"]
        r, s, st, w = c["maintainers_resynced"], c["statements"], c["maintainers_stale"], c["adapt_written"]
        cells = [
            _pair(row),
            f"{row['from']} -> {row['to']}",
            f"{row['measured']['adapt_seconds']:.0f} s, {row['measured']['adapt_peak_mb'] / 1024:.1f} GB",
            f"{n['maintainers_rewrote']}: {n['same']} / {n['adapt_other']} / {n['adapt_left']}"
            + (f" (and {n['not_at_a']} not at A either)" if n["not_at_a"] else ""),
            f"{sum(only.values())} ({only['maintainers-kept']} / {only['maintainers-spell-it']} / "
            f"{only['maintainers-dropped']} / {only['file-gone']})",
            str(c["upstream_changed"]),
            f"{r['total']}: {r['adapt_equal']} / {r['adapt_conflict']} / {r['adapt_other']}",
            f"{s['taken']}: {s['held']} / {s['in_conflict']} / {s['missing']}",
            f"{st['total']}: {st['adapt_resynced']} / {st['adapt_conflict']} / {st['adapt_other']}",
            f"{w['holds']} of {w['total']}" + (f" ({w['unchanged']} left as they were)" if w["unchanged"] else ""),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def reach_lines(results: dict[str, Any]) -> list[str]:
    out = []
    for row in results["pairs"]:
        found = row.get("reach")
        if found is None:
            continue
        w = row["copies"]["adapt_written"]
        out.append(
            f"{_pair(row)}, adapt {row['from']} -> {row['to']} ({row['measured']['adapt_seconds']:.0f} s, "
            f"{row['measured']['adapt_peak_mb'] / 1024:.1f} GB): impact {row['from']} -> {row['to']} called "
            f"{found['moved_gone']['code']} couplings of the tree's code and {found['moved_gone']['tests']} of its "
            f"tests moved with their path gone ({found['paths']} paths); impact --from {row['to']} on the adapted "
            f"tree still finds {found['still_reached']['code']} of the code's and {found['still_reached']['tests']} "
            f"of the tests' ({found['still_reached_unreported']} of them named nowhere in adapt's report). "
            f"Copies adapt re-synced that pass the re-check: {w['holds']} of {w['total']}."
        )
        out.append("")
        out += [
            f"- `{r['site']}` {r['upstream']} ({r['kind']}{', test' if r['test'] else ''}): adapt: {r['adapt']}"
            for r in found["rows"]
        ]
    return out


def signature_table(results: dict[str, Any]) -> str:
    """Overrides whose vLLM method B gave parameters: what P_B's maintainers did, what adapt wrote."""
    out = [
        "| pair | overrides whose method B gave parameters | the maintainers changed | adapt's takes the same "
        "calls as theirs | adapt changed, the maintainers did not |",
        "|---|---|---|---|---|",
    ]
    for row in results["pairs"]:
        found = row.get("signatures")
        if found is None:
            continue
        out.append(
            f"| {_pair(row)} | {found['b_changed']} | {found['maintainers_changed']} | "
            f"{found['adapt_same_calls']} of {found['maintainers_changed']} | "
            f"{found['adapt_changed_where_maintainers_did_not']} |"
        )
    return "\n".join(out) + "\n"


def markdown(results: dict[str, Any]) -> str:
    return table(results) + "\n" + signature_table(results) + "\n" + "\n".join(reach_lines(results)) + "\n"
