"""Every function in a tree that is a copy of a vLLM function: which one, its closest release, how stale.

``census`` reads two things. An *index* of upstream functions, from ONE vLLM source tree (an
installed vLLM's package folder, or any folder holding ``vllm/``): every ``def`` in it, by name. And
the tree: every ``def`` in every ``.py`` file under its root (hidden folders, virtualenvs and
``__pycache__`` left out). A tree function is compared with each upstream function of the same
name, statement by statement as ``migrate`` compares (``provenance``: a compound statement by its
header, formatting and comments not counting), and is a *copy* when

- at least ``MIN_MATCHED`` statements (the ``def`` line counts as one) are the same, in order, and
- they are at least ``MIN_SHARE`` of the statements of the longer of the two.

Of several upstream functions that qualify, the one with the fewest differing statements is named
(then the one whose file and class names are most alike); the others are listed in the JSON.

With ``renamed``, a tree function no same-named upstream function matches is compared with every
upstream function (the same thresholds): copies kept under another name (``_patched_forward``).

For each copy, that upstream file is then read at every final release from ``--since`` on (release
wheels from the package index by range reads, one session per release, cached by tag and path:
``resolve.fetch_release_files``), and the copy is compared with the function of the same qualified
name there. The *closest release* has the fewest differing statements (0: the copy is that release's
function); of several, the pin, else the newest before it, else the oldest after it. The releases
whose function is the closest one's, statement for statement, are reported with it. *Stale by N*
counts releases from the closest to the pin (negative: the copy is newer than the pin). Only files
that hold a copy are read across releases.

What is not found: a copy renamed from its upstream function (unless ``renamed``), and a copy of a
function the index's vLLM no longer has (index an older vLLM with ``--vllm-source``). A copy whose
upstream function changed too much by the index's release to pass the thresholds there is missed too.
"""

from __future__ import annotations

from generator.judge.census.dating import Dated, ReleaseReader, date, date_all, release_reader
from generator.judge.census.index import Source, UpstreamIndex, package_source, release_source, vllm_source
from generator.judge.census.matching import Match, match, match_renamed
from generator.judge.census.reading import MIN_MATCHED, MIN_SHARE, Function, Skipped, functions, read_functions
from generator.judge.census.report import summary, text_lines, to_json, to_json_text
from generator.judge.census.survey import Census, Copy, run

__all__ = [
    "MIN_MATCHED",
    "MIN_SHARE",
    "Census",
    "Copy",
    "Dated",
    "Function",
    "Match",
    "ReleaseReader",
    "Skipped",
    "Source",
    "UpstreamIndex",
    "date",
    "date_all",
    "functions",
    "match",
    "match_renamed",
    "package_source",
    "read_functions",
    "release_reader",
    "release_source",
    "run",
    "summary",
    "text_lines",
    "to_json",
    "to_json_text",
    "vllm_source",
]
