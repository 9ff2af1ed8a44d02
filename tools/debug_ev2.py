import ctypes, sys, os
import gpuprofile as gp
from gpuprofile import _activity
C = gp._C
info = C._cupti_info()
print(info)
lib = ctypes.CDLL(info["path"])
mode = sys.argv[1]
if mode == "early":
    print("enable CUDA_EVENT before CUDA init", lib.cuptiActivityEnable(36), lib.cuptiActivityEnableCudaEventDeviceTimestamps(1))
if mode == "sync":
    pass
import torch
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
C._activity_acquire(_activity.REGIONS | _activity.KERNELS)
if mode == "sync":
    print("enable SYNC", lib.cuptiActivityEnable(38))
e1 = torch.cuda.Event(enable_timing=True)
e1.record(); x.mul_(2)
with gp.region("r"):
    x.mul_(2)
e1.synchronize()
torch.cuda.synchronize()
ch = _activity.collect(True)
print(mode, "events", len(ch.events), ch.events[:4])
C._activity_release(_activity.REGIONS | _activity.KERNELS)
