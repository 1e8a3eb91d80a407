"""Tests for tools/doctor.py (`make doctor`): each broken environment a learner meets, simulated
on a healthy fake one, must give the right error or warning; the report and collect() run here.

    python -m pytest tests/test_doctor.py -q
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import torch

DOCTOR_PATH = Path(__file__).resolve().parents[1] / "tools" / "doctor.py"


def load_doctor():
    # tools/ is not a package. The module goes into sys.modules before it runs, because
    # @dataclass looks its own module up there.
    spec = importlib.util.spec_from_file_location("doctor", DOCTOR_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["doctor"] = module
    spec.loader.exec_module(module)
    return module


doctor = load_doctor()
PIP_INCLUDE = "/venv/lib/python3.11/site-packages/nvidia/cu13/include"


@pytest.fixture
def healthy():
    """The course's GPU machine as it should be: every rule of diagnose() satisfied."""
    return doctor.Environment(
        python_version="3.11.7",
        python_executable="/venv/bin/python",
        torch_version="2.11.0+cu130",
        torch_cuda="13.0",
        cxx11_abi=True,
        cuda_home_env="/usr/local/cuda",
        cuda_home_resolved="/usr/local/cuda",
        cuda_runtime_header=True,
        nvcc_path="/usr/local/cuda/bin/nvcc",
        nvcc_version="13.0",
        ninja_version="1.11.1",
        compiler="/usr/bin/c++",
        compiler_version="c++ (Debian 12.2.0-14+deb12u1) 12.2.0",
        compiler_links_shared_libstdcxx=True,
        gpus=(("NVIDIA H100 80GB HBM3", (9, 0)),),
        arch_list_env="9.0",
        torch_arch_list=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
        max_jobs=None,
        cpu_count=16,
        cusparse_header="/usr/local/cuda/include/cusparse.h",
        pip_cuda_include=PIP_INCLUDE,
        extensions_root="/course/build/torch_extensions",
        build_tag="torch2.11.0_cu130-py311",
        other_builds=(),
        lock_files=(),
    )


def errors(env) -> list:
    return [p for p in doctor.diagnose(env) if p.severity == "error"]


def warnings(env) -> list:
    return [p for p in doctor.diagnose(env) if p.severity == "warning"]


def test_healthy_environment_has_no_problems(healthy):
    assert doctor.diagnose(healthy) == []


def test_nvcc_major_mismatch_is_an_error_naming_both_versions(healthy):
    (problem,) = errors(dataclasses.replace(healthy, nvcc_version="12.4"))
    assert "12.4" in problem.what
    assert "13.0" in problem.what
    assert "13.0" in problem.fix


def test_nvcc_minor_mismatch_is_only_a_warning(healthy):
    env = dataclasses.replace(healthy, nvcc_version="13.1")
    assert errors(env) == []
    (problem,) = warnings(env)
    assert "13.1" in problem.what


def test_missing_nvcc_is_an_error_with_the_cuda_home_fix(healthy):
    env = dataclasses.replace(healthy, nvcc_path=None, nvcc_version=None)
    (problem,) = errors(env)
    assert "nvcc" in problem.what
    assert "export CUDA_HOME=" in problem.fix


def test_unset_cuda_home_with_nvcc_found_is_a_warning(healthy):
    env = dataclasses.replace(healthy, cuda_home_env=None)
    assert errors(env) == []
    (problem,) = warnings(env)
    assert "CUDA_HOME" in problem.what


def test_cuda_home_guessed_outside_the_toolkit_is_an_error(healthy):
    # nvcc on PATH as /usr/local/bin/nvcc (a wrapper) makes torch guess CUDA_HOME=/usr/local.
    env = dataclasses.replace(
        healthy,
        cuda_home_env=None,
        cuda_home_resolved="/usr/local",
        cuda_runtime_header=False,
        nvcc_path="/usr/local/bin/nvcc",
    )
    (problem,) = errors(env)
    assert "-lcudart" in problem.what


def test_no_gpu_without_arch_list_is_the_index_error(healthy):
    env = dataclasses.replace(healthy, gpus=(), arch_list_env=None)
    (problem,) = errors(env)
    assert "TORCH_CUDA_ARCH_LIST" in problem.what
    assert "IndexError" in problem.what
    assert "TORCH_CUDA_ARCH_LIST=9.0" in problem.fix


def test_no_gpu_with_arch_list_native_is_the_index_error_too(healthy):
    (problem,) = errors(dataclasses.replace(healthy, gpus=(), arch_list_env="native"))
    assert "IndexError" in problem.what


