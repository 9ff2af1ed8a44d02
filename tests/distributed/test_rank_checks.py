"""What merge checks of per-rank files before it trusts them (issue 49): Parquet pages and
metadata under CRC-32 (a flipped bit is an error naming the file, never a different merge),
rank metadata across the files (a rank that is not an int from 0, two files of one rank, world
sizes that disagree), and events that end before they start, refused with the rank and file."""

import json
import pathlib

import numpy as np
import pytest
import ranks_synthetic as R
from test_merge import BASES, RANK0, RANK1, WALL_ERROR

from gpuprofile.tracing.columns import META_CRC_KEY, META_KEY, meta_crc, write_parquet
from gpuprofile.tracing.merge import TraceFileError, merge_traces
from gpuprofile.tracing.rank_input import read_parquet

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("ranks")
    with pytest.MonkeyPatch.context() as mp:
        return R.export_ranks(d, mp, [RANK0, RANK1], BASES, WALL_ERROR, name="trace.parquet")


def same(a, b) -> bool:
    (meta_a, cols_a), (meta_b, cols_b) = a, b
    if meta_a != meta_b or cols_a.keys() != cols_b.keys():
        return False
    for name, x in cols_a.items():
        y = cols_b[name]
        if isinstance(x, tuple):
            if x[1] != y[1] or not np.array_equal(x[0], y[0]):
                return False
        elif not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            return False
    return True


def test_single_bit_flips_are_errors_or_change_nothing(ranks, tmp_path):
    """120 single-bit flips spread over a rank file: each read either fails naming the file or
    gives exactly the original (a flip in statistics or padding that nothing reads)."""
    original = read_parquet(ranks[1])
    raw = bytearray(pathlib.Path(ranks[1]).read_bytes())
    bad = tmp_path / "trace.rank1.parquet"
    caught = 0
    for k in range(120):
        pos = (k * 7919) % len(raw)
        data = bytearray(raw)
        data[pos] ^= 1 << (k % 8)
        bad.write_bytes(bytes(data))
        try:
            got = read_parquet(str(bad))
        except TraceFileError as e:
            assert str(e).startswith(f"{bad}: "), e
            caught += 1
            continue
        assert same(got, original), f"a flip of bit {k % 8} at byte {pos} changed what was read"
    assert caught > 60  # most bytes are data pages, checksummed


def test_a_flip_in_a_data_page_is_named_as_damage(ranks, tmp_path):
    raw = bytearray(pathlib.Path(ranks[0]).read_bytes())
    f = pq.ParquetFile(ranks[0])
    col = f.metadata.row_group(0).column(3)  # start_ns
    start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
    data = bytearray(raw)
    data[start + col.total_compressed_size - 2] ^= 0x10  # the chunk's last page, past its header
    bad = tmp_path / "trace.rank0.parquet"
    bad.write_bytes(bytes(data))
    with pytest.raises(TraceFileError, match=f"{bad}: damaged: a page's CRC-32 does not match"):
        read_parquet(str(bad))


def rewrite(path, out, meta_update=None, table_update=None):
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[META_KEY])
    meta.update(meta_update or {})
    if table_update:
        table = table_update(table)
    text = json.dumps(meta).encode()
    write_parquet(str(out), table.replace_schema_metadata({META_KEY: text, META_CRC_KEY: meta_crc(text)}))
    return str(out)


def test_metadata_edited_without_its_crc_is_named(ranks, tmp_path):
    table = pq.read_table(ranks[0])
    meta = table.schema.metadata
    text = meta[META_KEY].replace(b'"rank": 0', b'"rank": 1')
    bad = tmp_path / "r.parquet"
    write_parquet(str(bad), table.replace_schema_metadata({**meta, META_KEY: text}))
    with pytest.raises(TraceFileError, match="metadata does not match its CRC-32"):
        read_parquet(str(bad))


@pytest.mark.parametrize("rank, said", [("one", "'one'"), (-1, "-1"), (2**80, str(2**80)),
                                        (True, "True"), (1.0, "1.0")])
def test_a_rank_that_is_not_a_small_int_is_named(ranks, tmp_path, rank, said):
    bad = rewrite(ranks[1], tmp_path / "bad.parquet", {"rank": rank})
    with pytest.raises(TraceFileError, match=f"{bad}: its rank is {said}, not an int"):
        merge_traces([ranks[0], bad], tmp_path / "m.json")


def test_world_sizes_that_disagree_are_named(ranks, tmp_path):
    eight = rewrite(ranks[1], tmp_path / "eight.parquet", {"world_size": 8})
    with pytest.raises(TraceFileError, match=f"disagree on the world size \\(2 in {ranks[0]}; 8 in {eight}\\)"):
        merge_traces([ranks[0], eight], tmp_path / "m.json")
    one = rewrite(ranks[1], tmp_path / "one.parquet", {"world_size": 1})
    with pytest.raises(TraceFileError, match=f"{one}: rank 1 of a world of 1 ranks"):
        merge_traces([ranks[0], one], tmp_path / "m.json")
    twice = rewrite(ranks[1], tmp_path / "twice.parquet", {"rank": 0})
    with pytest.raises(TraceFileError, match="two traces are of the same rank"):
        merge_traces([ranks[0], twice], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_an_event_that_ends_before_it_starts_is_refused_with_rank_and_file(ranks, tmp_path):
    def swap_first(table):
        start = table.column("start_ns").to_pylist()
        end = table.column("end_ns").to_pylist()
        end[0] = start[0] - 5
        return table.set_column(table.schema.get_field_index("end_ns"), "end_ns", pa.array(end, pa.int64()))

    bad = rewrite(ranks[1], tmp_path / "neg.parquet", table_update=swap_first)
    with pytest.raises(TraceFileError, match=f"{bad}: rank 1: row 0 ends before it starts \\(end_ns"):
        merge_traces([ranks[0], bad], tmp_path / "m.json")


def test_a_chrome_event_with_a_negative_duration_is_refused_with_rank_and_file(tmp_path, monkeypatch):
    paths = R.export_ranks(tmp_path, monkeypatch, [RANK0, RANK1], BASES, WALL_ERROR)
    import gzip

    with gzip.open(paths[1], "rt") as f:
        data = json.load(f)
    k = next(i for i, e in enumerate(data["traceEvents"]) if e.get("ph") == "X")
    data["traceEvents"][k]["dur"] = -1.5
    bad = tmp_path / "neg.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TraceFileError, match=f"{bad}: rank 1: traceEvents\\[{k}\\]: dur is -1.5: the event ends before it starts"):
        merge_traces([paths[0], str(bad)], tmp_path / "m.json")
