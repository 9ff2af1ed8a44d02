# Developer targets. `make build` installs in editable mode into the active environment.
PYTHON ?= python3
ARCHS ?= 80;90

.PHONY: help build test test-gpu bench format lint clean sanitize fuzz leaks reliability-gpu \
        compute-sanitizer test-pythons test-sdist wheel test-wheel sass-diff

C_SOURCES = $(wildcard csrc/*.c csrc/*/*.c csrc/*/*.h kernels/*/*.cu kernels/*/*.cuh kernels/*/*.h \
            kernels/*/*/*.cu kernels/*/*/*.cuh kernels/*/*/*.h)
C_FORMATTED = $(C_SOURCES)

help:
	@echo "build     editable install (GPUPROFILE_CUDA_ARCHS=$(ARCHS))"
	@echo "test      pytest (GPU tests skipped without a device)"
	@echo "test-gpu  only the GPU tests (pytest -m gpu)"
	@echo "bench     every benchmark in benchmarks/ (needs a GPU; see docs/benchmarks.md)"
	@echo "format    clang-format and ruff format"
	@echo "lint      ruff check and clang-format --dry-run"
	@echo "sanitize  the CPU suite against an ASan + UBSan build (tools/sanitize.sh; CI runs it)"
	@echo "test-pythons  the CPU suite on Python 3.10-3.13, -Werror builds (tools/test_pythons.sh; CI runs it)"
	@echo "test-sdist  the sdist built, installed in a fresh venv, its tests run there (tools/test_sdist.sh; CI)"
	@echo "wheel     manylinux_2_28 wheel(s) into dist/ (tools/build_wheel.sh [pythons]; CI)"
	@echo "test-wheel  the dist/ wheel in a fresh venv, the tests against it (tools/test_wheel.sh; CI)"
	@echo "fuzz      the fuzz tests (marker fuzz) with a long budget: FUZZ_PROFILE=long"
	@echo "leaks     the leak tests (marker leak; with a device, the GPU ones too)"
	@echo "reliability-gpu  on a GPU machine: leaks, fuzz, threads, Ctrl-C, then compute-sanitizer"
	@echo "compute-sanitizer  memcheck/racecheck/synccheck over the kernel tests (needs a GPU)"
	@echo "sass-diff  the SASS of every kernel of this tree against BASE (default main; tools/sass_diff.sh)"

build:
	GPUPROFILE_CUDA_ARCHS="$(ARCHS)" $(PYTHON) -m pip install --no-build-isolation -e .

test:
	$(PYTHON) -m pytest

test-gpu:
	$(PYTHON) -m pytest -m gpu

bench:
	$(PYTHON) benchmarks/bench_overhead.py --json overhead.json
	$(PYTHON) benchmarks/bench_accuracy.py --out bench_accuracy.json
	$(PYTHON) benchmarks/bench_tracing.py --output bench_tracing.json
	$(PYTHON) benchmarks/bench_pylines.py --output bench_pylines.json
	$(PYTHON) benchmarks/bench_training.py --output bench_training.json
	$(PYTHON) benchmarks/bench_metrics.py --output bench_metrics.json
	$(PYTHON) benchmarks/bench_gate_flags.py --output gate_flags.json
	$(PYTHON) benchmarks/check_attention.py --output attention_check.json --sweep attention_sweep.json --plots plots/

format:
	clang-format -i $(C_FORMATTED)
	$(PYTHON) -m ruff format gpuprofile tests benchmarks

lint:
	$(PYTHON) -m ruff check gpuprofile tests benchmarks
	clang-format --dry-run --Werror $(C_FORMATTED)

clean:
	rm -rf build *.egg-info gpuprofile/_C*.so

# Reliability (issue 13): docs/benchmarks.md records what these found.
FUZZ_PROFILE ?= long

sanitize:
	PYTHON=$(PYTHON) tools/sanitize.sh

test-pythons:
	tools/test_pythons.sh

test-sdist:
	PYTHON=$(PYTHON) tools/test_sdist.sh

wheel:
	tools/build_wheel.sh $(PYTHON)

test-wheel:
	PYTHON=$(PYTHON) tools/test_wheel.sh

fuzz:
	GPUPROFILE_FUZZ=$(FUZZ_PROFILE) $(PYTHON) -m pytest -q -p no:cacheprovider -m fuzz \
		--hypothesis-show-statistics

leaks:
	$(PYTHON) -m pytest -q -m leak

reliability-gpu:
	$(PYTHON) -m pytest -q -m "leak or fuzz" tests
	$(PYTHON) -m pytest -q tests/test_leaks_gpu.py tests/test_interrupt_gpu.py \
		tests/regions/test_regions_threads.py tests/kernels/test_harness_kernels_gpu.py
	PYTHON=$(PYTHON) tools/compute_sanitizer.sh

compute-sanitizer:
	PYTHON=$(PYTHON) tools/compute_sanitizer.sh

BASE ?= main
sass-diff:
	tools/sass_diff.sh $(BASE) WORKTREE
