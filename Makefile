GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
PKGS    := ./...

.PHONY: all build run test vet fuzz bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/lakegate ./cmd/lakegate

# Runs the server on the embedded demo database with MCP on; prints tokens
# and the `claude mcp add` line.
run: build
	LAKEGATE_MCP_ENABLED=true ./bin/lakegate serve

vet:
	$(GO) vet $(PKGS)

# Unit and integration tests with the race detector and per-package
# coverage. Uses LAKEGATE_TEST_DATABASE_URL, or a throwaway PostgreSQL made
# from the server binaries on this machine.
test: vet
	bash integration/with-postgres.sh $(GO) test -race -count=1 -timeout 15m -coverpkg=./... -coverprofile=coverage.out $(PKGS)
	@awk -f integration/cover.awk coverage.out

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCheck -fuzztime 60s ./query/validate/

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

clean:
	rm -rf bin
