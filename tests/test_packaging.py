"""The release (issue 25): setup.py's checks (kernel sources present, CUDA 13.0 or newer, no
undefined symbol of ours in the built module), one version, the metadata, MANIFEST.in covering the
checkout, and README links that work on a package index page. tools/test_sdist.sh (CI) builds the
sdist itself and runs this suite against the installed copy."""

import importlib.metadata
import importlib.util
import pathlib
import re
import shutil
import subprocess

import pytest

import gpuprofile as gp

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPO = "https://github.com/gpuprofile/gpuprofile"


def _fake_cuda(tmp_path, number):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda_runtime_api.h").write_text(
        f"/* a header */\n#define CUDART_VERSION  {number}\n#define __CUDART_API_VERSION CUDART_VERSION\n")
    return str(tmp_path)


@pytest.mark.parametrize("number, version", [(12080, (12, 8)), (12090, (12, 9)), (13000, (13, 0)),
                                             (13010, (13, 1)), (14000, (14, 0))])
def test_cuda_version_from_the_runtime_header(setup_py, tmp_path, number, version):
    home = _fake_cuda(tmp_path, number)
    assert setup_py.cuda_version(home) == version
    if version >= (13, 0):  # CUDA 12.8's CUPTI lacks cuptiSubscribe_v2, which the extension calls
        setup_py.check_cuda_version(home)
    else:
        with pytest.raises(SystemExit) as exc:
            setup_py.check_cuda_version(home)
        assert str(exc.value) == (f"gpuprofile: the CUDA toolkit at {home} is {version[0]}.{version[1]}; "
                                  "gpuprofile needs 13.0 or newer (set CUDA_HOME to a newer one)")


def test_a_tree_without_its_kernels_is_refused(setup_py, tmp_path):
    setup_py.check_sources(str(ROOT))  # this one is complete
    for path in setup_py.REQUIRED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    with pytest.raises(SystemExit, match=r"missing kernels/\*\*/\*\.cu\. An sdist must be built"):
        setup_py.check_sources(str(tmp_path))
    (tmp_path / "kernels" / "attention" / "a.cu").write_text("")
    setup_py.check_sources(str(tmp_path))
    (tmp_path / "csrc" / "core" / "cxx_shim" / "string").unlink()  # the header an sdist once lacked
    with pytest.raises(SystemExit) as exc:
        setup_py.check_sources(str(tmp_path))
    assert str(exc.value).startswith(f"gpuprofile: incomplete source tree at {tmp_path}: missing "
                                     "csrc/core/cxx_shim/string. ")


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_the_built_module_leaves_none_of_our_symbols_undefined(setup_py):
    assert setup_py.undefined_own_symbols(gp._C.__file__) == []


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("cc") is None, reason="needs nm and cc")
def test_undefined_symbols_of_ours_are_found(setup_py, tmp_path):
    """What a module built without a kernel looks like: it links (a shared object may leave
    symbols undefined) and fails only at import."""
    src = tmp_path / "m.c"
    src.write_text("#include <string.h>\nint gp_launch_probe(void);\nint cudaFree(void *);\n"
                   "int f(const char *s) { return gp_launch_probe() + cudaFree(0) + (int)strlen(s); }\n")
    lib = tmp_path / "m.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    assert setup_py.undefined_own_symbols(str(lib)) == ["cudaFree", "gp_launch_probe"]
    assert setup_py.undefined_own_symbols(str(tmp_path / "absent.so")) is None


def test_one_version():
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("\n[project]\n", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^dynamic = \["version"\]', project, re.M)
    assert not re.search(r"^version\s*=", project, re.M)
    assert re.search(r'^version = \{ attr = "gpuprofile\._version\.__version__" \}', pyproject, re.M)
    assert importlib.metadata.version("gpuprofile") == gp.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(gp.__version__)}\b", changelog, re.M)


def test_metadata():
    meta = importlib.metadata.metadata("gpuprofile")
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Author"] == "gpuprofile developers"
    assert "Project-URL" in meta and f"Homepage, {REPO}" in meta.get_all("Project-URL")
    classifiers = set(meta.get_all("Classifier"))
    assert {"Environment :: GPU :: NVIDIA CUDA", "Operating System :: POSIX :: Linux"} <= classifiers
    pythons = {c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert pythons == {"3.10", "3.11", "3.12", "3.13"}
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Keywords"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in"):
        assert "SPDX-License-Identifier: Apache-2.0" in (ROOT / name).read_text()


def test_manifest_covers_every_tracked_file():
    """A new top-level file or folder must be named in MANIFEST.in (tools/test_sdist.sh checks
    the built tarball itself)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist)")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    grafts, files = set(), {"setup.py", "pyproject.toml"}  # setuptools adds these two itself
    for line in (ROOT / "MANIFEST.in").read_text().splitlines():
        words = line.split()
        if words and words[0] == "graft":
            grafts.add(words[1])
        elif words and words[0] == "include":
            files.update(words[1:])
    uncovered = [p for p in tracked if p not in files and p.split("/", 1)[0] not in grafts]
    assert uncovered == []


def _slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_links_work_on_an_index_page():
    """A package index shows the README without the repository around it: every link is
    absolute, and each one into the repository names a file (and heading) that exists."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links and [u for u in links if not u.startswith("https://")] == []
    for url in links:
        if not url.startswith(f"{REPO}/blob/main/"):
            continue
        path, _, anchor = url[len(f"{REPO}/blob/main/"):].partition("#")
        assert (ROOT / path).is_file(), url
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, url


def _import_copy(tmp_path, extension):
    """`import gpuprofile` of a copy of the package whose extension is `extension` (bytes, or
    None for none): the ImportError's message."""
    import importlib.machinery
    import sys

    copy = tmp_path / "site" / "gpuprofile"
    shutil.copytree(pathlib.Path(gp.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("_C.*.so", "__pycache__"))
    if extension is not None:
        (copy / f"_C{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(extension)
    # -S: no site-packages, where an editable install's finder would find the real package first
    out = subprocess.run([sys.executable, "-S", "-c", "import gpuprofile"], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(copy.parent), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1
    return out.stderr.strip().splitlines()[-1]


def test_import_error_tells_not_built_from_not_loadable(tmp_path):
    """A module that is there but fails to load (an sdist that built without kernels failed with
    `undefined symbol: gp_launch_probe`) is not advised to be built in place."""
    where = tmp_path / "site" / "gpuprofile"
    assert _import_copy(tmp_path, None) == (
        f"ImportError: gpuprofile's C extension (gpuprofile._C) is not built in {where}. If that is a "
        "source checkout, install it in place with `pip install -e .` (or run Python from another "
        "directory so the installed package is imported).")
    line = _import_copy(tmp_path / "b", b"not an ELF file " * 256)
    where = tmp_path / "b" / "site" / "gpuprofile"
    assert line.startswith(f"ImportError: gpuprofile's C extension in {where} is there but cannot be "
                           "loaded: ")
    assert "invalid ELF header" in line and line.endswith(
        "Reinstall gpuprofile from a complete source tree (docs/install.md); please report it if it "
        "persists.")
