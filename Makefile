# microaot: `make demo` sets everything up and runs the demo; `make test` runs the test suite;
# `make docs` builds the user guide into site/.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
APT_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc gcc make cmake chromium cppcheck
JOBS ?= 2

.PHONY: setup demo test test-fast fuzz fuzz-diff board-matrix docs clean
FUZZ_SECONDS ?= 600

setup:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	$(PIP) install -q -e ".[test,docs]"

demo: setup
	$(PYTHON) -m aot demo

# the suite spawns many `python3 -m aot` processes: with bytecode caching off (PYTHONDONTWRITEBYTECODE)
# each one compiles the package again, so the tests turn it back on
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE

test: setup
	$(TEST_ENV) $(PYTHON) -m pytest -n $(JOBS) --dist worksteal -q --durations=30 tests

test-fast:
	$(TEST_ENV) $(PYTHON) -m pytest -n $(JOBS) --dist worksteal -q -m "not slow" tests

fuzz: setup
	$(PYTHON) tools/fuzz.py --seconds $(FUZZ_SECONDS) --jobs $(JOBS)

fuzz-diff: setup
	$(PYTHON) -m aot.fuzz.campaign --seconds $(FUZZ_SECONDS) --jobs $$(nproc)

# every model of ../shared on every emulated board, C and LLVM, each run in QEMU against the host build
board-matrix: setup
	$(PYTHON) -m aot.tools.matrix ../shared/models ../shared/tflm-models --jobs $(JOBS)

docs: setup
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --site-dir site

clean:
	rm -rf build dist *.egg-info .pytest_cache out site
