"""Pins and bumps: the pinned release, git refs, what a bump shows, and the plan automation acts on.

``pin`` and ``refs`` read the ``.commit`` files, ``pin_bump`` is upstream's own diff across a bump,
``matrix`` judges one release or ref per line, ``plan`` is the JSON a bump's workflow acts on.

May import: ``generator.judge``, ``generator.builder``, ``generator.sources`` and the shared modules.
"""
