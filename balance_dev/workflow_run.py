"""Run a GitHub Actions workflow's own shell steps here, job by job, the way a runner would.

What only GitHub has is stood in for, and nothing else: ``uses:`` steps (checkout, setup-python)
are the workspace and interpreter the caller prepared, the install step is the caller's venv, and
``gh`` is whatever the caller puts first on PATH. Every ``run:`` script runs unchanged, with the shell
the workflow names, the environment its ``env:`` blocks give (expressions resolved from the values
the caller supplies, step outputs and earlier jobs' outputs), ``$GITHUB_OUTPUT`` and ``$RUNNER_TEMP``.
An expression the caller did not supply fails the run: a changed workflow cannot pass unread.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# The steps a workflow uses to get the toolchain: here the caller's checkout and venv stand for them.
SETUP_RUNS = frozenset({"make regen-deps"})


class WorkflowError(AssertionError):
    """A job's step failed, or the workflow asks for something this runner does not stand in for."""


@dataclass
class Job:
    name: str
    ran: bool
    outputs: dict[str, str] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)


@dataclass
class WorkflowRun:
    path: Path
    workspace: Path
    env: dict[str, str]  # the runner's environment (PATH, HOME, GITHUB_REPOSITORY, ...)
    values: Mapping[str, str]  # what `${{ name }}` resolves to: github.token, vars.X, ...
    # Replacements for values the workflow's own env: blocks set (e.g. a repository URL), where they set them.
    overrides: Mapping[str, str] = field(default_factory=dict)
    # Steps run by another script the caller gives (its ``run:`` text, stripped -> that script): a step
    # whose real work is tested on its own and takes minutes (bump-judge: make upstream-tests).
    stand_ins: Mapping[str, str] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.spec: dict[str, Any] = yaml.safe_load(self.path.read_text())

    @property
    def shell(self) -> list[str]:
        name = self.spec.get("defaults", {}).get("run", {}).get("shell", "bash")
        # What GitHub runs for each shell it names (its "default shell" table).
        shells = {"bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"], "sh": ["sh", "-e"]}
        if name not in shells:
            raise WorkflowError(f"shell {name!r} is not one this runner knows")
        return shells[name]

    def run(self, job_name: str) -> Job:
        """Run one job, if its ``if:`` holds given the jobs run before; returns its outputs."""
        spec = self.spec["jobs"][job_name]
        needs = spec.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            if need not in self.jobs:
                raise WorkflowError(f"job {job_name} needs {need}, which has not run")
        if "if" in spec and not self._condition(spec["if"]):
            self.jobs[job_name] = Job(job_name, ran=False)
            return self.jobs[job_name]
        job = Job(job_name, ran=True)
        steps: dict[str, dict[str, str]] = {}
        with tempfile.TemporaryDirectory(prefix=f"{job_name}-") as runner_temp:
            for number, step in enumerate(spec["steps"]):
                if "uses" in step or step.get("run", "").strip() in SETUP_RUNS:
                    continue
                outputs = Path(runner_temp) / f"output-{number}"
                outputs.touch()
                own: dict[str, str] = {}
                for block in (self.spec.get("env", {}), spec.get("env", {}), step.get("env", {})):
                    own.update({k: self._resolve(str(v), steps) for k, v in block.items()})
                own.update({k: v for k, v in self.overrides.items() if k in own})
                env = {**self.env, **own}
                env.update(RUNNER_TEMP=runner_temp, GITHUB_OUTPUT=str(outputs))
                script = Path(runner_temp) / f"step-{number}.sh"
                script.write_text(self.stand_ins.get(step["run"].strip(), step["run"]))
                done = subprocess.run(
                    [*self.shell, str(script)], cwd=self.workspace, env=env, capture_output=True, text=True, timeout=600
                )
                job.logs.append(done.stdout + done.stderr)
                if done.returncode != 0:
                    raise WorkflowError(
                        f"{job_name}: step {step.get('name', number)} exited {done.returncode}:\n"
                        f"{done.stdout}{done.stderr}"
                    )
                if "id" in step:
                    steps[step["id"]] = _read_outputs(outputs)
        job.outputs = {k: self._resolve(str(v), steps) for k, v in spec.get("outputs", {}).items()}
        self.jobs[job_name] = job
        return job

    def _lookup(self, name: str, steps: Mapping[str, Mapping[str, str]]) -> str:
        if match := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", name):
            return steps.get(match[1], {}).get(match[2], "")
        if match := re.fullmatch(r"needs\.([\w-]+)\.outputs\.([\w-]+)", name):
            return self.jobs[match[1]].outputs.get(match[2], "")
        if name not in self.values:
            raise WorkflowError(f"the workflow reads ${{{{ {name} }}}}, which this run was not given")
        return self.values[name]

    def _resolve(self, text: str, steps: Mapping[str, Mapping[str, str]]) -> str:
        return _EXPRESSION.sub(lambda m: self._lookup(m[1], steps), text)

    def _condition(self, expression: str) -> bool:
        """GitHub's expression subset the workflow's ``if:`` uses: ``==``, ``&&``, ``||``, ``!cancelled()``."""
        text = _EXPRESSION.sub(lambda m: m[1], expression).strip()
        text = text.replace("!cancelled()", "True").replace("&&", " and ").replace("||", " or ")
        names = {}
        for number, name in enumerate(sorted(set(re.findall(r"needs\.[\w.-]+", text)), key=len, reverse=True)):
            names[f"_v{number}"] = self._lookup(name, {})
            text = text.replace(name, f"_v{number}")
        if re.search(r"[^\w\s'()=!.-]|__", text):
            raise WorkflowError(f"if: {expression!r} uses more than this runner evaluates")
        return bool(eval(text, {"__builtins__": {}, "True": True}, names))


def _read_outputs(path: Path) -> dict[str, str]:
    """``name=value`` lines, as steps write them to ``$GITHUB_OUTPUT`` (no multi-line values here)."""
    found = {}
    for line in path.read_text().splitlines():
        if "<<" in line.split("=", 1)[0]:
            raise WorkflowError("multi-line step outputs are not read by this runner")
        name, _, value = line.partition("=")
        found[name] = value
    return found


def runner_env(home: Path, path_first: Path, **extra: str) -> dict[str, str]:
    """The runner's own environment: this machine's PATH behind ``path_first`` (the fake gh), a fresh HOME."""
    keep = ("PATH", "LANG", "PIP_INDEX_URL", "BALANCE_PATCHGEN_CACHE", "SSL_CERT_FILE", "PIP_CERT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        PATH=f"{path_first}{os.pathsep}{os.environ['PATH']}",
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        CI="true",
        GITHUB_ACTIONS="true",
    )
    env.update(extra)
    return env
