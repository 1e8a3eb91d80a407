# The course's commands. The two that matter, from a fresh clone:
#   make tutorial   create .venv, install requirements.txt, build and run every chapter's demo
#   make test       every chapter's tests and notebooks (what CI runs)
# And: make doctor (diagnose the build environment), make gpu-check and gpu-bench (on a GPU),
# make check EX=ch3/gelu (grade an exercise), make docs (the course as a website), make lint,
# make clean. `make help` lists them.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
# PY=python3 runs everything with an existing interpreter instead of .venv (the GPU machine,
# whose python3 already has torch and has no internet to install one).
PY ?= $(VENV_PY)
ifeq ($(PY),$(VENV_PY))
ENV_READY := $(VENV)/.installed
# As if the venv were activated: torch runs `ninja` from PATH, and the pinned one is in .venv/bin.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
endif

CLANG_FORMAT ?= $(if $(wildcard $(VENV)/bin/clang-format),$(VENV)/bin/clang-format,clang-format)

CHAPTERS := $(sort $(wildcard chapter*_*))
DEMOS := $(wildcard $(addsuffix /demo.py,$(CHAPTERS)))

# JIT builds go to build/torch_extensions (one folder per torch version, see chapter 1), where
# a learner can look at them and `make clean` removes them.
export TORCH_EXTENSIONS_DIR ?= $(CURDIR)/build/torch_extensions

# CUDA build settings for machines without a GPU (CI, laptops), where torch cannot guess them.
# nvcc is rarely on PATH after a toolkit install; torch finds it through CUDA_HOME.
ifeq ($(origin CUDA_HOME),undefined)
ifneq ($(wildcard /usr/local/cuda/bin/nvcc),)
export CUDA_HOME := /usr/local/cuda
endif
endif
# With no GPU to ask, torch fails with an IndexError choosing the architecture: compile for
# the course's GPU, the H100 (compute capability 9.0). On a GPU machine torch asks the GPU.
ifeq ($(origin TORCH_CUDA_ARCH_LIST),undefined)
ifeq ($(shell nvidia-smi -L 2>/dev/null),)
export TORCH_CUDA_ARCH_LIST := 9.0
endif
endif
# Without a GPU, Triton's kernels run only in its interpreter (chapter 5's test_triton.py), which
# must be chosen before anything imports triton; in one pytest session torch.compile's tests do
# that long before the Triton file's turn. CPU torch.compile does not use Triton, so nothing else
# changes.
ifeq ($(origin TRITON_INTERPRET),undefined)
ifeq ($(shell nvidia-smi -L 2>/dev/null),)
export TRITON_INTERPRET := 1
endif
endif
# torch.compile on the CPU (inductor) first asks, in every new process, which vector instruction
# sets the compiler can build: it compiles a test file per set and loads each in a new Python that
# imports torch, about 7 s on 2 cores. make test starts dozens of processes that compile; this
# trusts the CPU's own flags (/proc/cpuinfo) instead. Unset it (make ... TORCHINDUCTOR_VEC_ISA_OK=)
# if a compile ever fails for an instruction set your compiler lacks.
export TORCHINDUCTOR_VEC_ISA_OK ?= 1
# A toolkit with only nvcc lacks the cuBLAS/cuSPARSE headers that ATen/cuda/CUDAContext.h
# includes; torch's pip wheels bring them in .venv's site-packages/nvidia/cu13/include. This is
# for your own builds in a shell that ran make before: in a fresh clone make cannot see the .venv
# it creates during the same run, so the chapters' loaders find the folder themselves.
ifdef ENV_READY
ifeq ($(wildcard $(CUDA_HOME)/include/cusparse.h),)
NVIDIA_INCLUDE = $(abspath $(firstword $(wildcard $(VENV)/lib/python3*/site-packages/nvidia/cu13/include)))
CPATH_FROM_ENV := $(CPATH)
export CPATH = $(subst $(eval) ,:,$(strip $(NVIDIA_INCLUDE) $(CPATH_FROM_ENV)))
endif
endif

