"""A verdict per coupling: the bump breaks it (``breaks``), changes what it relies on (``review``), or neither.

The rules are data (``RULES``, listed in docs/impact.md): the first that applies to a coupling gives its
verdict, and the rule's name and words are its ``why``. ``breaks`` is what fails, or silently stops
working, when the code runs; ``review`` is behaviour the tree relies on that changed; ``info`` the rest.
Signatures are judged by ``signatures``: a check that passes against release A's and fails against B's.
This module is pure: it reads the judged couplings, the two resolvers and the tree's classes and calls.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, replace

from generator.judge.couplings import changes, inherited, instances, signatures
from generator.judge.couplings.changes import Change
from generator.judge.couplings.signatures import Receiver, Signature
from generator.judge.couplings.upstream import Definition, Resolver

BREAKS, REVIEW, INFO = "breaks", "review", "info"
VERDICTS = (BREAKS, REVIEW, INFO)  # the order reports use


@dataclass(frozen=True)
class Rule:
    name: str
    verdict: str
    when: str  # what the docs say of it


RULES = (
    Rule("gone", BREAKS, "the tree reaches the name by a path gone at B (removed, or moved without a re-export)"),
    Rule(
        "patch-lands-elsewhere",
        BREAKS,
        "a patch of a module's name that moved: it rebinds the old module's name, callers use the new one's",
    ),
    Rule(
        "patch-target-gone",
        BREAKS,
        "a test's patch (mock.patch, patch.object, monkeypatch.setattr) of an attribute its module or class bound"
        " at A and no longer binds at B: the patch raises AttributeError (create=True, raising=False excepted)",
    ),
    Rule("copy-of-removed", BREAKS, "a copy of a function B no longer has"),
    Rule("override-gone", BREAKS, "an override of a method B's base no longer has"),
    Rule(
        "refuses-b-call",
        BREAKS,
        "the tree's function in vLLM's place (an override, what a patch installs) refuses a call B's own code"
        " makes of what it replaces, a call A's code did not make",
    ),
    Rule(
        "override-signature", BREAKS, "an override that refuses a call B's callers make of the base, which it took at A"
    ),
    Rule("super-call", BREAKS, "an override whose super() call B's base refuses, which A's took"),
    Rule(
        "patch-signature",
        BREAKS,
        "a patch written for A's signature that B's callers call in a way A's refuses (not a test's mock.patch)",
    ),
    Rule("call-refused", BREAKS, "a call of a vLLM function or class with arguments B's signature refuses, A's took"),
    Rule(
        "abstract-added",
        BREAKS,
        "a class the tree subclasses gained an abstract method at B that the tree's class does not define"
        " (Python refuses to instantiate it)",
    ),
    Rule(
        "property-assigned",
        BREAKS,
        "a class the tree subclasses has, from B on, a read-only property the tree assigns on its class's objects"
        " (self.x = ..., or obj.x = ... on one it builds)",
    ),
    Rule(
        "member-gone",
        BREAKS,
        "the tree reads or calls, on an object of a vLLM class (its own subclass's self, or an object it builds),"
        " a member or attribute A's class had and B's has not",
    ),
    Rule(
        "attribute-unset",
        BREAKS,
        "B's methods of a class the tree subclasses newly read an attribute its objects never get (built bare"
        " in a test, or by the tree's own __init__ that does not call the base's)",
    ),
    Rule("copy-changed", REVIEW, "a copy whose upstream function changed (overlap: the statements both changed)"),
    Rule("override-added", REVIEW, "a method B's base starts defining: the tree's method overrides it from B on"),
    Rule(
        "positional-renamed",
        REVIEW,
        "the tree's call of a vLLM function passes an argument by position to a parameter B renamed: it binds,"
        " to what may mean something else",
    ),
    Rule(
        "patched-changed",
        REVIEW,
        "a patched or overridden definition that changed (its body, value or signature, compatibly)",
    ),
    Rule(
        "init-changed",
        REVIEW,
        "a class the tree subclasses whose __init__ or __init_subclass__ changed, or, for a dataclass or a"
        " NamedTuple, its fields",
    ),
    Rule(
        "own-binding",
        INFO,
        "a patch of a name the tree's own module binds to a vLLM name gone from its path: the tree's import"
        " of it is what breaks, and is judged",
    ),
    Rule(
        "gated",
        INFO,
        "the code sits in a branch of the tree's own version gate that is false at B (vllm_version_is(A)): it"
        " never runs there",
    ),
    Rule("moved-reexported", INFO, "moved, still reached by the tree's path through a re-export"),
    Rule("redundant", INFO, "a copy equal to B's function: the copy can go"),
    Rule("declared", INFO, "a registry entry: documentation (the code that patches is judged on its own)"),
    Rule("unresolved", INFO, "not named statically, or nothing at A nor at B (listed with why)"),
    Rule("other", INFO, "the rest: unchanged, added, or an import whose changes the tree does not rely on"),
)
BY_NAME = {r.name: r for r in RULES}


@dataclass(frozen=True)
class Verdict:
    verdict: str
    rule: str
    reason: str  # the rule's words for this coupling
    line: int = 0  # the line the rule points at when it is not the site's (a refused call)
    path: str = ""  # its file, when not the site's
    end: int = 0  # a function the rule points at (B's call reaches it): its last line
    receiver: str = ""  # that function's qualified name (what a TypeError names)


@dataclass(frozen=True, order=True)
class Subclass:
    """A class of the tree below a vLLM class (a leaf: what gets instantiated), with the names it and the
    tree's classes between bind (methods, class-level names) and the attributes their methods assign."""

    qualname: str
    binds: frozenset[str]
    assigns: frozenset[str]


