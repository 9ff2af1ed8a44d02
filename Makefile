# Developer targets. `make build` installs in editable mode into the active environment.
PYTHON ?= python3
ARCHS ?= 80;90

.PHONY: help build test test-gpu bench format lint clean

help:
	@echo "build     editable install (GPUPROFILE_CUDA_ARCHS=$(ARCHS))"
	@echo "test      pytest (GPU tests skipped without a device)"
	@echo "test-gpu  only the GPU tests (pytest -m gpu)"
	@echo "bench     benchmarks/bench_overhead.py (needs a GPU)"
	@echo "format    clang-format and ruff format"
	@echo "lint      ruff check and clang-format --dry-run"

build:
	GPUPROFILE_CUDA_ARCHS="$(ARCHS)" $(PYTHON) -m pip install --no-build-isolation -e .

test:
	$(PYTHON) -m pytest

test-gpu:
	$(PYTHON) -m pytest -m gpu

bench:
	$(PYTHON) benchmarks/bench_overhead.py

format:
	clang-format -i csrc/*.c csrc/*.h kernels/*.cu kernels/*.h
	$(PYTHON) -m ruff format gpuprofile tests benchmarks

lint:
	$(PYTHON) -m ruff check gpuprofile tests benchmarks
	clang-format --dry-run --Werror csrc/*.c csrc/*.h kernels/*.cu kernels/*.h

clean:
	rm -rf build *.egg-info gpuprofile/_C*.so
