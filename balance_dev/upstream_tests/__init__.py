"""`make upstream-tests`: vLLM's own scheduler tests, from the release's sdist, judging the generated copy.

Modules: ``sdist`` (the release's sdist, cached, and the test files it needs, byte-identical), ``hf_cache``
(the offline Hugging Face cache the tests' model names resolve to), ``overlay`` (the library versions the
release's own test lock pins, in a folder put first on the path), ``plugin`` (the pytest plugin that replaces
their tests/conftest.py: the scheduler substitution per mode and the record of every ``schedule()`` output),
``record`` (the stable serialization of those outputs), ``runs`` (the eight runs, one run in its own process,
its result), ``environment`` (the set-up every run shares: overlay, shim, hub cache, seam), ``verdict`` (each
run compared with upstream's), ``report`` (the table, the markdown, the amended bump plan) and ``harness``
(the command: ``python -m balance_dev.upstream_tests``).

May import ``generator`` (the seam, the pin, the plan, tags) and ``balance_dev.project_files``; nothing imports
it but its own ``__main__`` and the tests.
"""