# A $CXX that links libstdc++ statically (the course's GPU image) builds extensions that crash
# when they load. As make gpu-check does, tutorial and test then take the doctor's fix for their
# run, CXX=c++, and say so. (A shell snippet: each recipe line that builds starts with it.)
TAKE_CXX_FIX = if [ -n "$${CXX:-}" ] && [ "$$CXX" != c++ ] && \
	  [ "$$($(PY) tools/doctor.py --cxx-fix)" = c++ ]; then \
	  echo "make: \$$CXX=$$CXX links libstdc++ statically (see make doctor): this run uses CXX=c++"; \
	  export CXX=c++; fi

.PHONY: help tutorial test doctor gpu-check gpu-bench check docs lint clean stable-check stable-matrix

help:
	@echo "make tutorial   set up .venv, then build and run every chapter's demo"
	@echo "make test       run every test and notebook (CI runs this)"
	@echo "make doctor     check python, torch, nvcc, CUDA_HOME, ninja, compiler, GPU, arch list"
	@echo "make gpu-check  on a GPU machine: build, every test, compute-sanitizer"
	@echo "make gpu-bench  on a GPU machine: every chapter's benchmark and profile"
	@echo "make check EX=ch3/gelu   grade your exercise (EX=ch3: all of chapter 3's; SOLUTION=1: the reference solution)"
	@echo "make docs       serve the course as a website on http://127.0.0.1:8000 (mkdocs)"
	@echo "make lint       ruff (Python) and clang-format (C++/CUDA) in check mode"
	@echo "make stable-check   chapter 5's stable-ABI wheel: ABI audit, then run on a newer torch"
	@echo "make stable-matrix  that wheel on every newer torch minor, one line each (GBs of venvs)"
	@echo "make clean      remove builds and caches (keeps .venv)"

