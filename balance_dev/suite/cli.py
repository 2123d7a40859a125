"""`make downstream-suite`: a plugin's whole CPU unit suite at its pin (A) and at vLLM B, each failure named.

    python -m balance_dev.suite [--project vllm-ascend|vllm-spyre]
                                [--version 0.30.0rc2] [--to v0.33.0] [--tests tests/ut] [--timeout 120]
                                [--work build/suite] [--venvs .venv-suite] [--out FILE] [--no-coverage]
                                [--reuse-runs] [--impact-json FILE] [--amend-plan PLAN] [--no-peel] [--peel-limit N]
                                [--adapt] [--span]

1. vllm-ascend VERSION's sdist from the package index (cached, held to its sha256), extracted fresh once
   (`make downstream`'s tree: their files byte-identical, plus the _build_info.py their setup.py writes).
2. Two venvs, VENVS-A and VENVS-B: `make downstream`'s (vLLM on CPU torch, their requirements minus the
   NPU stack) plus the suite's packages (venvs.py); stamps skip them on reruns.
3. Their suite as their ``cpu-ut`` job runs it (run.py), at A under coverage of the tree's files, then,
   the tree unchanged, at B. ``--continue-on-collection-errors``: a module that no longer imports at B
   fails its own tests, not the whole run (their CI stops at the first; we want every test's outcome).
4. ``impact --from A --to B --format json`` on the tree (this checkout's generator), the bump's failures
   (pass at A, fail or error at B) attributed to its couplings (attribute.py), the report written to OUT.
5. Peeling (peel.py; ``--no-peel`` skips it): at B, each import of a vLLM name B no longer has that stops
   collection (their conftest's, a test module's) gets a stand-in, one blocker at a time (at most
   ``--peel-limit``), then the suite runs at B again with them; the report's ``peeled`` part scores it.

6. ``--adapt``: a copy of the tree adapted A -> B by this checkout's ``adapt`` (adapted.py), run at B and
   peeled the same way: the bump's failures before and after ``adapt``, the tests it fixed and any it broke.
7. ``--span``: a copy adapted with ``adapt --span`` (A kept), run at A (no test that passed there may fail)
   and at B, peeled the same way: the report's ``span`` part.

``--project vllm-spyre``: the same steps on vllm-spyre's tree, pin, requirements and CI step (projects.py).

WORK keeps the run at A (``at-from.*``: records, log, meta, coverage), one per B (``at-vB.*``) and
``impact-vB.json``; ``--reuse-runs`` judges again what WORK holds and makes only what it lacks (another
B: that run alone). ``--amend-plan PLAN``: the report's markdown goes into a ``bump --plan`` plan's pull
request body, before upstream's diff (as `make upstream-tests` does). docs/suite.md has the figures.

Exit codes: 0 the report is written; 2 usage (also a plan that cannot take the report); 3 the suite cannot
be collected at A (one line naming the first collection error); 4 setup failed (the sdist, a venv: the
package pip could not install is named); 5 vLLM B has no wheel on the package index to run on CPU.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from balance_dev import downstream, plan_amend
from balance_dev.downstream import REPO_ROOT, HarnessError, say
from balance_dev.suite import adapted, outcomes, peel, projects, results, run, venvs
from generator.errors import PatchgenError
from generator.judge.explain.explained import Attribution
from generator.sources import index
from generator.tags import version_of

DEFAULT_OUT = "benchmarks/results/suite-{project}-{version}.json"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m balance_dev.suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", choices=sorted(projects.PROJECTS), default=projects.ASCEND.name)
    parser.add_argument("--version", help=f"the project's release (default: {downstream.DEFAULT_VERSION})")
    parser.add_argument("--to", help=f"vLLM release B (default: {projects.ASCEND.to})")
    parser.add_argument("--tests", action="append", help="their test paths (default: tests/ut)")
    parser.add_argument("--timeout", type=int, help="seconds per test (default: 120; their CI's where it has one)")
    parser.add_argument("--work", type=Path, default=Path("build/suite"))
    parser.add_argument("--venvs", type=Path, help="prefix: PREFIX-A, PREFIX-B (default: .venv-suite)")
    parser.add_argument("--out", help=f"the report (default: {DEFAULT_OUT})")
    parser.add_argument("--no-coverage", action="store_true", help="no coverage at A (no executed-sites figure)")
    parser.add_argument(
        "--reuse-runs",
        action="store_true",
        help="judge the runs (and impact JSON) WORK holds again, make only those it lacks",
    )
    parser.add_argument("--impact-json", type=Path, help="an impact --format json document to judge with")
    parser.add_argument(
        "--amend-plan", type=Path, help="put the report's markdown into this bump plan's pull request body"
    )
    parser.add_argument("--no-peel", action="store_true", help="no run at B past its blocking imports")
    parser.add_argument(
        "--adapt",
        action="store_true",
        help="also run at B on a copy of the tree after `adapt` A -> B: bump failures before and after",
    )
    parser.add_argument(
        "--span",
        action="store_true",
        help="also run a copy of the tree after `adapt --span` at A and at B: at A nothing may fail anew",
    )
    parser.add_argument(
        "--peel-limit", type=int, default=peel.DEFAULT_LIMIT, help="most stand-ins peeling makes (%(default)s)"
    )
    args = parser.parse_args(argv)
    project = projects.PROJECTS[args.project]
    args.version, args.to = args.version or project.version, args.to or project.to
    args.venvs = args.venvs or Path(project.venv_prefix)
    if not re.fullmatch(r"[0-9][0-9a-z.]*", args.version) or not re.fullmatch(r"v?[0-9][0-9a-z.]*", args.to):
        parser.error("--version and --to take release versions (0.30.0rc2, v0.33.0)")
    if args.peel_limit < 1:
        parser.error("--peel-limit takes a number of stand-ins, at least 1 (or --no-peel)")
    args.tests = args.tests or list(project.tests)
    args.out = Path(args.out or DEFAULT_OUT.format(project=project.name, version=args.version))
    args.work, args.venvs, args.out = (
        p if p.is_absolute() else REPO_ROOT / p for p in (args.work, args.venvs, args.out)
    )
    return args


def absolute(path: Path) -> Path:
    return path if path.is_absolute() else REPO_ROOT / path


def rerun_command(argv: Sequence[str]) -> str:
    """The command that makes the report from scratch (``--reuse-runs`` only re-judges what it made)."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg == "--reuse-runs" or arg.startswith("--amend-plan="):
            skip = False
            continue
        if arg == "--amend-plan":
            skip = True  # and its value: amending a plan is not part of making the report
            continue
        kept.append(arg)
    return shlex.join([".venv/bin/python", "-m", "balance_dev.suite", *kept])


