"""The repository's own files, for tests that copy the project or prove nothing was written."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root, to prove a failing command left them all as they were."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