@dataclass(frozen=True)
class Method:
    """An override's own signature and its ``super()`` calls, as the tree's class writes them."""

    signature: Signature
    super_calls: tuple[tuple[int, signatures.Call], ...]
    receiver: Receiver | None = None  # the method as B's calls reach it


def _given(rule: str, reason: str = "", line: int = 0) -> Verdict:
    found = BY_NAME[rule]
    return Verdict(found.verdict, rule, reason or found.when, line)


def _refusing(receiver: Receiver, b_call: tuple[str, str], site_path: str) -> Verdict:
    """``refuses-b-call``, pointing at the tree's function B's call reaches."""
    where, why = b_call
    reason = f"{where} calls it; the tree's {receiver.qualname} ({receiver.path}:{receiver.line}) {why}"
    path = receiver.path if receiver.path != site_path else ""
    return replace(_given("refuses-b-call", reason, receiver.line), path=path, end=receiver.end,
                   receiver=receiver.qualname)  # fmt: skip


def signature_of(definition: Definition | None) -> Signature | None:
    """A function's signature as its callers see it (a method's first parameter bound; a class: its ``__init__``)."""
    node = definition.node if definition is not None else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    sig = signatures.of(node.args)
    decorators = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
    method = definition is not None and "." in definition.qualname and "<locals>" not in definition.qualname
    return sig.bound() if method and "staticmethod" not in decorators else sig


def callee_signature(resolver: Resolver, definition: Definition | None) -> Signature | None:
    """What a call of ``definition`` binds to: a function's signature, a class's ``__init__`` (None: not known)."""
    if definition is not None and definition.kind == "class":
        if (generated := inherited.init_signature(resolver, definition)) is not None:
            return generated  # a dataclass's or a NamedTuple's, from its fields
        init = resolver.defines(definition.name, "__init__")
        return signature_of(init) if init is not None else None
    return signature_of(definition)


