"""Collective sizes from torch's NCCL Flight Recorder, matched to NCCL kernel records (CPU:
synthetic recorder entries shaped like torch 2.11's, with known answers)."""

import numpy as np
import pytest

from gpuprofile.tracing import collectives as C

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"


def entry(seq, name="nccl:all_reduce", sizes=((1024,),), dtype="Float", out=None, created=100,
          pg=("0", "default_pg")):
    return {"record_id": seq, "pg_id": int(pg[0]), "process_group": list(pg), "collective_seq_id": seq,
            "p2p_seq_id": 0, "profiling_name": name, "time_created_ns": created,
            "input_sizes": [list(s) for s in sizes], "input_dtypes": [dtype] * len(sizes),
            "output_sizes": [list(s) for s in (out or sizes)], "output_dtypes": [dtype] * len(out or sizes)}


def test_entry_bytes_follow_nccl_tests_sizes():
    assert C.entry_bytes(entry(1, sizes=((16781312,),))) == 16781312 * 4
    assert C.entry_bytes(entry(1, dtype="BFloat16", sizes=((3, 5),))) == 30
    # AllGather: the whole gathered buffer (the output), ReduceScatter: the whole input
    assert C.entry_bytes(entry(1, "nccl:_allgather_base", sizes=((8,),), out=((16,),))) == 64
    assert C.entry_bytes(entry(1, "nccl:reduce_scatter_tensor_coalesced", sizes=((16,),), out=((8,),))) == 64
    assert C.entry_bytes(entry(1, dtype="Mystery")) is None


@pytest.mark.parametrize("name, op", [
    ("nccl:all_reduce", "AllReduce"), ("nccl:barrier", "AllReduce"), ("nccl:_allgather_base", "AllGather"),
    ("nccl:all_gather_into_tensor_coalesced", "AllGather"), ("nccl:_reduce_scatter_base", "ReduceScatter"),
    ("nccl:broadcast", "Broadcast"), ("nccl:reduce", "Reduce"), ("nccl:send 0->1", "SendRecv"),
    ("nccl:recv 1<-0", "SendRecv"), ("nccl:all_to_all", "SendRecv")])
def test_recorder_names(name, op):
    assert C._op(name) == op


def test_match_pairs_the_tail_in_order_and_skips_other_kernels():
    names = np.array([GEMM, AR, GEMM, AR, AR], dtype=object)
    starts = np.array([10, 20, 30, 40, 50])
    streams = np.array([7, 13, 7, 13, 13])
    # 5 collectives recorded, the last 3 ran inside the profile; seq 6 was created after it stopped
    entries = [entry(s, sizes=((s * 100,),), created=s) for s in range(1, 7)]
    m = C.match(names, starts, streams, entries, created_before_ns=5)
    assert m.notes == []
    assert m.table["kernel"].tolist() == [1, 3, 4]
    assert m.table["seq"].tolist() == [3, 4, 5]
    assert m.table["bytes"].tolist() == [1200, 1600, 2000]
    assert set(m.table["op"]) == {"AllReduce"} and set(m.table["group"]) == {"0/default_pg"}
    per = C.per_kernel_bytes(m, len(names))
    assert per.tolist() == [-1, 1200, -1, 1600, 2000]


def test_match_uses_start_order_not_arrival_order():
    names = np.array([AR, AG], dtype=object)
    m = C.match(names, np.array([50, 10]), np.array([1, 1]),
                [entry(1, "nccl:_allgather_base", out=((64,),)), entry(2)], 10**9)
    assert dict(zip(m.table["kernel"].tolist(), m.table["op"].tolist())) == {0: "AllReduce", 1: "AllGather"}


def test_a_wrapped_recorder_sizes_the_last_kernels_and_says_so():
    names = np.array([AR] * 4, dtype=object)
    m = C.match(names, np.arange(4), np.zeros(4), [entry(8), entry(9)], 10**9)
    assert m.table["kernel"].tolist() == [2, 3]
    assert "kept only the last 2 of 4" in m.notes[0]


def test_disagreeing_order_gives_no_sizes_and_a_note():
    names = np.array([AR, AG], dtype=object)
    m = C.match(names, np.array([1, 2]), np.array([3, 3]), [entry(1), entry(2)], 10**9)
    assert len(m.table) == 0 and "match no process group" in m.notes[0]


def test_two_groups_on_two_streams():
    names = np.array([AR, AR, AG], dtype=object)
    streams = np.array([1, 2, 2])
    entries = [entry(1, pg=("0", "default_pg"), sizes=((4,),)),
               entry(1, pg=("1", "tp"), sizes=((8,),)),
               entry(2, "nccl:_allgather_base", pg=("1", "tp"), sizes=((2,),), out=((4,),))]
    m = C.match(names, np.array([1, 2, 3]), streams, entries, 10**9)
    got = {int(k): (g, int(b)) for k, g, b in zip(m.table["kernel"], m.table["group"], m.table["bytes"])}
    assert got == {0: ("0/default_pg", 16), 1: ("1/tp", 32), 2: ("1/tp", 16)}


def test_no_nccl_kernels_no_rows():
    m = C.match(np.array([GEMM], dtype=object), np.array([1]), np.array([1]), [entry(1)], 10**9)
    assert len(m.table) == 0 and m.notes == []


def test_without_torch_distributed_the_reason_is_given(monkeypatch):
    import sys
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    entries, why = C.read_flight_recorder()
    assert entries is None and "not initialized" in why