$(VENV)/.installed: requirements.txt
	@test -x $(VENV_PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing requirements.txt into $(VENV) (first time: torch is a few GB, minutes)"
	$(VENV_PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	@touch $@

# On a machine without a GPU no demo runs CUDA code, so the tutorial compiles none (USE_CUDA=0:
# the chapters' loaders and chapter 5's setup.py build their CPU-only variants); nvcc would be
# most of its time. make test compiles the CUDA code too, as CI must.
tutorial: $(ENV_READY)
	@$(TAKE_CXX_FIX); \
	if [ -z "$${USE_CUDA:-}" ] && ! $(PY) -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then \
	  echo "make tutorial: no GPU here, so it builds the CPU code only (USE_CUDA=0); make test compiles the CUDA code too"; \
	  export USE_CUDA=0; fi; \
	$(PY) tools/build_all.py && for demo in $(DEMOS); do \
	  echo; echo "======== $$demo ========"; \
	  $(PY) $$demo; \
	done
	@echo; echo "Tutorial done. Next: read chapter1_cpp_to_python/README.md and open its notebook."

# Every extension is built first (tools/build_all.py: side by side, with progress), so that no
# test waits on a build in silence and none builds what another built. Then the tests run over
# one pytest-xdist worker per core (the slow ones first, conftest.py; tests marked xdist_group
# share a worker), each worker with its share of torch's CPU threads and one torch.compile
# compiler process: left alone, every worker would start one of each per core.
# PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 1)
test: $(ENV_READY)
	@$(TAKE_CXX_FIX); $(PY) tools/build_all.py && \
	  share=$$(( $(PYTEST_WORKERS) > 1 ? $$(nproc) / $(PYTEST_WORKERS) : $$(nproc) )) && \
	  OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$$(( share > 0 ? share : 1 ))} \
	  TORCHINDUCTOR_COMPILE_THREADS=$${TORCHINDUCTOR_COMPILE_THREADS:-1} \
	  $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --nbmake --nbmake-timeout=600 \
	  tests $(CHAPTERS) $(PYTEST_ARGS)

doctor: $(ENV_READY)
	@$(PY) tools/doctor.py

gpu-check: $(ENV_READY)
	MAX_JOBS=$${MAX_JOBS:-16} $(PY) tools/gpu_check.py --skip-benchmarks $(GPU_CHECK_ARGS)

# The benchmarks on their own: each chapter's benchmark.py and Nsight Compute profile.
gpu-bench: $(ENV_READY)
	MAX_JOBS=$${MAX_JOBS:-16} $(PY) tools/gpu_check.py --only-benchmarks $(GPU_CHECK_ARGS)

# Chapter 5's stable-ABI package (chapter5_extensions/stable): build it, audit the .so's imported
# symbols (and a fixture the audit must reject), then build its wheel against this torch and run its
# tests with a newer torch in a second venv (build/, reused). `make test` runs the same checks
# as tests of test_stable.py; this is the same on its own, with the output shown.
stable-check: $(ENV_READY)
	$(PY) chapter5_extensions/stable/build_stable.py
	$(PY) chapter5_extensions/stable/abi_audit.py --fixture chapter5_extensions/stable/custom_ops_stable/_C.abi3.so
	$(PY) chapter5_extensions/stable/check_wheel.py

# The same wheel on every torch minor after the one it was built with, one venv each (a few GB
# apiece, kept in chapter5_extensions/stable/build/), one line each in the record.
STABLE_MATRIX ?= torch==2.12.1 torch==2.13.0+cpu torch==2.14.1 torch==2.15.0
stable-matrix: $(ENV_READY)
	$(PY) chapter5_extensions/stable/check_wheel.py --matrix $(STABLE_MATRIX) \
	  --record docs/perf/cpu/check_wheel_matrix.txt

# An exercise: build the learner's file, run its checks (and on a GPU its benchmark), print a
# verdict per check. Without EX, lists the exercises (and succeeds). The checker's exit status:
# 0 passed, 1 a check failed, 2 the build failed, 3 not graded on this machine (a CUDA exercise
# without a GPU: the CPU checks passed, the kernel did not run), 4 no such exercise. make names it
# in its "Error N" line and, as for any failed command, exits 2 itself: only 0 is a pass.
check: $(ENV_READY)
ifeq ($(strip $(EX)),)
	@echo "usage: make check EX=ch3/gelu [SOLUTION=1] (EX=ch3: every chapter 3 exercise); the exercises:"
	@$(PY) tools/check_exercise.py --list
else
	@$(TAKE_CXX_FIX); $(PY) tools/check_exercise.py $(EX) $(if $(SOLUTION),--solution)
endif

# The website: the lessons and their code, as mkdocs.yml and tools/docs_hooks.py put them
# together. It rebuilds when a lesson or a source file changes. `make test` builds it --strict.
docs: $(ENV_READY)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

lint: $(ENV_READY)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	@# The tracked sources; in a copy without git (the website's zip), every source outside the
	@# venv and the builds, so that clang-format never waits on stdin for want of a file name.
	$(CLANG_FORMAT) --dry-run --Werror $$(git ls-files '*.cpp' '*.cu' '*.cuh' '*.h' 2>/dev/null || \
	  find . \( -path ./.venv -o -path ./build -o -path '*/build' \) -prune -o \
	  \( -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) -print)

clean:
	rm -rf build $(addsuffix /build,$(CHAPTERS)) $(addsuffix /*.egg-info,$(CHAPTERS))
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print | xargs rm -rf
	rm -rf .pytest_cache .ruff_cache
	rm -f chapter5_extensions/custom_ops/*.so chapter5_extensions/compile_commands.json
	rm -rf chapter5_extensions/stable/build chapter5_extensions/stable/*.egg-info chapter5_extensions/stable/custom_ops_stable/*.so

# `make print-env`: the build variables this Makefile exports (a debugging aid for the doctor).
.PHONY: print-env
print-env:
	@echo "CUDA_HOME=$${CUDA_HOME-}"; echo "TORCH_CUDA_ARCH_LIST=$${TORCH_CUDA_ARCH_LIST-}"
	@echo "CPATH=$${CPATH-}"; echo "TORCH_EXTENSIONS_DIR=$${TORCH_EXTENSIONS_DIR-}"
