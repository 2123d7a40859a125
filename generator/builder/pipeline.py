"""The pure core: upstream file in, generated module text out. No I/O, no clock, no paths."""

from __future__ import annotations

from dataclasses import dataclass

from generator.builder import deltas, extract, imports, render, verify
from generator.sources.base import UpstreamFile


@dataclass(frozen=True)
class Generated:
    text: str
    # What each delta did at this tag, as the header lists it (a bump's pull request says the same).
    outcomes: tuple[deltas.Outcome, ...]


def generate(upstream: UpstreamFile) -> str:
    return build(upstream).text


def build(upstream: UpstreamFile) -> Generated:
    text = upstream.text
    module = extract.parse(text, upstream.tag)
    found = extract.extract(module, upstream.tag)
    patched = deltas.apply_all(found.method, deltas.DeltaContext(upstream.tag, module))
    class_src = render.class_code(module, patched.method, patched.cap, tag=upstream.tag, sha256=upstream.sha256)
    names = imports.free_names(class_src) - {render.BASE_NAME}
    tree = extract.top_level(module)
    block = imports.resolve(names, imports.module_bindings(tree), tag=upstream.tag)
    block.future = imports.future_imports(tree)
    rendered = render.render_module(
        tag=upstream.tag,
        sha256=upstream.sha256,
        upstream_text=text,
        class_src=class_src,
        imports=block,
        outcomes=patched.outcomes,
    )
    return Generated(rendered, tuple(patched.outcomes))


def build_verified(upstream: UpstreamFile) -> Generated:
    """``build``, then the independent check: a generator bug must never reach the tree or a pull request."""
    generated = build(upstream)
    verify.verify(generated.text, upstream.text)
    return generated
