"""A real git repository shaped like vLLM's, built with gitpython from real released files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import git

from generator.sources.base import UPSTREAM_PATH


def set_identity(repo: git.Repo) -> None:
    """A committer for repositories the tests write to (no global git configuration is assumed)."""
    with repo.config_writer() as config:
        config.set_value("user", "name", "test")
        config.set_value("user", "email", "test@example.invalid")


def build_vllm_repo(path: Path, releases: Sequence[tuple[str, bytes]], *, then: bytes | None = None) -> Path:
    """One commit and tag per (tag, scheduler.py bytes), in order, on ``main`` as vLLM's repository has it;
    ``then``: a later untagged commit on main."""
    repo = git.Repo.init(path, initial_branch="main")
    set_identity(repo)
    with repo.config_writer() as config:
        config.set_value("uploadpack", "allowFilter", "true")  # lets file:// clones be blob-less
    target = path / UPSTREAM_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    for tag, data in releases:
        target.write_bytes(data)
        repo.index.add([UPSTREAM_PATH])
        repo.index.commit(f"release {tag}")
        repo.create_tag(tag)
    if then is not None:
        target.write_bytes(then)
        repo.index.add([UPSTREAM_PATH])
        repo.index.commit("main moves on")
    return path


def add_branch(path: Path, name: str, data: bytes, *, base: str = "main") -> str:
    """A branch from ``base`` with one commit setting scheduler.py to ``data``; returns that commit's sha."""
    repo = git.Repo(path)
    previous = repo.active_branch.name
    repo.git.switch("--create", name, base)
    (path / UPSTREAM_PATH).write_bytes(data)
    repo.index.add([UPSTREAM_PATH])
    sha = repo.index.commit(f"{name}: upstream moves on").hexsha
    repo.git.switch(previous)
    return sha
