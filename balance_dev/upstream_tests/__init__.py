"""`make upstream-tests`: vLLM's own scheduler tests, from the release's sdist, judging the generated copy.

Modules: ``sdist`` (the release's sdist, cached, and the test files it needs, byte-identical), ``hf_cache``
(the offline Hugging Face cache the tests' model names resolve to), ``overlay`` (the library versions the
release's own test lock pins, in a folder put first on the path), ``plugin`` (the pytest plugin that replaces
their tests/conftest.py: the scheduler substitution per mode and the record of every ``schedule()`` output),
``record`` (the stable serialization of those outputs), ``harness`` (the modes, the comparison, the summary).
"""
