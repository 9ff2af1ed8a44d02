"""benchmarks/bench_attention_launches.py's pure part (its arguments); its GPU run records what
flash_wgmma and SDPA's backends launch per grid case (docs/benchmarks.md, *O through shared
memory, and what cuDNN launches*)."""

import pytest
from scripts import load_benchmark

launches = load_benchmark("bench_attention_launches")


def test_arguments():
    args = launches.parse_args([])
    assert args.impls == ("gp", "cudnn", "fa2") and args.head_dims == (64, 128)
    assert not args.quick and args.output is None
    args = launches.parse_args(["--quick", "--impls", "cudnn, gp", "--head-dims", "128",
                                "--output", "x.json"])
    assert args.impls == ("cudnn", "gp") and args.head_dims == (128,) and args.quick
    assert args.output == "x.json"
    for bad in (["--impls", "cudnn,math"], ["--impls", ""], ["--impls", " , "],
                ["--head-dims", "96"]):
        with pytest.raises(SystemExit):
            launches.parse_args(bad)
