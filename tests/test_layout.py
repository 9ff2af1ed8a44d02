"""The layout rules of docs/architecture.md, checked from the sources (no build needed):
no include cycle between C units, no import cycle between Python modules, no C wing including
another, no source file over MAX_LINES lines without a written reason (OVERSIZED), a small
docs/results/ folder that matches its index and the docs, short design notes, and docs that name
no branch or commit a clone of main cannot reach (issue 45: main holds what runs and today's
numbers; the lab record lives in git history and commit messages).

A C unit is a .c file with its header (csrc/regions/regions.c and .h are one unit), so
activity.c including attribution.h while attribution.c includes activity.h is a cycle. Python
counts every import, also those inside functions: a lazy import still ties two modules together
(it only defers the cost), and the cycles issue 11 measured were partly lazy ones.
"""

import ast
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES = 600

# A line limit is a smell, not a law: a file may grow past it with a written reason here (never
# split a file or trim a comment only to fit). The test also flags a reason that no longer applies.
OVERSIZED: dict = {
    "csrc/bench/bench.c": "the BenchRunner type: one batch loop with its gate, flush, events, "
    "device syncs for work on other streams and the re-entry guard; one concern, read top to bottom",
}


def _c_files():
    for base, exts in (("csrc", (".c", ".h")), ("kernels", (".cu", ".cuh", ".h"))):
        for path in sorted((ROOT / base).rglob("*")):
            if path.suffix in exts and "cxx_shim" not in path.parts:
                yield path


def _resolve_include(path, name):
    for folder in (path.parent, ROOT / "csrc", ROOT / "kernels"):
        if (folder / name).is_file():
            return (folder / name).resolve()
    return None  # a system or toolkit header


def _unit(path):
    return str(path.relative_to(ROOT).with_suffix(""))


def c_graph():
    graph = {}
    for path in _c_files():
        deps = graph.setdefault(_unit(path), set())
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(), re.M):
            target = _resolve_include(path, name)
            if target is not None and _unit(target) != _unit(path):
                deps.add(_unit(target))
    return graph


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_graph():
    files = {_module_name(p): p for p in sorted((ROOT / "gpuprofile").rglob("*.py"))}
    graph = {name: set() for name in files}
    files["gpuprofile._C"] = None  # the extension: a leaf
    for name, path in files.items():
        if path is None:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from x import y` imports the module x.y when there is one, else names from x
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


WINGS = {  # feature: its folder (or file) in each layer; docs/architecture.md draws them
    "regions": ["csrc/regions", "gpuprofile/regions.py", "tests/regions", "docs/quickstart.md"],
    "benchmark": ["csrc/bench", "kernels/harness", "gpuprofile/bench", "tests/bench", "docs/benchmark.md"],
    "tracing": ["csrc/tracing", "gpuprofile/tracing", "tests/tracing", "docs/tracing.md"],
    "counters": ["csrc/counters", "gpuprofile/counters", "tests/counters", "docs/counters.md"],
    "bundled kernels": ["csrc/workloads", "kernels/attention", "gpuprofile/kernels", "tests/kernels",
                        "docs/attention.md"],
}


def test_every_wing_has_its_place_in_every_layer():
    missing = [p for paths in WINGS.values() for p in paths if not (ROOT / p).exists()]
    assert missing == []
    assert (ROOT / "csrc/core").is_dir() and (ROOT / "docs/architecture.md").is_file()


def test_the_core_depends_on_no_wing():
    core = {u: deps for u, deps in c_graph().items() if u.startswith("csrc/core/")}
    assert {d for deps in core.values() for d in deps if not d.startswith("csrc/core/")} == set()


def test_wings_meet_only_in_the_core_and_regions():
    """A C wing includes the core, the kernels' C ABI and, where it attributes work to regions,
    the regions wing; never another wing (issue 24 moved the driver-context helpers that tracing
    took from counters into the core)."""
    wings = ("csrc/bench/", "csrc/tracing/", "csrc/counters/", "csrc/workloads/", "csrc/regions/")
    crossing = {(u, d) for u, deps in c_graph().items() for d in deps
                for w in wings if u.startswith(w) and not d.startswith(w)
                and not d.startswith(("csrc/core/", "csrc/regions/", "kernels/"))}
    assert crossing == set()


def test_cycle_finder_on_a_small_graph():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}}
    assert cycles(graph) == [["a", "b"], ["c", "d"]]


def test_graphs_see_the_sources():
    c, py = c_graph(), python_graph()
    assert "csrc/regions/store" in c["csrc/regions/stacks"]
    assert "gpuprofile.counters.catalog" in py["gpuprofile.counters.metrics"]


def test_no_include_cycles():
    assert cycles(c_graph()) == []


def test_no_import_cycles():
    assert cycles(python_graph()) == []


def test_no_source_file_over_the_limit():
    sources = [*_c_files(), *(ROOT / "gpuprofile").rglob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert {k: v for k, v in long.items() if k not in OVERSIZED} == {}, "give a reason in OVERSIZED"
    assert set(OVERSIZED) - set(long) == set(), "these are back under the limit: drop their reasons"
    assert all(len(reason) > 40 for reason in OVERSIZED.values())


def test_c_never_imports_gpuprofile_by_name():
    """Python installs its hooks into C (docs/architecture.md); C importing a gpuprofile module
    would tie the core to the package layout and to import order."""
    pattern = re.compile(r'PyImport_\w+\(\s*"gpuprofile')
    assert [str(p.relative_to(ROOT)) for p in _c_files() if pattern.search(p.read_text())] == []


MAX_RESULTS = 30  # files under docs/results/, its index aside (issue 45)
MAX_NOTES_LINES = 150  # a kernel family's NOTES.md: what runs, why, today's numbers


def _doc_pages():
    """The docs a reader of the repository sees: README, CHANGELOG, docs/ (history included) and
    the kernels' notes; the raw results' own index is part of docs/."""
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "kernels").rglob("*.md"))]


def test_results_folder_matches_its_index_and_the_docs():
    """docs/results/ keeps one file per measurement a doc cites as today's result (issues 24 and
    45): its README indexes every entry, every entry is named in a doc other than the index (a
    rerun replaces the file it repeats; git history keeps the older one), and the folder holds
    at most MAX_RESULTS files. The sdist leaves the folder out (MANIFEST.in)."""
    results = ROOT / "docs" / "results"
    if not results.is_dir():
        pytest.skip("no docs/results/ (an unpacked sdist)")
    files = [p for p in results.rglob("*") if p.is_file() and p.name != "README.md"]
    assert len(files) <= MAX_RESULTS, f"{len(files)} files in docs/results/: keep today's results only"
    entries = {p.name for p in results.iterdir() if p.name != "README.md"}
    index = (results / "README.md").read_text()
    first_cells = [line.split("|")[1] for line in index.splitlines() if line.startswith("| `")]
    indexed = {name.rstrip("/") for cell in first_cells for name in re.findall(r"`([^`]+)`", cell)}
    assert indexed - entries == set(), "the index names files that are gone"
    assert entries - indexed == set(), "index these in docs/results/README.md"
    docs = "\n".join(p.read_text() for p in _doc_pages() if results not in p.parents)
    assert {name for name in entries if name not in docs} == set(), "no doc names these"


