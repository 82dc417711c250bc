# aokeyd — see README.md. `make test` is the one command that passes every
# test on a fresh machine (it installs and builds what it needs; the guest
# kernel and root are cached under ~/.cache/aokeyd after the first run).
SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 60s
# Packages whose tests need the real TCP-AO kernel: every package with a test
# that calls kerneltest.Require. Found, not listed, so none is forgotten.
KERNEL_PKGS = $(shell grep -rl --include='*_test.go' 'kerneltest.Require' . | xargs -r -n1 dirname | sort -u)

.PHONY: vault-real field all build deps test test-unit test-kernel differential fuzz bench migrate-lan demo soak chaos chaos-mutant lint rules renderings vm clean model model-traces deb fuzz-short

all: build

# The version aokeyd reports (main.version), from git.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/ ./cmd/...

# The Debian packages (amd64 and arm64) in dist/, built with nfpm from
# deploy/debian; DEB_ARCHS=amd64 for one. See integration/tools/deb.sh.
deb:
	bash integration/tools/deb.sh

deps:
	@bash integration/tools/deps.sh
	@bash integration/tools/gobgpd.sh >/dev/null
	@bash integration/tools/promtool.sh >/dev/null
	@# Each module's own requirements (go.work would download the whole
	@# workspace's module graph and write a go.work.sum).
	@GOWORK=off $(GO) mod download
	@cd integration && GOWORK=off $(GO) mod download

