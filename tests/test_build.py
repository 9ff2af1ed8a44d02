"""setup.py's rebuilds (issue 25): objects live in the tree's build/ folder, one per set of flags,
and only sources newer than their object (or than a header) are compiled again, also under pip,
whose temporary build folders used to make every reinstall a full rebuild."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _file(path, mtime, text=""):
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return str(path)


def test_up_to_date_means_newer_than_every_dependency(setup_py, tmp_path):
    src = _file(tmp_path / "a.c", 1000)
    header = _file(tmp_path / "a.h", 1000)
    obj = tmp_path / "a.o"
    assert not setup_py.up_to_date(str(obj), [src, header])  # not built yet
    _file(obj, 2000)
    assert setup_py.up_to_date(str(obj), [src, header])
    os.utime(header, (3000, 3000))
    assert not setup_py.up_to_date(str(obj), [src, header])
    os.utime(obj, (3000, 3000))  # same second as the header: built from an older one, maybe
    assert not setup_py.up_to_date(str(obj), [src, header])


def test_flags_key_names_the_flags(setup_py):
    a = setup_py.flags_key(["gcc", "-O2"], [("PY_SSIZE_T_CLEAN", None)])
    assert a == setup_py.flags_key(["gcc", "-O2"], [("PY_SSIZE_T_CLEAN", None)])
    assert len(a) == 16 and int(a, 16) >= 0
    assert a != setup_py.flags_key(["gcc", "-O2", "-fsanitize=address"], [("PY_SSIZE_T_CLEAN", None)])
    assert a != setup_py.flags_key(["gcc", "-O2"], [("PY_SSIZE_T_CLEAN", None), ("GP_X", "1")])


class _Compiler:
    """The two calls of a distutils compiler that BuildExt uses; records what it compiles."""

    def __init__(self):
        self.compiled = []

    def object_filenames(self, sources, output_dir=None):
        return [os.path.join(output_dir, os.path.basename(s) + ".o") for s in sources]

    def compile(self, sources, output_dir=None, depends=(), **kwargs):
        assert kwargs == {"macros": [("A", "1")]}  # passed on as they came
        for src, obj in zip(sources, self.object_filenames(sources, output_dir), strict=True):
            self.compiled.append(os.path.basename(src))
            _file(pathlib.Path(obj), self.clock)
        return self.object_filenames(sources, output_dir)


def test_only_changed_sources_are_compiled(setup_py, tmp_path):
    from setuptools import Distribution

    cmd = setup_py.BuildExt(Distribution())
    cmd.force = False
    cmd.compiler = compiler = _Compiler()
    cmd.compile_changed_only()
    srcs = [_file(tmp_path / f"{n}.c", 1000) for n in ("a", "b", "c")]
    header = _file(tmp_path / "x.h", 1000)
    out = tmp_path / "obj"
    out.mkdir()

    def build(clock):
        compiler.compiled, compiler.clock = [], clock
        objects = cmd.compiler.compile(srcs, output_dir=str(out), depends=[header], macros=[("A", "1")])
        assert objects == [str(out / f"{n}.c.o") for n in ("a", "b", "c")]  # all of them, always
        return sorted(compiler.compiled)

    assert build(2000) == ["a.c", "b.c", "c.c"]
    assert build(2100) == []
    os.utime(srcs[1], (3000, 3000))
    assert build(3100) == ["b.c"]
    os.utime(header, (4000, 4000))  # every source includes every header, as far as it knows
    assert build(4100) == ["a.c", "b.c", "c.c"]
    cmd.force = True
    assert build(4200) == ["a.c", "b.c", "c.c"]


def test_a_changed_kernel_object_relinks_the_module(setup_py, tmp_path):
    """setuptools skips the link unless a source or a depend is newer than the module; a kernel
    object newer than the module removes it, so the link runs (a kernel changed alone used to be
    compiled and never linked in). The objects are not depends: those reach every C compile."""
    kernel = _file(tmp_path / "k.cu.o", 1000)
    runtime = _file(tmp_path / "libcudart_static.a", 500)
    module = tmp_path / "_C.so"
    assert not setup_py.drop_stale_module(str(module), [kernel, runtime])  # not built yet
    _file(module, 2000)
    assert not setup_py.drop_stale_module(str(module), [kernel, runtime])
    assert module.exists()
    os.utime(kernel, (3000, 3000))  # the kernel was compiled again
    assert setup_py.drop_stale_module(str(module), [kernel, runtime])
    assert not module.exists()


def test_other_kernel_objects_relink_the_module(setup_py, tmp_path):
    """A build with other kernel flags (GPUPROFILE_ATTN_LAB=1 and back) links another kernel
    folder, whose objects may be older than the module: the list it was linked with (the stamp)
    differs, so the module goes and the link runs."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shipped, lab = _file(tmp_path / "a" / "k.cu.o", 1000), _file(tmp_path / "b" / "k.cu.o", 1000)
    module, stamp = _file(tmp_path / "_C.so", 2000), tmp_path / "linked-objects.txt"
    stamp.write_text(f"{lab}\n")
    assert not setup_py.drop_stale_module(str(module), [lab], str(stamp))
    assert setup_py.drop_stale_module(str(module), [shipped], str(stamp))
    assert not os.path.exists(module)


