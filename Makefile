GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
PKGS    := ./...
IMAGE   ?= localhost/lakegate:$(VERSION)

.PHONY: all build run cluster image test test-deploy vet js-deps fuzz bench chaos clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/lakegate ./cmd/lakegate

# Runs the server on the embedded demo database with MCP on; prints tokens
# and the `claude mcp add` lines. exec: the server replaces the shell, so
# the SIGTERM make passes on reaches it (and frees the port).
run: build
	LAKEGATE_MCP_ENABLED=true exec ./bin/lakegate serve

# Three replicas behind haproxy on 127.0.0.1:32049 (or the next free port),
# sharing state through a throwaway PostgreSQL primary that holds the iot
# data set (1M readings) and reading from its hot standby, all on loopback
# under a temporary directory. Prints tokens and the `claude mcp add` lines;
# Ctrl-C or SIGTERM stops it all. Needs haproxy and the PostgreSQL server
# binaries. exec: the script receives the SIGTERM make passes on.
cluster:
	exec bash integration/cluster.sh

# The container image (deploy/Containerfile, FROM scratch): the static
# binary, a non-root user and the CA certificates, built with podman (or
# docker with a running engine) as $(IMAGE).
image:
	GO=$(GO) bash deploy/image.sh $(IMAGE) $(VERSION)

# Both builds: the production one and the one with the MCP conformance
# fixtures (mcp/conformance.go, behind the conformance build tag).
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags conformance $(PKGS)

# Unit and integration tests with the race detector and per-package
# coverage. Uses LAKEGATE_TEST_DATABASE_URL, or a throwaway PostgreSQL made
# from the server binaries on this machine. The conformance tag adds the
# unit tests of the MCP conformance fixtures; the binaries the integration
# tests build choose their own tags (the conformance suite's has the
# fixtures, the others are production builds).
test: vet js-deps
	bash integration/with-postgres.sh $(GO) test -tags conformance -race -count=1 -timeout 15m -coverpkg=./... -coverprofile=coverage.out $(PKGS)
	@awk -f integration/cover.awk coverage.out
	@$(MAKE) --no-print-directory test-deploy

# helm for the chart's tests, built once from the Go module proxy into
# GOPATH (about 3 minutes of CPU the first time; then it is there).
HELM_VERSION := v3.19.0
HELM = $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/pkg/lakegate-tools/helm-$(HELM_VERSION)/helm

$(HELM):
	GOBIN=$(dir $(HELM)) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# The deployment files' tests (deploy/, a Go module of its own): the image
# (built here with make image; its binary, run from the unpacked image,
# answers /ready on a throwaway PostgreSQL), the Helm chart (helm lint,
# helm template, every manifest decoded strictly into the Kubernetes API
# types), the compose file and the systemd unit (systemd-analyze). Without
# podman or a docker engine the image tests skip.
test-deploy: $(HELM)
	@if command -v podman >/dev/null 2>&1 || docker info >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory image IMAGE=localhost/lakegate:test; \
	else echo "make: neither podman nor a docker engine: the image tests will be skipped" >&2; fi
	cd deploy && $(GO) vet ./... && LAKEGATE_TEST_IMAGE=localhost/lakegate:test LAKEGATE_TEST_HELM=$(HELM) \
		bash ../integration/with-postgres.sh $(GO) test -count=1 -timeout 10m ./...

# The pinned Node MCP clients the integration tests drive (TypeScript SDK,
# MCP Inspector, conformance suite, Node 22), installed fresh into
# integration/js/node_modules. Without npm those tests skip. The dev
# dependencies (DBHub, which make bench measures beside lakegate) are left
# out: make bench installs them.
js-deps:
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix integration/js --omit=dev --no-audit --no-fund --loglevel=error; \
	else echo "make: npm not found: the Node MCP client tests will be skipped" >&2; fi

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCheck -fuzztime 60s ./query/validate/
	$(GO) test -run '^$$' -fuzz FuzzLongCell -fuzztime 60s ./query/
	$(GO) test -run '^$$' -fuzz FuzzArray -fuzztime 60s ./query/
	$(GO) test -run '^$$' -fuzz FuzzCursorPage -fuzztime 60s ./query/
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime 60s ./query/sqlbuild/
	$(GO) test -run '^$$' -fuzz FuzzBuildShape -fuzztime 60s ./query/sqlbuild/
	$(GO) test -run '^$$' -fuzz FuzzDecodeMessage -fuzztime 60s ./mcp/internal/transport/
	$(GO) test -run '^$$' -fuzz FuzzRestoreIDs -fuzztime 60s ./mcp/internal/transport/
	$(GO) test -run '^$$' -fuzz FuzzTakeCall -fuzztime 60s ./mcp/internal/transport/

bench:
	bash integration/with-postgres.sh bash integration/bench.sh $(GO)

# Attacks on the real server and a throwaway PostgreSQL, one line each (not part of test; under a minute).
chaos:
	bash integration/with-postgres.sh bash integration/chaos.sh $(GO)

clean:
	rm -rf bin