# staticcheck at a pinned version, installed once into the cache.
STATICCHECK_VERSION = v0.8.2
TOOLS = $(HOME)/.cache/aokeyd/tools/staticcheck-$(STATICCHECK_VERSION)
STATICCHECK = $(TOOLS)/staticcheck

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Two modules (go.work joins them; ./... names the main module's packages
# only, so the harness's are named as ./integration/...).
lint: $(STATICCHECK)
	$(GO) mod tidy -diff
	cd integration && $(GO) mod tidy -diff
	$(GO) vet ./... ./integration/...
	$(GO) vet -tags denselan ./integration/e2e
	GOARCH=386 $(GO) vet ./tcpao/...
	@out=$$(gofmt -l . 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) ./... ./integration/...
	@# The shipped module is free of the harness's dependencies: aokeyd and
	@# aoctl link no plotting, font, LaTeX or PDF package, and go.mod names
	@# none (the benchmark's chart is the integration module's).
	@bad=$$( { $(GO) list -deps ./cmd/aokeyd ./cmd/aoctl && cat go.mod; } | grep -Ei 'gonum|latex|pdf|font' || true); \
		if [ -n "$$bad" ]; then echo "the main module needs the harness's plotting dependencies:"; echo "$$bad"; exit 1; fi
	@# go.work must not change what the main module builds with: every
	@# module its packages and their tests link is at the version the main
	@# module's own go.mod selects (GOWORK=off), as for go install.
	@f='{{with .Module}}{{.Path}} {{.Version}}{{end}}'; \
		alone=$$(GOWORK=off $(GO) list -deps -test -f "$$f" ./... | sort -u) || exit 1; \
		work=$$($(GO) list -deps -test -f "$$f" ./... | sort -u) || exit 1; \
		if [ "$$alone" != "$$work" ]; then echo "go.work changes the main module's dependencies (< alone, > in the workspace):"; diff <(echo "$$alone") <(echo "$$work"); exit 1; fi
	@# aoctl is the operator's CLI: it must not link the daemon, a speaker
	@# adapter or the metrics client (desired state lives in internal/desired).
	@bad=$$($(GO) list -deps ./cmd/aoctl | grep -E '/internal/daemon$$|/internal/metrics$$|/bgp/gobgp$$|/bgp/frr$$|prometheus/client_golang' || true); \
		if [ -n "$$bad" ]; then echo "aoctl links what it must not:"; echo "$$bad"; exit 1; fi
	@# aokeyd-bench runs in the guest and measures its own RSS: it must not
	@# link the report's plotting library, which parses fonts at start-up.
	@deps=$$($(GO) list -deps ./integration/bench/cmd/aokeyd-bench) || exit 1; \
		bad=$$(grep '^gonum\.org/v1/plot' <<<"$$deps"); \
		if [ -n "$$bad" ]; then echo "aokeyd-bench links the plotting library:"; echo "$$bad"; exit 1; fi
	@# The harness depends on the machinery, never the other way: no package
	@# outside integration/, nor its tests, nor anything they link, imports a
	@# package under integration/. Prints each import that crosses into
	@# integration/ (not the imports inside it).
	@mod=$$(GOWORK=off $(GO) list -m) || exit 1; \
		pkgs=$$($(GO) list ./... | grep -Ev "^$$mod/integration(/|$$)") || exit 1; \
		edges=$$($(GO) list -deps -test -f '{{$$p := .ImportPath}}{{range .Imports}}{{$$p}} imports {{.}}{{"\n"}}{{end}}' $$pkgs) || exit 1; \
		bad=$$(grep -E " imports $$mod/integration(/|$$)" <<<"$$edges" | grep -Ev "^$$mod/integration(/| |$$)" | sort -u); \
		if [ -n "$$bad" ]; then echo "packages outside integration/ link packages under integration/:"; echo "$$bad"; exit 1; fi

# The Prometheus alerting rules (deploy/prometheus/aokeyd-rules.yml):
# promtool check rules, promtool test rules (a firing and a non-firing case
# for every rule; prints promtool's own SUCCESS), and promtool check metrics
# on a /metrics page served over HTTP with every series aokeyd exports.
# promtool comes from Debian's prometheus package, extracted into the cache.
rules:
	@set -o pipefail; pt=$$(bash integration/tools/promtool.sh) && \
		$$pt check rules deploy/prometheus/aokeyd-rules.yml && \
		(cd deploy/prometheus && $$pt test rules aokeyd-rules.test.yml) && \
		AOKEYD_PROMTOOL=$$pt $(GO) test -count=1 -run '^TestPromtoolCheckMetrics$$' -v ./internal/metrics/ | grep -E '^(--- |ok|FAIL)|promtool check metrics'

# aoctl peer-config's renderings, read by the targets' own validators:
# --for yang by Debian's yanglint (libyang2-tools) against RFC 8177's
# ietf-key-chain as the guest root's FRR package ships it (every feature
# on; RFC 9648's augment is checked against its tree by TestYANGSchemaPaths
# in test-unit), --for bird by BIRD 2.17's parser (bird -p, under chroot in
# the guest root), and both refuse the renderings without secrets at their
# placeholders (TestPlaceholderRefused). Needs the guest root (built or
# cached by build.sh, as test-kernel does).
renderings: deps
	@set -o pipefail; root=$$(bash integration/vm/build.sh rootfs | sed -n 's/^ROOTFS=//p') && [ -n "$$root" ] && \
		AOKEYD_YANGLINT=$$(command -v yanglint) AOKEYD_YANG_DIR=$$root/usr/share/yang AOKEYD_BIRD_ROOT=$$root \
		$(GO) test -count=1 -run '^(TestYANGLint|TestBIRDParse|TestPlaceholderRefused)$$' -v ./internal/peerconfig/ | grep -E '^(--- |ok|FAIL)|(yang|bird):'

# Every host package under the race detector (a data race fails the run).
test-unit:
	$(GO) test -race -count=1 -timeout 30m ./... ./integration/...

# Boots the bundled TCP-AO kernel and runs every kernel test inside it.
# The scenario tests (e2e, frr) mostly wait on BGP and rotation timers, not
# the CPU: four run side by side instead of GOMAXPROCS (the guest's 2 vCPUs),
# and e2e (GUEST_SIDE_BY_SIDE) runs in its own lane beside the other
# packages, which run one after another (each package's output is printed
# whole once it ended). Two lanes for two vCPUs: e2e and frr in lanes of
# their own beside the rest slowed every package (the guest's CPU is the
# limit once three lanes run). GUEST_SIDE_BY_SIDE= runs them all in turn.
GUEST_TEST_PARALLEL ?= 4
GUEST_SIDE_BY_SIDE ?= ./integration/e2e
test-kernel: deps
	AOKEYD_GUEST_BINS="$$(bash integration/tools/guest-bins.sh)" \
		AOKEYD_TEST_ARGS="$${AOKEYD_TEST_ARGS:--test.parallel=$(GUEST_TEST_PARALLEL)}" \
		AOKEYD_SIDE_BY_SIDE="$(GUEST_SIDE_BY_SIDE)" \
		bash integration/vm/run.sh $(KERNEL_PKGS)

# The differential test of the in-memory kernel against the guest's, longer
# than in make test (300 sequences): DIFFERENTIAL sequences of 30 operations;
# a new seed each run, or DIFFERENTIAL_SEED to replay one (each failure prints
# its seed and sequence). make test runs a fixed seed.
# Prints "differential: sequences=N ops=M diverged=0".
DIFFERENTIAL ?= 5000
DIFFERENTIAL_SEED ?= $(shell date +%s%N)
differential: deps
	AOKEYD_GUEST_ENV="AOKEYD_DIFFERENTIAL_SEQUENCES=$(DIFFERENTIAL) AOKEYD_DIFFERENTIAL_SEED=$(DIFFERENTIAL_SEED)" \
		AOKEYD_TEST_RUN='^TestDifferential$$' AOKEYD_VM_TIMEOUT=$$((600 + $(DIFFERENTIAL) / 2)) \
		AOKEYD_GUEST_BINS="$$(bash integration/tools/guest-bins.sh)" bash integration/vm/run.sh ./tcpao/tcpaotest/conformance

fuzz:
	bash integration/tools/fuzz.sh $(FUZZTIME)

# make test's fuzz run: every target, shorter (the key-source decoders 10s,
# the others 3s; make fuzz runs them for FUZZTIME and 10s).
fuzz-short:
	FUZZTIME_OTHER=3s bash integration/tools/fuzz.sh 10s

# The roll protocol's Promela model (rotator/model) checked by spin,
# exhaustively, and each seeded mutant (every one a property needs, none
# missing) shown to violate a property, two at a time: model.sh is their
# one runner (without spin it fails). Prints "model: states=N depth=D
# errors=0" and one "model: mutant=NAME errors=E" per mutant.
# make test reuses a passed check's result while its inputs are the same
# (MODEL_REUSE=1, model.sh says so in its first line); make model always
# checks.
MODEL_REUSE ?= 0
# At nice 10: in make test the field guest runs beside it, whose
# scenario waits on timers a starved emulated machine misses.
model: deps
	MODEL_REUSE=$(MODEL_REUSE) nice -n 10 bash integration/tools/model.sh

# Regenerates the spin random simulations that make test-unit replays
# against the real roll machine (rotator/testdata/model-traces.txt.gz).
model-traces:
	bash integration/tools/model-traces.sh

# make test: the field guest (make field) boots first and runs beside the
# rest, whose output comes first; its own is printed once both ended. Its
# scenario mostly waits on key lifetimes and BGP timers, so beside the
# host's unit tests, model and fuzzers and then the kernel tests' guest
# it costs the run a few minutes of CPU, not its 17 minutes of wall time
# (the two guests run side by side for part of it; memory allows: 2 GiB
# each). FIELD=0 leaves it out (a run that needs the host quiet).
FIELD ?= 1
# Run in this order, each timed ("make test: phases lint=Ns ..."); the
# first failing phase ends the run, as one make with these goals did.
# Vault (vault-real) is built, once per machine, in the background from
# the start (a cold build takes about 9 minutes, more beside the phases),
# in a session of its own so that a failed phase stops it: vault.sh's lock
# makes the phase wait for that build, and a built one is reused at once.
# VAULT=0 leaves Vault out: no build, no vault-real phase (a machine
# without room for its ~500 MB of modules and 139 MB binary; the run
# that measured make test's time on a fresh machine without Vault).
VAULT ?= 1
TEST_PHASES = lint rules test-unit model test-kernel vault-real renderings fuzz-short
RUN_PHASES = $(if $(filter 0,$(VAULT)),$(filter-out vault-real,$(TEST_PHASES)),$(TEST_PHASES))
test: deps
	@flog=$$(mktemp /tmp/aokeyd-field.XXXXXX.log); fpid=; \
	if [ "$(FIELD)" = 1 ]; then bash integration/field/run.sh >"$$flog" 2>&1 & fpid=$$!; fi; \
	vlog=$$(mktemp /tmp/aokeyd-vault-build.XXXXXX.log); vpid=; \
	if [ "$(VAULT)" != 0 ]; then setsid bash integration/tools/vault.sh >"$$vlog" 2>&1 & vpid=$$!; fi; \
	rc=0; took=; for t in $(RUN_PHASES); do s=$$(date +%s); \
		$(MAKE) --no-print-directory $$t MODEL_REUSE=1 || { rc=$$?; echo "make test: $$t failed after $$(($$(date +%s) - s))s"; break; }; \
		took="$$took $$t=$$(($$(date +%s) - s))s"; done; \
	echo "make test: phases$$took"; \
	if [ $$rc != 0 ] && [ -n "$$vpid" ] && kill -0 $$vpid 2>/dev/null; then kill -TERM -$$vpid 2>/dev/null; \
		echo "make test: stopped the Vault build (a phase failed; vault.sh keeps no partial binary)"; fi; \
	frc=0; if [ -n "$$fpid" ]; then \
		echo "make test: waiting for the field guest (integration/field)"; \
		s=$$(date +%s); wait $$fpid; frc=$$?; \
		echo "make test: waited $$(($$(date +%s) - s))s for the field guest"; \
		echo "=== the field guest (make field), run beside the rest:"; cat "$$flog"; \
		echo "make test: the field guest exit $$frc"; \
	fi; \
	[ -z "$$vpid" ] || wait $$vpid || [ $$rc != 0 ] || { echo "make test: the Vault build failed:"; cat "$$vlog"; }; \
	rm -f "$$flog" "$$vlog"; [ $$rc = 0 ] && [ $$frc = 0 ]

vm:
	bash integration/vm/build.sh all

# The field guest (integration/field, issue 48): Debian's own TCP-AO
# kernel with systemd, the .deb under its units beside Debian's BIRD 2,
# BIRD 3, FRR and gobgpd, the conformance table on that kernel, the
# operator's events, docs/operations.md's steps. Prints a "field:" line.
# make test runs it beside its other steps (see test).
field: deps
	bash integration/field/run.sh

bench: deps
	bash integration/tools/bench.sh

# The end-to-end soak for SOAK (default 10m): rotations back to back
# between gobgpd+aokeyd and BIRD; prints "soak: rotations=N flaps=N pkt_bad=N".
# (make test runs the same test for 1 minute.)
SOAK ?= 10m
soak: deps
	AOKEYD_GUEST_ENV="AOKEYD_SOAK=$(SOAK)" AOKEYD_TEST_RUN='^TestSoak$$' AOKEYD_VM_TIMEOUT=$$((30*60 + 600)) \
		AOKEYD_GUEST_BINS="$$(bash integration/tools/guest-bins.sh)" bash integration/vm/run.sh ./integration/e2e

# A peering LAN's /24 whose members hold consecutive addresses, all on
# TCP-MD5, each with its own chain and key IDs, moved to TCP-AO by one
# aoctl migrate --all (issue 52 item 4; integration/e2e TestMigrateDenseLAN,
# built with the denselan tag): alone in the guest, not in make test.
# Prints "migrate: far=bird sessions=200 reconnects=1 md5_left=0 ao_good=1
# unsigned_accepted=0".
migrate-lan: deps
	GOFLAGS="$$GOFLAGS -tags=denselan" AOKEYD_TEST_RUN='^TestMigrateDenseLAN$$' \
		AOKEYD_GUEST_BINS="$$(bash integration/tools/guest-bins.sh)" bash integration/vm/run.sh ./integration/e2e

# The fleet under chaos (integration/e2e TestChaos) for CHAOS (default 60m):
# eight routers, a seeded random fault schedule, the invariants checked
# throughout. Prints "chaos: minutes=M routers=R rotations=N faults=F
# flaps_unexplained=0 stranded=0 revoked_left=0 seed=S"; CHAOS_SEED=S
# replays a run's schedule, CHAOS_KINDS=k1,k2 draws only those faults.
# make test runs it for 1 minute (without clock steps: it shares the
# guest with other scenarios there). chaos-mutant is the checker's own
# proof: a deliberately broken aokeyd (revokes skip the listener) must fail
# the run on revoked-left.
CHAOS ?= 60m
chaos: deps
	CHAOS=$(CHAOS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_KINDS=$(CHAOS_KINDS) bash integration/tools/chaos.sh

chaos-mutant: deps
	CHAOS_SEED=$(CHAOS_SEED) bash integration/tools/chaos.sh mutant

# SPEAKER=frr: router A is FRR's bgpd instead of gobgpd.
SPEAKER ?= gobgp
demo: deps
	SPEAKER=$(SPEAKER) bash integration/tools/demo.sh

clean:
	rm -rf bin

# The tests against a real HashiCorp Vault (built once per machine by
# integration/tools/vault.sh; a test dependency only, never shipped: Vault
# is BUSL-1.1). Prints the vault-real: proof line; see
# integration/tools/vault-real.sh.
vault-real:
	GO=$(GO) bash integration/tools/vault-real.sh