def has_wheel(version: str, index_url: str | None = None) -> bool:
    """A vLLM wheel of ``version`` that installs on this machine (x86_64 Linux or any platform)."""
    for found in index.list_files("vllm", index_url):
        name = found.filename
        if name.startswith(f"vllm-{version}-") and name.endswith(".whl") and ("x86_64" in name or "-any." in name):
            return True
    return False


def suite_venv(project: projects.Project, venv: Path, vllm: str, tree: Path, work: Path) -> Path:
    log = work / f"install-{vllm}.log"
    return venvs.ensure_suite_venv(venv, vllm, tree, log, project.base_venv, project.dev)


def impact_json(tree: Path, vllm_from: str, vllm_to: str, out: Path) -> dict[str, object]:
    cmd = [sys.executable, "-m", "generator", "--root", str(tree), "impact", "--from", f"v{vllm_from}"]
    cmd += ["--to", f"v{vllm_to}", "--format", "json"]
    say(f"impact: {shlex.join(cmd)}")
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        raise HarnessError(f"impact exited {done.returncode}: {lines[-1]}")
    out.write_text(done.stdout, encoding="utf-8")
    say(f"impact: {time.monotonic() - started:.0f} s")
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


def first_collection_error(at_from: outcomes.SuiteRun, log: Path) -> str:
    if at_from.collect_errors:
        node, outcome = sorted(at_from.collect_errors.items())[0]
        return f"{node}: {outcome.error}"
    return downstream.first_error(log)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        return suite(args, rerun_command(argv))
    except (HarnessError, PatchgenError, OSError, subprocess.CalledProcessError) as exc:
        say(f"error: {exc}")
        return exc.code if isinstance(exc, HarnessError) else 4