def test_builds_use_a_persistent_folder_unless_told(setup_py):
    from setuptools import Distribution

    cmd = setup_py.BuildExt(Distribution())
    cmd.finalize_options()
    assert cmd.own_build_temp
    cmd = setup_py.BuildExt(Distribution())
    cmd.build_temp = "elsewhere"  # --build-temp (tools/sanitize.sh)
    cmd.finalize_options()
    assert not cmd.own_build_temp and cmd.build_temp == "elsewhere"


def test_glibc_version_is_parsed_or_refused(setup_py):
    assert setup_py.parse_glibc("2.28") == (2, 28)
    assert setup_py.parse_glibc(" 2.17\n") == (2, 17)
    for bad in ("2", "228", "3.1", "2.28.1", "manylinux_2_28"):
        with pytest.raises(SystemExit, match="GPUPROFILE_GLIBC must be a glibc version like 2.28"):
            setup_py.parse_glibc(bad)


def test_glibc_link_problems_name_what_would_not_load(setup_py):
    needed = [("PyErr_Format", None), ("_Py_NoneStruct", None), ("dlopen", "GLIBC_2.2.5"),
              ("pthread_once", "GLIBC_2.34"), ("clock_gettime", "GLIBC_2.17"),
              ("__tls_get_addr", "GLIBC_2.3"), ("fcntl64", "GLIBC_2.28"), ("stat", "GLIBC_2.33"),
              ("_Unwind_Resume", None), ("__gxx_personality_v0", "CXXABI_1.3"),
              ("_dl_x", "GLIBC_PRIVATE"), ("memcpy", "GLIBC_2.2.5.1")]
    assert setup_py.glibc_link_problems(needed, (2, 28)) == [
        "pthread_once@GLIBC_2.34", "stat@GLIBC_2.33", "_Unwind_Resume (defined by no library of the link)",
        "_dl_x@GLIBC_PRIVATE", "memcpy@GLIBC_2.2.5.1"]
    assert setup_py.glibc_link_problems(needed[:3], (2, 17)) == []
    assert setup_py.glibc_link_problems([("fcntl64", "GLIBC_2.28")], (2, 27)) == ["fcntl64@GLIBC_2.28"]


def test_undefined_symbols_read_with_their_versions(setup_py):
    import gpuprofile as gp

    needed = setup_py.undefined_symbols(gp._C.__file__)
    if needed is None:
        pytest.skip("no nm")
    names = dict(needed)
    assert names["PyErr_Format"] is None  # from the interpreter, unversioned
    assert names["dlsym"].startswith("GLIBC_2.")  # CUPTI is loaded with dlopen/dlsym
    assert not any(name.startswith("PyInit") for name in names)  # defined, not needed
