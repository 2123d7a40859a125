"""Whether a call fits a signature, read from source: what decides that a changed vLLM signature breaks a caller.

A *signature* is a ``def``'s parameters as Python binds them (positional-only, positional-or-keyword,
keyword-only, each with or without a default, ``*args``, ``**kwargs``); a *call* is what a call site
passes (so many positional arguments, these keywords, a ``*x`` or ``**x`` spread). ``refuses`` binds
a call to a signature the way the interpreter does and says why it would raise ``TypeError``; a spread
is taken to fill what it could (it is not known statically, and the tool never guesses a failure).

A coupling's verdict asks one question of every check: does it pass against release A's signature
and fail against B's? What already failed at A is not the bump's doing (an override that renames its
parameters has never been called by keyword).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    name: str
    default: bool  # has a default


@dataclass(frozen=True)
class Signature:
    positional: tuple[Param, ...]  # positional-only and positional-or-keyword, in order
    positional_only: int  # how many of ``positional`` are positional-only
    keyword_only: tuple[Param, ...]
    varargs: bool
    varkw: bool

    def bound(self) -> Signature:
        """As called on an instance (or a class's ``__init__`` through the class): the first parameter dropped."""
        if not self.positional:
            return self
        return Signature(
            self.positional[1:], max(0, self.positional_only - 1), self.keyword_only, self.varargs, self.varkw
        )

    def names(self) -> set[str]:
        """The names a keyword argument can take."""
        return {p.name for p in self.positional[self.positional_only :]} | {p.name for p in self.keyword_only}


@dataclass(frozen=True)
class Call:
    positional: int  # positional arguments written (a ``*x`` not counted)
    keywords: tuple[str, ...]  # keyword arguments written (a ``**x`` not counted)
    star: bool = False  # a ``*x``: fills any positional slots
    double_star: bool = False  # a ``**x``: fills any keywords


@dataclass(frozen=True)
class Receiver:
    """A function of the tree that vLLM's code calls in place of its own (an override, what a patch installs):
    where it is, and how Python binds a call to it."""

    qualname: str  # as a TypeError names it (``Cls.method``, ``function``)
    path: str
    line: int
    end: int
    signature: Signature  # as written (``self`` included)
    # plain | static | class: how it sits on a class (a def, a staticmethod, a classmethod); function: a
    # module's attribute, which no call binds
    kind: str = "plain"

    def bound_for(self, through_instance: bool) -> Signature:
        """The signature a call binds to: through an instance (``obj.m(x)``) a plain method takes the instance
        first; through the class (``Cls.m(x)``) only a classmethod takes anything first; a staticmethod and a
        module's function never do."""
        if self.kind == "class" or (self.kind == "plain" and through_instance):  # "function", "static": as written
            return self.signature.bound()
        return self.signature


def of(args: ast.arguments) -> Signature:
    """The signature of a ``def``'s ``args``."""
    positional = [*args.posonlyargs, *args.args]
    defaults = len(args.defaults)
    params = tuple(Param(a.arg, i >= len(positional) - defaults) for i, a in enumerate(positional))
    keyword_only = tuple(Param(a.arg, d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True))
    return Signature(params, len(args.posonlyargs), keyword_only, args.vararg is not None, args.kwarg is not None)


def call_of(node: ast.Call) -> Call:
    """What ``node`` passes."""
    positional = sum(not isinstance(a, ast.Starred) for a in node.args)
    keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
    star = any(isinstance(a, ast.Starred) for a in node.args)
    return Call(positional, keywords, star, any(k.arg is None for k in node.keywords))


def refuses(call: Call, sig: Signature) -> str | None:
    """Why calling ``sig`` as ``call`` raises ``TypeError`` (None: it binds)."""
    if call.positional > len(sig.positional) and not sig.varargs:
        return f"takes {len(sig.positional)} positional argument(s), {call.positional} given"
    filled = {p.name for p in sig.positional[: call.positional]}
    for keyword in call.keywords:
        if keyword in filled:
            return f"{keyword} is given positionally and by keyword"
        if keyword not in sig.names() and not sig.varkw:
            return f"takes no keyword {keyword}"
    given = set(call.keywords)
    for index, param in enumerate(sig.positional):
        if index < call.positional or param.default or call.star:
            continue
        if param.name in given or (call.double_star and index >= sig.positional_only):
            continue
        return f"needs {param.name}, not passed"
    for param in sig.keyword_only:
        if not param.default and param.name not in given and not call.double_star:
            return f"needs the keyword {param.name}, not passed"
    return None


def callers(sig: Signature) -> tuple[Call, Call]:
    """The calls a caller written against ``sig`` makes: its required parameters by position, then by keyword.

    Only the required ones: a parameter with a default is one a caller may leave out, so a change to it
    alone (added with a default, say) breaks no caller that does.
    """
    required = [p.name for p in sig.positional if not p.default]
    keywords = tuple(p.name for p in sig.keyword_only if not p.default)
    by_position = Call(len(required), keywords)
    by_keyword = Call(min(sig.positional_only, len(required)), tuple(required[sig.positional_only :]) + keywords)
    return by_position, by_keyword


def receiver_refuses(receiver: Signature, old: Signature, new: Signature) -> str | None:
    """Why ``receiver`` refuses a call written against ``new`` while it took the same form written against ``old``.

    The receiver is what vLLM's callers reach: an override's own signature, or (for a patch, whose
    function was written to fit A's callers) A's signature itself. This is the guess made when B's own calls
    of it are not found (``calls``: a thread's target, a callback, a registry's entry): such callers pass the
    required parameters by position, so a parameter B only renamed is no break here (B's calls, when found,
    say whether any passes it by keyword).
    """
    call_old, call_new = callers(old)[0], callers(new)[0]
    if refuses(call_old, receiver) is None and (reason := refuses(call_new, receiver)) is not None:
        return reason
    return None


def newly_refused(call: Call, old: Signature, new: Signature) -> str | None:
    """Why ``call`` (the tree's own) binds to ``old`` and not to ``new`` (None: it binds to both, or failed at A)."""
    if refuses(call, old) is not None:
        return None
    return refuses(call, new)
