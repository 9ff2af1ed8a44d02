"""Fuzzing the command line (marker `fuzz`, issue 23): every subcommand with its options drawn
from the parser itself, given junk values, junk positionals and unknown flags. The oracle: main()
returns 0, 1 or 2 or exits through argparse with 0 or 2, and prints no traceback; any other
exception is a finding. Runs in-process in a scratch folder; statements given to `bench` are ones
that fail at once (a statement that runs would start a real benchmark), scripts do not exist."""

import argparse
import contextlib
import io
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuprofile import cli

pytestmark = pytest.mark.fuzz

_PARSER = cli.build_parser()
_SUBCOMMANDS = {name: p for a in _PARSER._actions if isinstance(a, argparse._SubParsersAction)
                for name, p in a.choices.items()}
_OPTIONS = {name: sorted(o for a in p._actions for o in a.option_strings if o not in ("-h", "--help"))
            for name, p in _SUBCOMMANDS.items()}
# No "/" (nothing outside the scratch folder can be named), no NUL (not a valid argv entry).
_SAFE = st.text(alphabet="abcxyz019.-_,:=+ eE%", max_size=10)
_NUMBERS = st.sampled_from(["0", "-1", "1e400", "nan", "inf", "-inf", "1e-300", "2147483648",
                            "99999999999999999999", "0x10", "1_0", "", " ", "-0"])
_FAILING_STMTS = st.sampled_from(["1/0", "raise ValueError('x')", "undefined_name", "(", "@@",
                                  "x = 1\n1/0", "import nonexistent_module_xyz", "return 1"])


def _argv():
    def build(name, opts, positionals, stmts):
        argv = [name]
        for opt, value in opts:
            argv += [opt] if value is None else [opt, value]
        if name == "bench":
            argv += stmts
        else:
            argv += [f"nonexistent_{p}" if p and not p.startswith("-") else p for p in positionals]
        return argv

    def for_name(name):
        opt = st.sampled_from(_OPTIONS[name] + ["--bogus"]) if _OPTIONS[name] else st.just("--bogus")
        value = st.one_of(st.none(), _SAFE, _NUMBERS)
        return st.builds(build, st.just(name), st.lists(st.tuples(opt, value), max_size=5),
                         st.lists(_SAFE, max_size=3), st.lists(_FAILING_STMTS, min_size=1, max_size=2))

    return st.sampled_from(sorted(_SUBCOMMANDS)).flatmap(for_name)


@given(argv=_argv())
def test_cli_arguments(tmp_path_factory, argv):
    scratch = tmp_path_factory.mktemp("cli")
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
                rc = exc.code
    finally:
        os.chdir(cwd)
    assert rc in (0, 1, 2), (argv, rc, err.getvalue()[-2000:])
    if "bench" not in argv[:1]:  # bench prints the statement's own traceback, by design
        assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