def judge(
    kind: str,
    status: str,
    upstream: str,
    change: Change | None,
    a: Resolver,
    b: Resolver,
    *,
    method: Method | None = None,
    subclasses: Sequence[Subclass] = (),
    uses: Sequence[instances.Use] = (),
    refused_calls: Sequence[tuple[int, str]] = (),
    renamed_calls: Sequence[tuple[int, str]] = (),
    mocked: bool = False,
    imports: str = "",
    own_binding: bool = False,
    installs: Receiver | None = None,
    b_call: tuple[str, str] | None = None,
    b_seen: bool = False,
    site_path: str = "",
    test_patch: bool = False,
    creates: bool = False,
) -> Verdict:
    """The verdict of one coupling (``kind`` at ``status``) on ``upstream``, whose change from A to B is ``change``.

    ``imports``: the module the coupling's import statement imports, which B must have as a file.
    ``installs``: what a patch installs, when the tree defines it; ``b_call``: B's call of the definition (its
    site) that the override's or the installed function's own signature refuses, and why (``calls.refusals``);
    ``b_seen``: B's calls of it were found, and none refused: what they pass is known, so no guess from the
    signatures alone (``override-signature``, ``patch-signature``) is made.
    """
    if kind == "declared":
        return _given("declared")
    if (
        kind == "patch"
        and test_patch
        and not own_binding  # it patches the tree's own module's name, which is there
        and status != changes.REMOVED
        and (gone := _attribute_gone(upstream, a, b, creates))
    ):
        holder, _, name = gone.rpartition(".")
        return _given("patch-target-gone", f"{holder} has no {name} at {b.label}: the patch raises AttributeError")
    if status == changes.UNRESOLVED or change is None:
        return _given("unresolved")
    if status == changes.REDUNDANT:
        return _given("redundant")
    old, new = change.old, change.new
    at_b = f"at {b.label}"
    if kind == "patch" and own_binding and status in (changes.REMOVED, changes.MOVED):
        return _given("own-binding")
    if status == changes.REMOVED:
        rule = {"copy": "copy-of-removed", "override": "override-gone"}.get(kind, "gone")
        return _given(rule)
    if status == changes.MOVED and kind != "copy":
        if not isinstance(b.imported(upstream, imports) if imports else b.resolve(upstream), Definition):
            return _given(
                "gone", f"{upstream} is gone {at_b}, now {change.moved_to}: the tree's path does not reach it"
            )
        parent = b.resolve(upstream.rpartition(".")[0])
        if kind == "patch" and isinstance(parent, Definition) and parent.kind == "module":
            return _given(
                "patch-lands-elsewhere",
                f"rebinds {upstream} while {b.label}'s callers use {change.moved_to}: the patch installs nothing",
            )
    if kind == "copy":
        return _given("copy-changed") if status in (changes.CHANGED, changes.MOVED) else _given("other")
    old_sig, new_sig = signature_of(old), signature_of(new)
    if kind == "override":
        if status == changes.ADDED:
            return _given("override-added")
        if method is not None and method.receiver is not None and b_call is not None:
            return _refusing(method.receiver, b_call, site_path)
        if method is not None and old_sig is not None and new_sig is not None:
            own = method.signature.bound()
            # an __init__ is called by whoever builds the tree's class (the tree: judged as its calls, instances.py)
            guess = not b_seen and not upstream.endswith(("__init__", "__new__"))
            if guess and (reason := signatures.receiver_refuses(own, old_sig, new_sig)) is not None:
                return _given(
                    "override-signature", f"B's callers call the base as {_shown(new)}: the override {reason}"
                )
            for line, call in method.super_calls:
                if (reason := signatures.newly_refused(call, old_sig, new_sig)) is not None:
                    return _given("super-call", f"super() call at line {line}: {b.label}'s base {reason}", line)
        if status in (changes.CHANGED, changes.MOVED):
            return _given("patched-changed", "the overridden method changed")
        return _given("other")
    if kind == "patch":
        if not mocked and installs is not None and b_call is not None:
            return _refusing(installs, b_call, site_path)
        # What the patch installs, as B's callers reach it; unknown, a function written for A's signature.
        receiver = old_sig
        if installs is not None and old is not None:
            receiver = installs.bound_for("." in old.qualname)
        if (
            not mocked  # a test's mock.patch puts a MagicMock there: it takes any call
            and not b_seen
            and receiver is not None
            and old_sig is not None
            and new_sig is not None
            and (reason := signatures.receiver_refuses(receiver, old_sig, new_sig))
        ):
            whose = f"the installed {installs.qualname}" if installs is not None else f"{a.label}'s signature"
            return _given("patch-signature", f"{b.label}'s callers call it in a way {whose} refuses: {reason}")
        if status in (changes.CHANGED, changes.MOVED):
            return _given("patched-changed", "the patched definition changed")
        return _given("other")
    # An import: what the tree does with the name decides.
    if refused_calls:
        line, reason = refused_calls[0]
        return _given("call-refused", reason, line)
    if (
        (subclasses or uses)
        and old is not None
        and new is not None
        and old.kind == new.kind == "class"
        and (found := _under_subclass(subclasses, uses, old, new, a, b)) is not None
    ):
        return replace(found, path="") if found.path == site_path else found
    if renamed_calls:
        line, reason = renamed_calls[0]
        return _given("positional-renamed", reason, line)
    if status == changes.MOVED:
        return _given("moved-reexported")
    return _given("other")


