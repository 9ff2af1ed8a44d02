import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

import gpuprofile

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
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                        pyfuncitem.nodeid], cwd=pyfuncitem.config.rootpath, capture_output=True,
                       text=True, timeout=900, env={**os.environ, FRESH_CHILD: "1"})
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


@pytest.fixture
def has_device():
    return gpuprofile.device_count() > 0
