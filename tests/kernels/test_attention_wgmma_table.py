"""flash_wgmma's table of schedules (kernels/attention/flash_wgmma/schedules.h), exported as
_C.ATTENTION_WGMMA_SCHEDULES and read as gp.kernels.WGMMA_SCHEDULES: its shape, that what it
ships is exactly what the per-shape rule reaches, and that the queries, the error messages and
the docs take their names from it. Pure host code: no device needed."""

import itertools
import pathlib
import re

import pytest

import gpuprofile as gp
from gpuprofile import _C

TABLE = gp.kernels.WGMMA_SCHEDULES
NAMES = tuple(s.name for s in TABLE)
DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "attention.md"


def test_the_rows():
    assert [s.number for s in TABLE] == list(range(1, len(TABLE) + 1))  # 0 is the rule's choice
    assert len(set(NAMES)) == len(NAMES) and "per_shape" not in NAMES
    for s in TABLE:
        assert 64 in s.configs and s.head_dims == tuple(sorted(s.configs))
        for config in s.configs.values():
            assert config.rows == 64 * config.consumers and config.consumers in (2, 3)
            assert config.order in ("sequential", "overlapped", "lookahead")
            assert config.persistent or not config.chained
            assert set(config.ships) <= {"regs", "smem"} and config.words
    # head_dim 128: O takes 64 registers a thread, which neither the 192-row block nor two S
    # tiles leave room for
    assert all(c.rows == 128 and c.order != "lookahead" for s in TABLE
               for d, c in s.configs.items() if d == 128)


def reached():
    """(schedule, head_dim, O store) of every configuration the rule picks over a sweep of
    shapes, causal or not, on SM counts of today's devices (H100 and H200: 132; A100-sized: 108;
    a smaller part: 78)."""
    seen = set()
    for b, h, n, d, causal, sms in itertools.product(
            (1, 2, 4, 8, 16, 32), (1, 3, 12, 16, 32), (128, 512, 640, 1024, 2048, 3000, 4096, 8192, 16384),
            (64, 128), (False, True), (78, 108, 132)):
        shape = (b, h, n, d)
        name = _C._testing.attention_wgmma_schedule(shape, causal, sms=sms)
        seen.add((name, d, _C._testing.attention_wgmma_out(shape, causal, name)))
    return seen


def test_the_build_ships_what_the_rule_reaches():
    """Every configuration the table ships is one the rule picks for some shape, and the rule
    picks none that the table does not ship: the shipped build holds exactly what runs."""
    ships = {(s.name, d, store) for s in TABLE for d, c in s.configs.items() for store in c.ships}
    assert reached() == ships


def test_the_queries_read_the_table():
    """The schedule names the queries take and refuse, and which ones are persistent, are the
    table's."""
    shape = (8, 33, 512, 64)
    for s in TABLE:
        if s.configs[64].persistent:
            assert _C._testing.attention_wgmma_order(shape, True, s.name, sms=132) in (
                "twos", "heaviest first")
        else:
            with pytest.raises(ValueError, match=f"'{s.name}' is not a persistent schedule "
                               rf"\({', '.join(n.name for n in TABLE if n.configs[64].persistent)}\)"):
                _C._testing.attention_wgmma_order(shape, True, s.name, sms=132)
    with pytest.raises(ValueError, match=rf"unknown schedule 'v9' \({', '.join(NAMES)}\)"):
        _C._testing.attention_wgmma_out(shape, True, "v9")


def test_auto_s_reason_names_the_schedule_in_the_table_s_words():
    words = {(s.name, d): c.words for s in TABLE for d, c in s.configs.items()}
    assert words[("persist", 64)] == "192-row blocks, persistent, items chained"
    assert len(set(words.values())) >= 5


def docs_table():
    """The table of schedules as docs/attention.md shows it (between its markers)."""
    rows = ["| # | schedule | head_dim 64 | head_dim 128 |", "|---|---|---|---|"]
    for s in TABLE:
        cells = []
        for d in (64, 128):
            c = s.configs.get(d)
            ships = " and ".join({"regs": "from registers", "smem": "through shared memory"}[o]
                                 for o in c.ships) if c else ""
            cells.append("—" if c is None else
                         f"{c.words}; O {ships}" if ships else f"{c.words}; not run by the rule")
        rows.append(f"| {s.number} | `{s.name}` | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def test_the_docs_show_the_table():
    """docs/attention.md's table of schedules is the C table's text (regenerate it from
    docs_table() when the table changes)."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- schedules: generated[^\n]*-->\n(.*?)\n<!-- /schedules -->", text, re.S)
    assert found, "docs/attention.md lost its table of schedules"
    assert found.group(1) == docs_table(), docs_table()
