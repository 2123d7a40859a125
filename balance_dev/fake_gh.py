"""A stand-in for the ``gh`` CLI, for running the bump workflow's scripts where GitHub cannot be reached.

Only GitHub itself is faked: the pull requests and issues live in a JSON file (``$FAKE_GH_STATE``),
and every call is recorded there with the token and repository it was given, so a test can check
what the workflow asked of GitHub. The subset is exactly what ``.github/workflows/bump.yml`` uses;
anything else exits 1, failing the step as an unknown command would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

STATE_ENV = "FAKE_GH_STATE"


def load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"calls": [], "pull_requests": [], "issues": [], "dispatches": []}
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def _fields(items: list[dict[str, Any]], wanted: str) -> str:
    return json.dumps([{k: item[k] for k in wanted.split(",")} for item in items])


def _body(args: argparse.Namespace) -> str:
    return Path(args.body_file).read_text()


def main(argv: list[str]) -> int:
    path = Path(os.environ[STATE_ENV])
    state = load(path)
    state["calls"].append({"argv": argv, "token": os.environ.get("GH_TOKEN"), "repo": os.environ.get("GH_REPO")})
    parser = argparse.ArgumentParser(prog="gh")
    parser.add_argument("group")
    parser.add_argument("verb")
    parser.add_argument("target", nargs="?")
    for option in ("--head", "--state", "--json", "--title", "--body-file", "--search", "--ref", "--limit"):
        parser.add_argument(option)
    args = parser.parse_args(argv)
    prs, issues = state["pull_requests"], state["issues"]
    out = ""
    match (args.group, args.verb):
        case ("auth", "setup-git"):
            pass
        case ("pr", "list"):
            found = [p for p in reversed(prs) if p["head"] == args.head and args.state in ("all", p["state"].lower())]
            out = _fields(found, args.json)
        case ("pr", "create"):
            number = len(prs) + len(issues) + 1
            prs.append({"number": number, "head": args.head, "title": args.title, "body": _body(args), "state": "OPEN"})
            out = f"https://github.invalid/pull/{number}"
        case ("pr", "edit"):
            pr = next(p for p in prs if p["number"] == int(args.target))
            pr.update(title=args.title, body=_body(args))
        case ("workflow", "run"):
            state["dispatches"].append({"workflow": args.target, "ref": args.ref})
        case ("issue", "list"):
            found = [i for i in reversed(issues) if args.state in ("all", i["state"].lower())]
            out = _fields(found, args.json)
        case ("issue", "create"):
            number = len(prs) + len(issues) + 1
            issues.append({"number": number, "title": args.title, "body": _body(args), "state": "OPEN"})
            out = f"https://github.invalid/issues/{number}"
        case ("issue", "edit"):
            next(i for i in issues if i["number"] == int(args.target))["body"] = _body(args)
        case ("issue", "reopen"):
            next(i for i in issues if i["number"] == int(args.target))["state"] = "OPEN"
        case _:
            print(f"fake gh: {' '.join(argv)} is not something bump.yml is expected to ask", file=sys.stderr)
            return 1
    path.write_text(json.dumps(state, indent=1))
    if out:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