def _slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page):
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)}


def test_relative_links_in_the_docs_point_at_files():
    """Every relative link in README.md, CHANGELOG.md, docs/ and the kernels' notes names a file
    that exists, and an anchor after # a heading of that page (or of the same page: "#..." );
    absolute URLs are left alone. Links into docs/results/ are not checked where the folder is
    absent (an unpacked sdist)."""
    results = ROOT / "docs" / "results"
    broken = []
    for page in _doc_pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                if not results.is_dir() and results in file.parents:
                    continue
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_kernel_notes_stay_short():
    """A kernel family's NOTES.md says what runs, why, and today's numbers with their dates; the
    rounds of work that led there go to docs/history/ and commit messages (issue 45)."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "kernels").rglob("NOTES.md")
            if (n := len(p.read_text().splitlines())) > MAX_NOTES_LINES}
    assert long == {}


# The experiment branches of issue 27 (never pushed with main): a doc naming one sends its reader
# to code a clone of main does not have. Main holds what runs; an experiment's story is told in
# words (docs/history/) and in commit messages, and a result worth keeping is tagged.
BRANCH_NAMES = [re.compile(p) for p in (
    r"\battn-[a-z0-9][a-z0-9-]*",  # attn-half, attn-l2, attn-lazy-rescale, ... (19 of them)
    r"\bbranch(?:es)? `[^`]+`",  # "branch `name`": any branch named as code
)]
HASH_LIKE = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def test_docs_name_no_experiment_branch():
    found = {f"{p.relative_to(ROOT)}: {m}" for p in _doc_pages() for pattern in BRANCH_NAMES
             for m in pattern.findall(p.read_text(encoding="utf-8"))}
    assert found == set()


def test_branch_patterns_on_a_sample():
    text = "measured on branch `attn-l2` (attn-lazy-rescale); a branch on a value; main's branch"
    found = [m for pattern in BRANCH_NAMES for m in pattern.findall(text)]
    assert found == ["attn-l2", "attn-lazy-rescale", "branch `attn-l2`"]


def test_hash_finder_on_a_sample():
    text = "merged in 790ce37 (main), abc1234def, 1024, deadbeef, cafe123, sm_90a, 0x1f2e3d4c5"
    assert HASH_LIKE.findall(text) == ["790ce37", "abc1234def", "cafe123"]


def test_docs_name_only_commits_main_can_reach():
    """Every commit-hash-looking token in the docs (7 to 40 hex digits, with a letter and a digit)
    resolves to a commit of this repository. Checked only inside a git checkout with its history
    (an sdist has none; a shallow clone may lack old commits)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist)")
    git = ["git", "-C", str(ROOT)]
    if subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True,
                      text=True).stdout.strip() != "false":
        pytest.skip("a shallow clone: old commits are not here to check")
    tokens = {(str(p.relative_to(ROOT)), t) for p in _doc_pages()
              for t in HASH_LIKE.findall(p.read_text(encoding="utf-8"))}
    names = sorted({t for _, t in tokens})
    answer = subprocess.run([*git, "cat-file", "--batch-check"], capture_output=True, text=True,
                            input="".join(f"{t}^{{commit}}\n" for t in names), check=True).stdout
    missing = {line.split()[0].removesuffix("^{commit}") for line in answer.splitlines()
               if line.endswith(" missing") or line.endswith(" ambiguous")}
    assert sorted(f"{page}: {t}" for page, t in tokens if t in missing) == []
