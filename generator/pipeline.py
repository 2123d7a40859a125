"""The pure core: upstream file in, generated module text out. No I/O, no clock, no paths."""

from __future__ import annotations

from generator import deltas, extract, imports, render
from generator.sources.base import UpstreamFile


def generate(upstream: UpstreamFile) -> str:
    text = upstream.text
    module = extract.parse(text, upstream.tag)
    found = extract.extract(module, upstream.tag)
    patched = deltas.apply_all(found.method, deltas.DeltaContext(upstream.tag, module))
    class_src = render.class_code(module, patched.method, patched.cap, tag=upstream.tag, sha256=upstream.sha256)
    names = imports.free_names(class_src) - {render.BASE_NAME}
    tree = extract.top_level(module)
    block = imports.resolve(names, imports.module_bindings(tree), tag=upstream.tag)
    block.future = imports.future_imports(tree)
    return render.render_module(
        tag=upstream.tag,
        sha256=upstream.sha256,
        upstream_text=text,
        class_src=class_src,
        imports=block,
        outcomes=patched.outcomes,
    )
