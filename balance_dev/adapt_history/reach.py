"""After ``adapt``: does the tree still reach a vLLM name by a path ``impact`` called moved and gone at B?

``before`` is impact's JSON of the tree from A to B; ``after`` is impact's JSON of the adapted tree
read at B (``--from B --to B``). A coupling of ``before`` that is ``moved`` with the rule ``gone``
(the tree's path is gone at B, the definition stands elsewhere) is a name ``adapt`` could have
rewritten; each such path still spelled by a coupling of ``after`` is one it did not, and is listed
with what impact says of it at B and what adapt's report said of it (``left``: name -> its reason;
"not reported" when the report names it nowhere).
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def check(before: dict[str, Any], after: dict[str, Any], left: dict[str, str]) -> dict[str, Any]:
    moved = [c for c in before["couplings"] if c["status"] == "moved" and c["rule"] == "gone"]
    paths = {c["upstream"] for c in moved}
    still = sorted(
        {
            (c["upstream"], c["site"], c["kind"], c["status"], c["test"])
            for c in after["couplings"]
            if c["upstream"] in paths
        }
    )
    rows = [
        {"upstream": u, "site": s, "kind": k, "status": st, "test": t, "adapt": left.get(u, "not reported")}
        for u, s, k, st, t in still
    ]
    return {
        "moved_gone": {"code": sum(1 for c in moved if not c["test"]), "tests": sum(1 for c in moved if c["test"])},
        "moved_gone_by_kind": dict(sorted(Counter(c["kind"] for c in moved).items())),
        "paths": len(paths),
        "still_reached": {"code": sum(1 for r in rows if not r["test"]), "tests": sum(1 for r in rows if r["test"])},
        "still_reached_unreported": sum(1 for r in rows if r["adapt"] == "not reported"),
        "rows": rows,
    }
