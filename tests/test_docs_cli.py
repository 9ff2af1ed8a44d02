"""The docs match what runs: every docs/ file named in a CLI help text exists, and every
`gpuprofile ...` command the docs show parses (argparse, and `run`'s own parser; nothing runs,
no GPU needed)."""

import re
import shlex
from pathlib import Path

import pytest

from gpuprofile.cli import RUN_USAGE, build_parser, parse_run_args

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _help_texts():
    parser = build_parser()
    yield "gpuprofile", parser.format_help()
    yield "gpuprofile run", RUN_USAGE
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            yield f"gpuprofile {name}", sub.format_help()


def test_every_docs_file_a_help_text_names_exists():
    named = {(where, m) for where, text in _help_texts()
             for m in re.findall(r"docs/[\w./-]+?\.md", text.replace("\n", " "))}
    assert named, "no help text names a docs/ file: the pattern is out of date"
    missing = sorted((where, m) for where, m in named if not (ROOT / m).is_file())
    assert missing == []


_START = re.compile(r"^(?:python -m )?gpuprofile [a-z]")
# prose placeholders: [optional], A|B, ..., <x>, and CAPITAL words standing for a value (N, PATH)
_PLACEHOLDER = re.compile(r"\[|\]|\||\.\.\.|…|<|>|(?:^|\s)[A-Z][A-Z_]*(?=\s|$|=)")


def _snippets(text: str):
    """Inline code spans, and the lines of fenced code blocks (continuations joined)."""
    fenced = re.split(r"^```.*$", text, flags=re.M)
    for k, part in enumerate(fenced):
        if k % 2:  # inside a fence
            yield from part.replace("\\\n", " ").splitlines()
        else:
            yield from re.findall(r"`([^`\n]+)`", part)


def documented_commands():
    for path in DOCS:
        for snippet in _snippets(path.read_text()):
            snippet = snippet.strip()
            if not _START.match(snippet) or _PLACEHOLDER.search(snippet.split(" #")[0]):
                continue
            try:
                argv = shlex.split(snippet, comments=True)
            except ValueError:
                argv = None
            argv = argv[argv.index("gpuprofile") + 1:] if argv else argv
            if argv is None or len(argv) > 1:  # a bare subcommand is its name, not a command
                yield f"{path.relative_to(ROOT)}", snippet, argv


def test_docs_show_commands():
    assert len(list(documented_commands())) > 20


@pytest.mark.parametrize("where, command, argv", list(documented_commands()))
def test_a_documented_command_parses(where, command, argv):
    if argv is None:
        pytest.fail(f"{where}: {command!r} is not a shell command")
    if argv[:1] == ["run"]:
        if argv[1:2] not in (["-h"], ["--help"]):
            parse_run_args(argv[1:])
        return
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        if e.code not in (0, None):
            pytest.fail(f"{where}: {command!r} does not parse (exit {e.code})")
