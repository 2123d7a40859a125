"""What the runtime must print in ``vllm serve``'s own output, at vLLM's default log level, in vLLM's
line format (``[(<process> pid=N) ...]LEVEL MM-DD hh:mm:ss [file.py:line] message``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Process prefixes stack: Ray puts "(ActorClass pid=N) " before a line that vLLM may already have
# prefixed with its own process name (0.32: "(MainProcess pid=N) ", "(Worker_DP1 pid=N) "), so a line
# carries none, one or several.
VLLM_LINE = re.compile(
    r"^(?:\([^)]*\) )*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"\d{2}-\d{2} \d{2}:\d{2}:\d{2} \[[^\]\s]+:\d+\] (?P<message>.*)$"
)
STARTUP = re.compile(
    r"^balance scheduling active on DP rank (?P<rank>\d+): engine core (?P<engine>\w+), "
    r"scheduler (?P<scheduler>\w+), schedule\(\) (?P<path>.+)$"
)
STARTUP_PREFIX = "balance scheduling active on DP rank"
# Ray prints its actors' lines behind a colored "(ActorClass pid=N) " prefix: the colors go, the line stays.
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class StartupLine:
    rank: int
    engine: str
    scheduler: str
    path: str
    line: str


def vllm_lines(text: str) -> list[tuple[str, str, str]]:
    """(level, message, whole line) for every line in vLLM's format."""
    out = []
    for line in ANSI.sub("", text).splitlines():
        if m := VLLM_LINE.match(line):
            out.append((m["level"], m["message"], line))
    return out


def startup_lines(text: str) -> tuple[dict[int, StartupLine], list[str]]:
    """The runtime's start-up line per DP rank, and any line that mentions it in another format."""
    found: dict[int, StartupLine] = {}
    stray = []
    for line in ANSI.sub("", text).splitlines():
        if STARTUP_PREFIX not in line:
            continue
        vllm = VLLM_LINE.match(line)
        if vllm and vllm["level"] == "INFO" and (m := STARTUP.match(vllm["message"])):
            found[int(m["rank"])] = StartupLine(int(m["rank"]), m["engine"], m["scheduler"], m["path"], line)
        else:
            stray.append(line)
    return found, stray


def path_matches(path: str, vllm_version: str) -> bool:
    """``schedule()`` was generated from the installed release, or is upstream's own behind the seam."""
    return bool(re.match(rf"generated from vLLM v{re.escape(vllm_version)}(?=\s|$)", path)) or "seam" in path


def error_lines(text: str, needle: str) -> list[str]:
    """Lines in vLLM's format, at ERROR or above, whose message contains ``needle``."""
    return [line for level, message, line in vllm_lines(text) if level in ("ERROR", "CRITICAL") and needle in message]