def _under_subclass(
    subclasses: Sequence[Subclass],
    uses: Sequence[instances.Use],
    old: Definition,
    new: Definition,
    a: Resolver,
    b: Resolver,
) -> Verdict | None:
    """What B's class does to the tree's classes below it that they do not write: a new abstract method
    they do not define, a read-only property they assign, what it does to the objects the tree builds of
    them (``instances``), a changed generated or explicit initializer."""
    added = inherited.abstract_methods(b, new) - inherited.abstract_methods(a, old)
    for sub in subclasses:
        if gap := sorted(added - sub.binds):
            return _given("abstract-added", f"{new.name} declares {', '.join(gap)} abstract at {b.label}: "
                          f"{sub.qualname} does not define it, so it cannot be instantiated")  # fmt: skip
    read_only = inherited.read_only_properties(b, new) - inherited.read_only_properties(a, old)
    for sub in subclasses:
        if hit := sorted((read_only & sub.assigns) - sub.binds):
            return _given("property-assigned", f"{new.name}.{hit[0]} is a property without a setter at {b.label}: "
                          f"{sub.qualname} assigns self.{hit[0]}")  # fmt: skip
    if uses and (found := instances.judge(uses, old, new, a, b)) is not None:
        return replace(_given(found.rule, found.reason, found.line), path=found.path, end=found.end)
    for member in ("__init__", "__init_subclass__"):
        init_a, init_b = a.defines(old.name, member), b.defines(new.name, member)
        if init_a is not None and init_b is not None and changes.parts_of(init_a, init_b, a, b)[0]:
            return _given("init-changed", f"{init_b.name} changed: the tree's subclass runs it")
        if (init_a is None) != (init_b is None) and member == "__init_subclass__":
            return _given("init-changed", f"{new.name}.__init_subclass__ is new at {b.label}: it checks the subclass")
    fields_a, fields_b = inherited.fields(a, old), inherited.fields(b, new)
    if fields_a != fields_b and fields_b is not None:
        return _given("init-changed", f"{new.name}'s fields changed ({', '.join(fields_b)} at {b.label}): "
                      "its generated __init__ takes them")  # fmt: skip
    return None


def refused_call(call: signatures.Call, line: int, name: str, a: Resolver, b: Resolver) -> str | None:
    """Why B refuses the tree's call (at ``line``) of the vLLM name ``name`` when A took it (None: no such change)."""
    old, new = a.resolve(name), b.resolve(name)
    if not isinstance(old, Definition) or not isinstance(new, Definition):
        return None
    old_callee, new_callee = callee_signature(a, old), callee_signature(b, new)
    if old_callee is None or new_callee is None or old_callee == new_callee:
        return None
    reason = signatures.newly_refused(call, old_callee, new_callee)
    return None if reason is None else f"the call of {name} at line {line}: {b.label}'s {new.name} {reason}"


def _attribute_gone(target: str, a: Resolver, b: Resolver, creates: bool) -> str | None:
    """The first part of a patch's target (``vllm.m.dist`` of ``vllm.m.dist.all_reduce``) that its module or
    class binds at A and not at B: ``mock.patch`` reaches the target through each part, and raises there;
    ``create=True`` (``raising=False``) excuses the last part only."""
    parts = target.split(".")
    for end in range(2, len(parts) + (0 if creates else 1)):
        prefix = ".".join(parts[:end])
        if a.has_attribute(prefix) is True and b.has_attribute(prefix) is False:
            return prefix
    return None


def renamed_argument(call: signatures.Call, line: int, name: str, a: Resolver, b: Resolver) -> str | None:
    """A positional argument of the tree's call (at ``line``) of ``name`` that B binds to a parameter of another
    name than A did: the call still binds, to what may mean something else (None: no such argument)."""
    old, new = a.resolve(name), b.resolve(name)
    if not isinstance(old, Definition) or not isinstance(new, Definition):
        return None
    old_callee, new_callee = callee_signature(a, old), callee_signature(b, new)
    if old_callee is None or new_callee is None or old_callee == new_callee:
        return None
    if signatures.refuses(call, old_callee) is not None or signatures.refuses(call, new_callee) is not None:
        return None
    for index in range(min(call.positional, len(old_callee.positional), len(new_callee.positional))):
        was, now = old_callee.positional[index].name, new_callee.positional[index].name
        if was != now and was not in new_callee.names():
            return (
                f"the call of {name} at line {line} passes its argument {index + 1} to {now} at {b.label}, "
                f"to {was} at {a.label}: the parameter was renamed"
            )
    return None


def _shown(definition: Definition | None) -> str:
    return definition.name if definition is not None else "it"
