import pytest

import gpuprofile


def pytest_collection_modifyitems(config, items):
    if gpuprofile.device_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (gpuprofile.device_count() == 0)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
