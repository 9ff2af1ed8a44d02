# Developer targets. `make build` installs in editable mode into the active environment.
PYTHON ?= python3
ARCHS ?= 80;90

.PHONY: help build test test-gpu bench format lint clean

C_SOURCES = $(wildcard csrc/*.c csrc/*/*.c csrc/*/*.h kernels/*/*.cu kernels/*/*.cuh kernels/*/*.h)
# Reformatted with the tracing work that owns them (they are being edited on another branch).
C_FORMATTED = $(C_SOURCES)

help:
	@echo "build     editable install (GPUPROFILE_CUDA_ARCHS=$(ARCHS))"
	@echo "test      pytest (GPU tests skipped without a device)"
	@echo "test-gpu  only the GPU tests (pytest -m gpu)"
	@echo "bench     every benchmark in benchmarks/ (needs a GPU; see docs/benchmarks.md)"
	@echo "format    clang-format and ruff format"
	@echo "lint      ruff check and clang-format --dry-run"

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
	$(PYTHON) benchmarks/bench_metrics.py --output bench_metrics.json
	$(PYTHON) benchmarks/check_attention.py --output attention_check.json --sweep attention_sweep.json --plots plots/

format:
	clang-format -i $(C_FORMATTED)
	$(PYTHON) -m ruff format gpuprofile tests benchmarks

lint:
	$(PYTHON) -m ruff check gpuprofile tests benchmarks
	clang-format --dry-run --Werror $(C_FORMATTED)

clean:
	rm -rf build *.egg-info gpuprofile/_C*.so
