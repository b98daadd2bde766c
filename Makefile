# kbroker: `make up` starts a local 3-broker cluster, `make test` runs the test suite, `make down` stops it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DATA   ?= .kbroker

.PHONY: up down status test system-deps test-system-deps pipeline

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $@

# Debian packages, installed only when missing (root, or sudo): ZooKeeper and kcat for the cluster; for the
# tests also iproute2 and iptables (the network-partition tests make namespaces and drop traffic in them) and
# the JDK's keytool (the TLS tests make their Java key stores with it; ZooKeeper's JRE usually brings it); Debian's
# chromium (the console's browser tests drive it headless).
APT_INSTALL = SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq

system-deps:
	@missing=""; \
	dpkg -s zookeeper >/dev/null 2>&1 || missing="$$missing zookeeper"; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; $(APT_INSTALL) $$missing >/dev/null; fi

test-system-deps: system-deps
	@missing=""; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	command -v keytool >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; $(APT_INSTALL) $$missing >/dev/null; fi

up: $(VENV)/.installed system-deps
	$(VENV)/bin/kbroker cluster up --brokers 3 --data-dir $(DATA)

down:
	@test -x $(VENV)/bin/kbroker && $(VENV)/bin/kbroker cluster down --data-dir $(DATA) || true

status: $(VENV)/.installed
	$(VENV)/bin/kbroker cluster status --data-dir $(DATA)

# The suite runs in TEST_WORKERS processes (pytest-xdist): most of its time is spent waiting on brokers and
# ZooKeeper, not computing. A module stays on one worker; TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test test-system-deps
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS)

# examples/pipeline.py against `make up`'s cluster (needs the Spark extra, installed with the test extras)
pipeline: $(VENV)/.installed-test
	$(PY) examples/pipeline.py
