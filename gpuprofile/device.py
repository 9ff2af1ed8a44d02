"""Device properties and the theoretical peaks derived from them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from . import _C
from ._format import html_table, text_table

# FP32 lanes (FMA units) per SM, by compute capability.
_FP32_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
               (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128, (12, 1): 128}
# Dense FP16/BF16 tensor-core FLOP per clock per SM with FP32 accumulation, where NVIDIA's
# datasheets fix it for the whole family (V100, A100, H100/H200). Other chips: not derivable.
_TENSOR_FP16_FLOP_PER_CLK = {(7, 0): 1024, (8, 0): 2048, (9, 0): 4096}


@dataclass(frozen=True)
class DeviceInfo:
    """Properties of one CUDA device, with theoretical peaks computed at the maximum SM clock the
    driver reports (datasheets often quote a lower boost clock for tensor peaks). Peaks are None
    where they are not derivable from the properties."""

    index: int
    name: str
    compute_capability: tuple
    sm_count: int
    total_memory_bytes: int
    l2_cache_bytes: int
    sm_clock_mhz: float
    memory_clock_mhz: float
    memory_bus_width_bits: int
    peak_dram_gbps: float
    peak_fp32_tflops: float | None
    peak_fp16_tensor_tflops: float | None
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    shared_memory_per_sm: int
    shared_memory_per_block_optin: int
    warp_size: int
    uuid: str
    pci_bus_id: str
    ecc_enabled: bool

    def to_dict(self) -> dict:
        return asdict(self)

    def _rows(self):
        cc = "{}.{}".format(*self.compute_capability)
        return [
            ["name", self.name], ["index", self.index], ["compute capability", cc],
            ["SMs", self.sm_count], ["memory GiB", self.total_memory_bytes / 2**30],
            ["L2 MiB", self.l2_cache_bytes / 2**20], ["max SM clock MHz", self.sm_clock_mhz],
            ["memory clock MHz", self.memory_clock_mhz],
            ["memory bus bits", self.memory_bus_width_bits],
            ["peak DRAM GB/s", self.peak_dram_gbps], ["peak FP32 TFLOP/s", self.peak_fp32_tflops],
            ["peak FP16 tensor TFLOP/s (dense)", self.peak_fp16_tensor_tflops],
            ["PCI bus id", self.pci_bus_id],
        ]

    def __repr__(self) -> str:
        return text_table(["device", str(self.index)], self._rows()[1:], title=f"DeviceInfo: {self.name}")

    def _repr_html_(self) -> str:
        return html_table(["property", "value"], self._rows())


def device_count() -> int:
    """Number of CUDA devices; 0 on a machine without a GPU or driver. Never raises."""
    return _C.device_count()


def device_info(index: int = 0) -> DeviceInfo:
    """Properties and theoretical peaks of device `index`. Raises NoDeviceError without a device,
    IndexError for an index out of range."""
    p = _C._device_properties(index)
    cc = (p["major"], p["minor"])
    sm_ghz = p["sm_clock_khz"] / 1e6
    # DDR/HBM transfer twice per memory clock.
    peak_dram = 2 * p["memory_clock_khz"] * 1e3 * p["memory_bus_width_bits"] / 8 / 1e9
    lanes = _FP32_LANES.get(cc)
    fp32 = p["sm_count"] * lanes * 2 * sm_ghz / 1e3 if lanes else None
    per_clk = _TENSOR_FP16_FLOP_PER_CLK.get(cc)
    tensor = p["sm_count"] * per_clk * sm_ghz / 1e3 if per_clk else None
    return DeviceInfo(
        index=index, name=p["name"], compute_capability=cc, sm_count=p["sm_count"],
        total_memory_bytes=p["total_memory"], l2_cache_bytes=p["l2_cache_bytes"],
        sm_clock_mhz=p["sm_clock_khz"] / 1e3, memory_clock_mhz=p["memory_clock_khz"] / 1e3,
        memory_bus_width_bits=p["memory_bus_width_bits"], peak_dram_gbps=peak_dram,
        peak_fp32_tflops=fp32, peak_fp16_tensor_tflops=tensor,
        max_threads_per_sm=p["max_threads_per_sm"], max_blocks_per_sm=p["max_blocks_per_sm"],
        registers_per_sm=p["registers_per_sm"], shared_memory_per_sm=p["shared_memory_per_sm"],
        shared_memory_per_block_optin=p["shared_memory_per_block_optin"], warp_size=p["warp_size"],
        uuid=p["uuid"], pci_bus_id=p["pci_bus_id"], ecc_enabled=bool(p["ecc_enabled"]),
    )