def suite(args: argparse.Namespace, command: str) -> int:
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    project = projects.PROJECTS[args.project]
    kept = work / "tree" / project.tree_name(args.version)
    tree = kept if args.reuse_runs and kept.is_dir() else project.tree(args.version, work / "tree")
    ci = project.ci(tree)
    args.timeout = ci.timeout if args.timeout is None else args.timeout
    vllm_from, vllm_to = project.pinned_vllm(tree), version_of(args.to) if args.to.startswith("v") else args.to
    label_to = f"at-v{vllm_to}"  # WORK keeps one run at A and one per B: --reuse-runs --to C runs only C
    reuse = {label for label in ("at-from", label_to) if args.reuse_runs and run.has_run(label, work)}
    peeled = None  # (peeling, the run at B with its stand-ins), when --reuse-runs finds them
    if label_to in reuse and not args.no_peel:
        peeled = peel.reread_peeled(label_to, tree, work, run.reread(label_to, tree, work))
    need_to = label_to not in reuse or (peeled is None and not args.no_peel)
    if need_to and not has_wheel(vllm_to):
        say(f"error: vLLM {vllm_to} has no wheel on the package index to install on CPU torch")
        return 5
    started = time.monotonic()
    venv_from, venv_to = Path(f"{args.venvs}-{vllm_from}"), Path(f"{args.venvs}-{vllm_to}")
    python_from, python_to = venv_from / "bin" / "python", venv_to / "bin" / "python"
    if "at-from" not in reuse:
        python_from = suite_venv(project, venv_from, vllm_from, tree, work)
    if need_to:
        python_to = suite_venv(project, venv_to, vllm_to, tree, work)
    setup_seconds = time.monotonic() - started
    coverage_file = None if args.no_coverage else work / "at-from.coverage"
    if "at-from" in reuse:
        at_from = run.reread("at-from", tree, work)
    else:
        at_from = run.run_suite("at-from", python_from, tree, work, args.tests, args.timeout, coverage_file, ci=ci)
    if not at_from.tests:
        first = first_collection_error(at_from, work / "at-from.log")
        say(f"error: the suite cannot be collected at v{vllm_from}: {first}")
        return 3
    if label_to in reuse:
        at_to = run.reread(label_to, tree, work)
    else:
        at_to = run.run_suite(label_to, python_to, tree, work, args.tests, args.timeout, ci=ci)
    if peeled is None and not args.no_peel:
        peeled = peel.run_peeled(
            label_to, python_to, tree, work, args.tests, args.timeout, at_to, args.peel_limit, ci=ci
        )
    started = time.monotonic()
    made = work / f"impact-v{vllm_to}.json"
    if args.impact_json is not None:
        impact = json.loads(args.impact_json.read_text("utf-8"))
    elif args.reuse_runs and made.is_file():
        say(f"impact: reusing {made} (delete it to judge with a new impact)")
        impact = json.loads(made.read_text("utf-8"))
    else:
        impact = impact_json(tree, vllm_from, vllm_to, work / f"impact-v{vllm_to}.json")
    impact_seconds = time.monotonic() - started
    attribution = Attribution(tree, impact)  # the tool's own attribution: what `explain` runs
    couplings = attribution.couplings
    failures = outcomes.bump_failures(at_from, at_to)
    attributed = attribution.attribute(failures)
    breaks = [c for c in couplings if c.verdict == "breaks"]
    lines = None if coverage_file is None else run.executed_lines(python_from, coverage_file, tree)
    head = {"tree": f"{project.name} {args.version}", "from": f"v{vllm_from}", "to": f"v{vllm_to}", "command": command}
    doc = results.document(
        head,
        at_from,
        at_to,
        attributed,
        outcomes.theirs(at_from),
        breaks,
        None if lines is None else results.executed(breaks, lines),
    )
    if peeled is not None:
        peeling, at_peeled = peeled
        doc["peeled"] = results.peeled_part(
            {"limit": args.peel_limit, **peeling.to_json()},
            at_from,
            at_peeled,
            attribution.attribute(outcomes.bump_failures(at_from, at_peeled)),
            breaks,
            None if lines is None else results.executed(breaks, lines),
            peel.collection_uses(work, label_to),
            peel.refused_imports(label_to, tree, work, peeling),
        )
    review = sum(c.verdict == "review" for c in couplings)  # beside the silent rules: what a person reads
    doc["review_couplings"] = review
    if isinstance(doc.get("peeled"), dict):
        doc["peeled"]["review_couplings"] = review  # type: ignore[index]
    if args.adapt:
        if not python_to.is_file():  # the runs at B were reused, the adapted one may not be
            python_to = suite_venv(project, venv_to, vllm_to, tree, work)
        doc["adapted"] = adapted_part(args, tree, work, vllm_from, vllm_to, python_to, at_from, at_to, peeled, ci)
    if args.span:
        python_from = suite_venv(project, venv_from, vllm_from, tree, work)
        python_to = suite_venv(project, venv_to, vllm_to, tree, work)
        doc["span"] = span_part(args, tree, work, (vllm_from, vllm_to), (python_from, python_to), at_from, peeled, ci)
    doc["time"] = {
        "venvs": None if reuse else round(setup_seconds),
        "at_from": round(at_from.seconds),
        "at_to": round(at_to.seconds),
        "impact": round(impact_seconds),
        "peeling": None if peeled is None else round(peeled[0].seconds),
        "at_to_peeled": None if peeled is None else round(peeled[1].seconds),
        "slowest_modules_at_from": results.slowest_modules(at_from),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Paths of this checkout (a venv's, the tree's) in error lines: "." so the report is the same elsewhere.
    args.out.write_text(results.dumps(doc).replace(str(REPO_ROOT), "."), encoding="utf-8")
    for line in results.summary_lines(doc):
        print(line, flush=True)
    say(f"report: {args.out}")
    if args.amend_plan is not None:
        try:
            plan_amend.amend(args.amend_plan, results.markdown(doc).replace(str(REPO_ROOT), "."))
        except plan_amend.PlanAmendError as exc:
            raise HarnessError(str(exc), 2) from exc
        say(f"plan: {args.amend_plan} carries the suite's counts and failures by coupling")
    return 0


def adapted_part(
    args: argparse.Namespace,
    tree: Path,
    work: Path,
    vllm_from: str,
    vllm_to: str,
    python_to: Path,
    at_from: outcomes.SuiteRun,
    at_to: outcomes.SuiteRun,
    peeled: tuple[peel.Peeling, outcomes.SuiteRun] | None,
    ci: run.CI = run.ASCEND,
) -> dict[str, object]:
    """Issue 40 item 6: the suite at B on the adapted copy, peeled as the tree was, beside the tree's run."""
    label = f"at-v{vllm_to}-adapted"
    copy, said = adapted.adapt_copy(tree, work, vllm_from, vllm_to)
    same = adapted.same_as_before(work, label, str(said.pop("digest")))  # recorded whether reused or not
    reuse = args.reuse_runs and same
    if reuse and run.has_run(label, work):
        first = run.reread(label, copy, work)
    else:
        first = run.run_suite(label, python_to, copy, work, args.tests, args.timeout, ci=ci)
    before, after = at_to, first
    part: dict[str, object] = {"adapt": said}
    if peeled is not None:
        again = peel.reread_peeled(label, copy, work, first) if reuse else None
        if again is None:
            again = peel.run_peeled(
                label, python_to, copy, work, args.tests, args.timeout, first, args.peel_limit, ci=ci
            )
        before, after = peeled[1], again[1]
        part["peels_before"], part["peels_after"] = len(peeled[0].peels), len(again[0].peels)
    return part | adapted.side_by_side(at_from, before, after)


def span_part(
    args: argparse.Namespace,
    tree: Path,
    work: Path,
    versions: tuple[str, str],
    pythons: tuple[Path, Path],
    at_from: outcomes.SuiteRun,
    peeled: tuple[peel.Peeling, outcomes.SuiteRun] | None,
    ci: run.CI = run.ASCEND,
) -> dict[str, object]:
    """Issue 49: the suite on the spanned copy at A and at B (peeled as the tree was), beside the tree's runs."""
    (vllm_from, vllm_to), (python_from, python_to) = versions, pythons
    copy, said = adapted.adapt_copy(tree, work, vllm_from, vllm_to, span=True)
    said.pop("digest")
    at_a = run.run_suite("at-from-spanned", python_from, copy, work, args.tests, args.timeout, ci=ci)
    label = f"at-v{vllm_to}-spanned"
    at_b = run.run_suite(label, python_to, copy, work, args.tests, args.timeout, ci=ci)
    tree_at_to = run.reread(f"at-v{vllm_to}", tree, work)
    if peeled is not None:
        at_b = peel.run_peeled(label, python_to, copy, work, args.tests, args.timeout, at_b, args.peel_limit, ci=ci)[1]
        tree_at_to = peeled[1]
    return {"adapt": said} | adapted.spanned(at_from, tree_at_to, at_a, at_b)


if __name__ == "__main__":
    sys.exit(main())