def test_no_gpu_with_arch_list_set_is_fine(healthy):
    assert doctor.diagnose(dataclasses.replace(healthy, gpus=(), arch_list_env="9.0")) == []


def test_arch_list_without_the_gpus_capability_means_no_kernel_image(healthy):
    (problem,) = errors(dataclasses.replace(healthy, arch_list_env="8.0;8.6"))
    assert "no kernel image" in problem.what
    assert "TORCH_CUDA_ARCH_LIST=9.0" in problem.fix


@pytest.mark.parametrize("arch_list", ["8.0 9.0+PTX", "9.0a", "8.0; 9.0", "Hopper", "native"])
def test_arch_list_with_the_gpus_capability_in_any_spelling_is_fine(healthy, arch_list):
    assert doctor.diagnose(dataclasses.replace(healthy, arch_list_env=arch_list)) == []


def test_arch_list_reaching_the_gpu_only_through_ptx_is_a_warning(healthy):
    env = dataclasses.replace(healthy, arch_list_env="8.0+PTX")
    assert errors(env) == []
    (problem,) = warnings(env)
    assert "PTX" in problem.what


def test_arch_specific_code_runs_only_on_that_exact_capability():
    assert doctor.arch_coverage("8.0", (8, 6)) == "sass"
    assert doctor.arch_coverage("9.0a", (9, 0)) == "sass"
    assert doctor.arch_coverage("9.0a", (10, 0)) == "none"
    assert doctor.arch_coverage("9.0", (8, 0)) == "none"


def test_arch_list_torch_cannot_read_is_an_error(healthy):
    (problem,) = errors(dataclasses.replace(healthy, arch_list_env="9.0,8.0"))
    assert "Unknown CUDA arch" in problem.what


def test_missing_ninja_is_an_error(healthy):
    (problem,) = errors(dataclasses.replace(healthy, ninja_version=None))
    assert "ninja" in problem.what
    assert "pip install ninja" in problem.fix


def test_compiler_that_links_libstdcxx_statically_is_an_error(healthy):
    (problem,) = errors(dataclasses.replace(healthy, compiler_links_shared_libstdcxx=False))
    assert "libstdc++" in problem.what and "Segmentation fault" in problem.what
    assert "CXX=c++" in problem.fix


def test_unchecked_libstdcxx_linkage_is_no_problem(healthy):
    assert doctor.diagnose(dataclasses.replace(healthy, compiler_links_shared_libstdcxx=None)) == []


def test_this_machines_compiler_links_libstdcxx_as_a_shared_library():
    # What the probe says about the compiler CI uses; the GPU machine's $CXX failed this once.
    assert doctor._links_shared_libstdcxx(shutil.which("c++")) in (True, None)


def test_missing_compiler_is_an_error(healthy):
    (problem,) = errors(dataclasses.replace(healthy, compiler=None, compiler_version=None))
    assert "compiler" in problem.what


def test_cpu_only_torch_skips_every_cuda_check(healthy):
    env = dataclasses.replace(
        healthy,
        torch_version="2.11.0+cpu",
        torch_cuda=None,
        nvcc_path=None,
        nvcc_version=None,
        cuda_home_env=None,
        cuda_home_resolved=None,
        cuda_runtime_header=False,
        gpus=(),
        arch_list_env=None,
        cusparse_header=None,
        pip_cuda_include=None,
    )
    assert errors(env) == []
    (note,) = warnings(env)
    assert "CPU-only" in note.what


def test_build_from_another_torch_warns_of_undefined_symbols(healthy):
    env = dataclasses.replace(healthy, other_builds=("torch2.10.0_cu128-py311",))
    (problem,) = warnings(env)
    assert "torch2.10.0_cu128-py311" in problem.what
    assert "undefined symbol" in problem.what
    assert "make clean" in problem.fix


def test_lock_file_left_by_a_killed_build_is_named(healthy):
    lock = "/course/build/torch_extensions/torch2.11.0_cu130-py311/addone/lock"
    (problem,) = warnings(dataclasses.replace(healthy, lock_files=(lock,)))
    assert lock in problem.what
    assert lock in problem.fix


def test_missing_cusparse_header_gives_the_cpath_of_the_pip_headers(healthy):
    (problem,) = warnings(dataclasses.replace(healthy, cusparse_header=None))
    assert "cusparse.h" in problem.what
    assert f"export CPATH={PIP_INCLUDE}" in problem.fix


