"""The tests run against whatever gpuprofile is installed (issue 25 item 5): tests/conftest.py
refuses to test the checkout's own folder by accident when another copy is installed, and runs
the interpreters the tests start from a folder without a gpuprofile/ of its own.
tools/test_sdist.sh and tools/test_wheel.sh run the suite so, from a tree whose gpuprofile/ is
not built."""

import json
import os
import pathlib
import subprocess
import sys

import conftest

import gpuprofile as gp


class _Dist:
    def __init__(self, site, editable=None):
        self.site, self.url = site, None
        if editable is not None:
            self.url = json.dumps({"url": "file:///src", "dir_info": {"editable": editable}})

    def read_text(self, name):
        assert name == "direct_url.json"
        return self.url

    def locate_file(self, path):
        return self.site / path


def _package(folder):
    (folder / "gpuprofile").mkdir(parents=True)
    (folder / "gpuprofile" / "__init__.py").write_text("")
    return folder / "gpuprofile"


def test_a_checkout_tested_while_a_copy_is_installed_elsewhere_is_named(tmp_path):
    checkout = tmp_path / "checkout"
    tested = _package(checkout)
    site = tmp_path / "site"
    installed = _package(site)
    find = conftest.installed_elsewhere
    assert find(tested, checkout, [_Dist(site)]) == installed  # pip install . (no direct_url)
    assert find(tested, checkout, [_Dist(site, editable=False)]) == installed
    assert find(tested, checkout, [_Dist(site, editable=True)]) is None  # pip install -e .
    assert find(tested, checkout, [_Dist(checkout)]) is None  # the checkout's own egg-info
    assert find(tested, checkout, [_Dist(tmp_path / "empty")]) is None  # metadata, no package
    assert find(tested, checkout, []) is None
    assert find(installed, checkout, [_Dist(site)]) is None  # the installed copy is under test


def test_started_interpreters_import_the_copy_under_test():
    out = subprocess.run([sys.executable, "-c", "import gpuprofile; print(gpuprofile.__file__)"],
                         capture_output=True, text=True, check=True)
    assert pathlib.Path(out.stdout.strip()).resolve() == pathlib.Path(gp.__file__).resolve()
    if conftest.TESTED != conftest.CHECKOUT / "gpuprofile":
        assert not (pathlib.Path(os.getcwd()) / "gpuprofile").exists()

