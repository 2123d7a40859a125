"""Turn the patched method into the generated module's text (libcst for the class, jinja2 around it)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import jinja2
import libcst as cst

from generator.builder.deltas import CapCheck, Outcome
from generator.builder.imports import ImportBlock
from generator.sources.base import UPSTREAM_PATH

# Loaded through the package, so an installed wheel (or a pre-commit hook venv) finds it as package data:
# the repository's top-level templates/ folder is the package generator.templates in the wheel
# (pyproject.toml). A source checkout (an editable install) has no such package: there it is read from
# templates/ beside generator/.
TEMPLATE_PACKAGE = "generator.templates"
TEMPLATE_DIR = "."
SOURCE_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
TEMPLATE_NAME = "balance_scheduler.py.j2"
CLASS_NAME = "BalanceScheduler"
BASE_MODULE = "vllm_ascend.core.balance_scheduler_base"
BASE_NAME = "BalanceSchedulerBase"
DOCSTRING = '"""vLLM\'s Scheduler with balance scheduling: upstream ``schedule()`` plus the balance deltas."""'


# What the runtime gathers each step: upstream's own count, as a method so the base class can call it.
COUNT_METHOD = "balance_running_count"


def class_code(module: cst.Module, patched: cst.FunctionDef, cap: CapCheck, *, tag: str, sha256: str) -> str:
    """The generated class, rendered by libcst so the method keeps upstream's bytes and indentation.

    Besides ``schedule()``: the upstream file it came from (the runtime refuses another vLLM) and
    ``balance_running_count()``, whose body is upstream's cap-check count at this tag.
    """
    method = patched.with_changes(leading_lines=_without_leading_blanks(patched.leading_lines))
    count = cap.count if "\n" not in cap.count else f"({cap.count})"
    count_method = cst.parse_statement(
        f"def {COUNT_METHOD}(self) -> int:\n"
        f'    """Upstream\'s running-cap count at {tag}: what this rank sends in the per-step gather."""\n'
        f"    return {count}\n"
    )
    cls = cst.ClassDef(
        name=cst.Name(CLASS_NAME),
        bases=[cst.Arg(cst.Name(BASE_NAME))],
        body=cst.IndentedBlock(
            body=[
                cst.SimpleStatementLine(body=[cst.Expr(cst.SimpleString(DOCSTRING))]),
                cst.parse_statement(f'UPSTREAM_TAG = "{tag}"').with_changes(
                    leading_lines=[cst.EmptyLine(indent=False)]
                ),
                cst.parse_statement(f'UPSTREAM_SHA256 = "{sha256}"'),
                count_method.with_changes(leading_lines=[cst.EmptyLine(indent=False)]),
                method.with_changes(leading_lines=[cst.EmptyLine(indent=False), *method.leading_lines]),
            ]
        ),
    )
    return module.code_for_node(cls)


def _without_leading_blanks(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    lines = list(lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return lines


def license_lines(upstream_text: str) -> list[str]:
    """Upstream's SPDX header: the copied body stays under upstream's license."""
    lines = []
    for line in upstream_text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# SPDX-"):
            lines.append(line)
    return lines


def template_loader() -> jinja2.BaseLoader:
    """The template as package data (a wheel), else the source checkout's templates/ (an editable install)."""
    if importlib.util.find_spec(TEMPLATE_PACKAGE) is not None:
        return jinja2.PackageLoader(TEMPLATE_PACKAGE, TEMPLATE_DIR)
    return jinja2.FileSystemLoader(SOURCE_TEMPLATES)


def render_module(
    *, tag: str, sha256: str, upstream_text: str, class_src: str, imports: ImportBlock, outcomes: Sequence[Outcome]
) -> str:
    env = jinja2.Environment(
        loader=template_loader(),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    return env.get_template(TEMPLATE_NAME).render(
        tag=tag,
        sha256=sha256,
        upstream_path=UPSTREAM_PATH,
        class_name=CLASS_NAME,
        deltas=outcomes,
        license_lines=license_lines(upstream_text),
        imports=imports,
        base_import=f"from {BASE_MODULE} import {BASE_NAME}",
        class_code=class_src.rstrip("\n"),
    )