def report_rows(report: str) -> dict[str, str]:
    """The fact lines of a report ("  label    value") as {label: value}."""
    rows = [line.strip().split("  ", 1) for line in report.split("\n\n")[0].splitlines()[1:]]
    return {label: value.strip() for label, value in rows}


def test_report_of_a_healthy_machine_shows_the_key_facts(healthy):
    report = doctor.format_report(healthy, [])
    rows = report_rows(report)
    assert rows["python"] == "3.11.7 (/venv/bin/python)"
    assert rows["torch"] == "2.11.0+cu130, CUDA 13.0"
    assert rows["C++11 ABI"] == "yes"
    assert rows["nvcc"] == "13.0 at /usr/local/cuda/bin/nvcc; matches torch: yes (13.0)"
    assert rows["CUDA_HOME"] == "env: /usr/local/cuda; torch uses: /usr/local/cuda"
    assert rows["ninja"] == "1.11.1"
    assert rows["GPU 0"] == (
        "NVIDIA H100 80GB HBM3, compute capability 9.0: use TORCH_CUDA_ARCH_LIST=9.0"
    )
    assert rows["arch list"] == "TORCH_CUDA_ARCH_LIST=9.0"
    assert "MAX_JOBS=2" in rows["MAX_JOBS"]
    assert rows["extensions"] == "/course/build/torch_extensions/torch2.11.0_cu130-py311"
    assert "No problems found." in report
    assert report.splitlines()[-1] == "Verdict: ready to build C++ and CUDA extensions."


def test_report_lists_each_problem_with_its_fix_errors_first(healthy):
    env = dataclasses.replace(healthy, nvcc_version="12.4", cusparse_header=None)
    report = doctor.format_report(env, doctor.diagnose(env))
    assert report_rows(report)["nvcc"].endswith("matches torch: no (13.0)")
    assert report.index("ERROR:") < report.index("WARNING:")
    assert report.count("fix: ") == 2
    assert "No problems found." not in report
    assert report.splitlines()[-1].startswith("Verdict: 1 error, 1 warning")


def test_main_on_this_machine_prints_the_report_and_exits_0_or_1(capsys):
    code = doctor.main([])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert torch.__version__ in out
    assert out.rstrip().splitlines()[-1].startswith("Verdict:")
    assert (code == 1) == ("fix the errors" in out.rstrip().splitlines()[-1])


def test_build_tag_names_this_torch_and_python():
    tag = doctor.build_tag()
    assert tag.startswith(f"torch{torch.__version__.replace('+', '_')}-py3")
    assert "+" not in tag


def test_collect_finds_other_torch_builds_and_lock_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    (tmp_path / "torch2.10.0_cu128-py311" / "addone").mkdir(parents=True)
    current = tmp_path / doctor.build_tag() / "addone"
    current.mkdir(parents=True)
    (current / "lock").touch()

    env = doctor.collect()

    assert env.extensions_root == str(tmp_path)
    assert env.other_builds == ("torch2.10.0_cu128-py311",)
    assert env.lock_files == (str(current / "lock"),)
    whats = " ".join(p.what for p in doctor.diagnose(env))
    assert "torch2.10.0_cu128-py311" in whats
    assert str(current / "lock") in whats


def test_collect_reads_the_facts_of_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "absent"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.delenv("MAX_JOBS", raising=False)
    env = doctor.collect()
    assert env.torch_version == torch.__version__
    assert env.torch_cuda == torch.version.cuda
    assert env.arch_list_env == "9.0"
    assert env.max_jobs is None
    assert (env.other_builds, env.lock_files) == ((), ())
    if env.nvcc_path is not None and env.nvcc_version is not None:
        assert env.nvcc_version.count(".") == 1


def test_an_arch_nvcc_no_longer_compiles_is_an_error(healthy):
    """nvcc 13 starts at compute_75: a list with 7.0 (V100) fails at the first .cu file."""
    env = dataclasses.replace(
        healthy, arch_list_env="9.0;7.0", nvcc_arches=("7.5", "8.0", "8.6", "9.0", "12.0")
    )
    (problem,) = errors(env)
    assert "asks for 7.0" in problem.what and "Unsupported gpu architecture" in problem.what
    assert "drop 7.0" in problem.fix
    assert errors(dataclasses.replace(env, arch_list_env="9.0")) == []


def test_ninja_default_job_count_follows_ninja():
    assert [doctor.ninja_default_jobs(n) for n in (1, 2, 16)] == [2, 3, 18]
