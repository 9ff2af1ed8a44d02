"""Import and device discovery on any machine, GPU or not."""

import os
import subprocess
import sys

import pytest

import gpuprofile as gp

no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")


def test_import_needs_no_gpu_and_is_fast():
    code = "import time; t=time.perf_counter(); import gpuprofile; print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 0.5  # the 50 ms target is measured in bench_overhead, not here


def test_import_does_not_load_numpy_or_cupti():
    code = ("import sys, gpuprofile; print('numpy' in sys.modules); "
            "print(any('cupti' in l for l in open('/proc/self/maps')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_device_count_never_raises():
    n = gp.device_count()
    assert isinstance(n, int) and n >= 0


@no_device
def test_no_device_count_is_zero():
    assert gp.device_count() == 0


@no_device
@pytest.mark.parametrize("call", [lambda: gp.device_info(0), lambda: gp.kernels.spin(1000)])
def test_gpu_only_calls_raise_no_device_error(call):
    with pytest.raises(gp.NoDeviceError, match="no usable CUDA device"):
        call()


def test_exception_hierarchy():
    for exc in (gp.CudaError, gp.CuptiError, gp.NoDeviceError):
        assert issubclass(exc, gp.GpuProfileError)
    assert issubclass(gp.GpuProfileError, RuntimeError)


def test_device_info_bad_index():
    with pytest.raises(TypeError):
        gp.device_info("0")
    if gp.device_count():
        with pytest.raises(IndexError, match="out of range"):
            gp.device_info(gp.device_count())


def test_spin_argument_validation():
    with pytest.raises(TypeError, match="ns must be an int"):
        gp.kernels.spin(1.5)
    with pytest.raises(ValueError, match="ns must be in"):
        gp.kernels.spin(-1)
    with pytest.raises(ValueError, match="ns must be in"):
        gp.kernels.spin(10**12)
    with pytest.raises(TypeError, match="stream must be None"):
        gp.kernels.spin(10, stream="s")


def test_cli_info_exits_zero():
    out = subprocess.run([sys.executable, "-m", "gpuprofile", "info"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "gpuprofile" in out.stdout and "CUPTI" in out.stdout
    if gp.device_count() == 0:
        assert "GPU: none found" in out.stdout


def test_cli_info_json():
    import json

    out = subprocess.run([sys.executable, "-m", "gpuprofile", "info", "--json"], capture_output=True,
                         text=True, check=True)
    info = json.loads(out.stdout)
    assert info["device_count"] == gp.device_count()
    assert len(info["devices"]) == info["device_count"]


def test_cupti_override_pointing_nowhere_is_reported():
    env = dict(os.environ, GPUPROFILE_CUPTI_PATH="/nonexistent/libcupti.so")
    code = "import gpuprofile._C as C; print(C._cupti_info())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert "'found': False" in out.stdout and "/nonexistent/libcupti.so" in out.stdout


def test_the_stub_names_what_the_extension_defines():
    """gpuprofile/_C.pyi (for editors and type checkers) lists exactly the extension's names."""
    import ast
    import pathlib

    from gpuprofile import _C

    stub = pathlib.Path(gp.__file__).with_name("_C.pyi")
    assert stub.with_name("py.typed").is_file()
    def names(body):
        named = set()
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                named.add(node.name)
            elif isinstance(node, ast.AnnAssign):
                named.add(node.target.id)
        return named

    body = ast.parse(stub.read_text()).body
    assert names(body) == {n for n in dir(_C) if not n.startswith("__")}
    # _C._testing (the tests' and benchmarks' namespace) is stubbed as a class of its functions
    [testing] = [n for n in body if isinstance(n, ast.ClassDef) and n.name == "_testing"]
    assert names(testing.body) == {n for n in dir(_C._testing) if not n.startswith("__")}


def test_modules_live_at_one_path():
    """The aliases of the modules moved by issue 11 went before the first release (issue 24):
    each module has one path. gp.memory, public, also imports as gpuprofile.memory, the same
    module object."""
    import importlib

    import gpuprofile.memory

    assert gpuprofile.memory is gp.memory is importlib.import_module("gpuprofile.tracing.memory")
    assert gp.Stream.__module__ == "gpuprofile.streams"  # beside device.py, not in the benchmark
    for old in ("profiling", "_activity", "_catalog", "roofline", "_attention_ref"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"gpuprofile.{old}")


no_driver = pytest.mark.skipif(gp._C._cuda_status()["driver_version"] != 0,
                               reason="checks the message of a machine with no NVIDIA driver")
NO_DRIVER = "no usable CUDA device: no NVIDIA driver found"


@no_driver
def test_no_driver_is_named_as_such_by_gpu_calls():
    """The runtime's words for a missing driver ("CUDA driver version is insufficient") send
    users to upgrade a driver they do not have; every call says what `info` says (issue 25)."""
    assert gp._C._cuda_status()["reason"] == "no NVIDIA driver found"
    with pytest.raises(gp.NoDeviceError) as info:
        with gp.profile():
            pass
    assert str(info.value) == NO_DRIVER
    with pytest.raises(gp.NoDeviceError) as info:
        gp.device_info(0)
    assert str(info.value) == NO_DRIVER
    out = subprocess.run([sys.executable, "-m", "gpuprofile", "info"], capture_output=True,
                         text=True, check=True)
    assert "GPU: none found (no NVIDIA driver found)." in out.stdout


@no_driver
@pytest.mark.parametrize("command, prefix", [
    ("run", "gpuprofile run: cannot trace: "),
    ("metrics", "gpuprofile metrics: error: needs a CUDA device: "),
    ("stalls", "gpuprofile stalls: error: needs a CUDA device: "),
])
def test_no_driver_message_of_the_commands(tmp_path, command, prefix):
    script = tmp_path / "s.py"
    script.write_text("print('never runs')\n")
    out = subprocess.run([sys.executable, "-m", "gpuprofile", command, str(script)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2  # an error (docs/cli.md#exit-status), not a verdict
    assert out.stdout == ""
    assert out.stderr == prefix + NO_DRIVER + "\n"
