import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

import gpuprofile

CHECKOUT = pathlib.Path(__file__).resolve().parents[1]
TESTED = pathlib.Path(gpuprofile.__file__).resolve().parent


def installed_elsewhere(tested, checkout, dists):
    """The folder of a non-editable install of gpuprofile that is not the copy under test, when
    the copy under test is the checkout's own folder (`python -m pytest` puts the current folder
    first on sys.path, so from a checkout it imports ./gpuprofile, whatever is installed)."""
    if tested != checkout / "gpuprofile":
        return None
    for dist in dists:
        url = dist.read_text("direct_url.json")
        if url and json.loads(url).get("dir_info", {}).get("editable"):
            continue
        package = pathlib.Path(dist.locate_file("gpuprofile")).resolve()
        if package != tested and (package / "__init__.py").is_file():
            return package
    return None


# PYTHONPATH naming the checkout chooses it (tools/sanitize.sh tests its sanitized copies so)
_chosen = str(CHECKOUT) in {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
_other = installed_elsewhere(TESTED, CHECKOUT, importlib.metadata.distributions(name="gpuprofile"))
if _other is not None and not _chosen:
    pytest.exit(f"the tests would import this checkout's {TESTED}, not the gpuprofile installed in "
                f"{_other}: run `pytest` rather than `python -m pytest` (which puts the current folder "
                "first on sys.path), or run from another folder (docs/install.md)", returncode=4)


@pytest.fixture(scope="session", autouse=True)
def _tests_run_outside_the_checkout(tmp_path_factory):
    """Against an installed copy (a wheel, the sdist's install), the tests run in a folder without
    a gpuprofile/ of its own: the interpreters they start (`python -c`, `python -m gpuprofile`)
    put their current folder first on sys.path, and must import the same installed copy. Only
    while tests run: collection (and xdist's workers, which start in the same folder as this
    process) still reads the command line's paths from where pytest was started."""
    if TESTED == CHECKOUT / "gpuprofile":
        yield
        return
    started = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(started)

# Fuzzing budgets (tests marked `fuzz`): the normal suite runs a small, derandomized budget so
# that every run checks the same inputs in a few seconds. CI's fuzzing step (GPUPROFILE_FUZZ=
# ci-fuzz) draws 1000 fresh inputs per test (about a minute); `make fuzz` 20 000 (about 15).
# A failure prints the blob that reproduces it (@reproduce_failure).
settings.register_profile("ci", max_examples=60, derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci-fuzz", max_examples=1_000, deadline=None, database=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=20_000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("GPUPROFILE_FUZZ", "ci"))


def pytest_collection_modifyitems(config, items):
    if gpuprofile.device_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (gpuprofile.device_count() == 0)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


FRESH_CHILD = "GPUPROFILE_FRESH_CHILD"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked `fresh_interpreter` runs in a new interpreter; this one checks its outcome
    (its fixtures still run here too)."""
    if pyfuncitem.get_closest_marker("fresh_interpreter") is None or os.environ.get(FRESH_CHILD):
        return None
    # by absolute path, from the current folder (see above: never one with a gpuprofile/ of its own
    # unless that is the copy under test)
    path, sep, name = pyfuncitem.nodeid.partition("::")
    target = f"{pyfuncitem.config.rootpath / path}{sep}{name}"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", target],
                       capture_output=True, text=True, timeout=900, env={**os.environ, FRESH_CHILD: "1"})
    assert r.returncode == 0, f"in a fresh interpreter:\n{r.stdout[-4000:]}{r.stderr[-2000:]}"
    return True


@pytest.fixture(autouse=True)
def _fresh_regions():
    """Every test starts and ends with no region records and regions enabled."""
    gpuprofile.enable()
    gpuprofile.reset()
    yield
    gpuprofile.enable()
    gpuprofile.reset()


_DEVICE_SEEN = [None]
_REAL_DEVICE_COUNT = gpuprofile._C.device_count()  # before any test stands in for it


def _note_device_change(where):
    """With two or more devices, says on stderr each time gpuprofile's or torch's current device
    changes between test phases (a leak in a module fixture or a collection hook escapes the
    per-test check below)."""
    if _REAL_DEVICE_COUNT < 2:
        return
    torch = sys.modules.get("torch")
    now = (gpuprofile._C._current_device(),
           torch.cuda.current_device() if torch is not None and torch.cuda.is_initialized() else None)
    if now != _DEVICE_SEEN[0]:
        sys.__stderr__.write(f"\n[current device (gpuprofile, torch) {_DEVICE_SEEN[0]} -> {now} at {where}]\n")
        _DEVICE_SEEN[0] = now


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _note_device_change(f"{item.nodeid} before setup")
    yield
    _note_device_change(f"{item.nodeid} after setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    _note_device_change(f"{item.nodeid} after call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield
    _note_device_change(f"{item.nodeid} after teardown")


@pytest.fixture(autouse=True)
def _current_device_kept(request):
    """A GPU test that leaves another device current fails here, and the device it found is put
    back (with torch, where installed) so the tests after it start where they expect."""
    if request.node.get_closest_marker("gpu") is None or _REAL_DEVICE_COUNT < 2:
        yield
        return
    before = gpuprofile._C._current_device()
    yield
    after = gpuprofile._C._current_device()
    if after != before:
        try:
            import torch

            torch.cuda.set_device(before)
        except ImportError:
            pass
        pytest.fail(f"the test left device {after} current (it started on device {before})",
                    pytrace=False)


@pytest.fixture(scope="module")
def setup_py():
    """setup.py as a module: its checks and build helpers without a build (setup() runs only as
    __main__)."""
    import importlib.util

    pytest.importorskip("setuptools")  # venvs of Python >= 3.12 come without it
    path = pathlib.Path(__file__).resolve().parents[1] / "setup.py"
    spec = importlib.util.spec_from_file_location("gpuprofile_setup", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def has_device():
    return gpuprofile.device_count() > 0
