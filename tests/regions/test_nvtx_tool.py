"""gpuprofile.nvtx with an NVTX tool attached, on a CPU: tools/nvtx_record_tool.c, built here
and loaded by NVTX (NVTX_INJECTION64_PATH) in a fresh process, records each call that reaches
it. What the tool sees is what Nsight would: the C Domain methods' pre-made event attributes,
the Python paths' resolved ones, the domain of each call and the tool's own return values."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from gpuprofile import _C

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _include_dir():
    for home in (_C.build_cuda_home, os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (pathlib.Path(home) / "include" / "nvtx3" / "nvToolsExt.h").is_file():
            return pathlib.Path(home) / "include"
    return None


@pytest.fixture(scope="module")
def tool(tmp_path_factory):
    include = _include_dir()
    if shutil.which("cc") is None or include is None:
        pytest.skip("needs cc and the nvtx3 headers")
    lib = tmp_path_factory.mktemp("nvtx_tool") / "nvtx_record_tool.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-Werror", f"-I{include}", "-o", str(lib),
                    str(ROOT / "tools" / "nvtx_record_tool.c")], check=True)
    return lib


def run_with_tool(tool, tmp_path, code):
    log = tmp_path / "nvtx.log"
    env = {**os.environ, "NVTX_INJECTION64_PATH": str(tool), "GP_NVTX_RECORD": str(log)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split(), log.read_text().splitlines()


def test_domain_methods_reach_the_tool_with_their_attributes(tool, tmp_path):
    printed, calls = run_with_tool(tool, tmp_path, """if True:
        from gpuprofile import nvtx
        d = nvtx.get_domain("trainer")
        a = d.get_event_attributes(message="fwd", color="red", category="io", payload=1)
        other = nvtx.get_domain("other").get_event_attributes(message="o", category="io",
                                                              payload=2**64 - 1)
        print(d.push_range(a), d.push_range(other), d.pop_range(), d.pop_range(), d.pop_range())
        rid = d.start_range(a)
        d.end_range(rid)
        d.mark(a)
        print(rid, d.start_range(message="k", payload=2.5))
        d.mark("m", category=3)
        nvtx.get_domain().push_range(nvtx.get_domain().get_event_attributes(message="plain"))
        nvtx.get_domain().pop_range()
        print(nvtx._TOOL)
    """)
    # depths 0 and 1, then pops to 1, 0 and the tool's -1 for a pop without a push
    assert printed == ["0", "1", "1", "0", "-1", "100", "101", "True"]
    assert calls == [
        "domain trainer", "category trainer 1 io", "domain other", "category other 1 io",
        "push trainer fwd color=ffff0000 category=1 payload=1",
        # another domain's attributes go to the domain that pushes them (their category id is
        # the one named in their own domain, as in the nvtx package)
        "push trainer o category=1 payload=18446744073709551615",
        "pop trainer", "pop trainer", "pop trainer",
        "start trainer fwd color=ffff0000 category=1 payload=1", "end trainer 100",
        "mark trainer fwd color=ffff0000 category=1 payload=1",
        "domain gpuprofile",  # the Python path's one probe for a tool
        "start trainer k category=0 payload=2.5", "mark trainer m category=3",
        "push - plain category=0", "pop -",
    ]


def test_module_functions_reach_the_tool(tool, tmp_path):
    printed, calls = run_with_tool(tool, tmp_path, """if True:
        from gpuprofile import nvtx
        with nvtx.annotate("ann", color="blue", domain="d"):
            nvtx.mark("m", payload=-3)
        rid = nvtx.start_range("s", domain="d")
        nvtx.end_range(rid)
        nvtx.push_range("p", category="io")
        print(nvtx.pop_range())

        @nvtx.annotate(domain="d")
        def fails():
            raise KeyError

        try:
            fails()
        except KeyError:
            print("raised")
    """)
    assert printed == ["0", "raised"]
    assert calls == ["domain d", "domain gpuprofile", "push d ann color=ff0060ff category=0",
                     "mark - m category=0 payload=-3", "pop d", "start d s category=0",
                     "end d 100", "category - 1 io", "push - p category=1", "pop -",
                     "push d fails category=0", "pop d"]  # popped on the way out of a raise
