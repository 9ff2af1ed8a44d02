import numpy as np, torch, gpuprofile as gp
from gpuprofile import _activity
C = gp._C
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
pre = torch.cuda.Event(enable_timing=True)
C._activity_acquire(_activity.REGIONS | _activity.KERNELS)
e1 = torch.cuda.Event(enable_timing=True)
e1.record(); x.mul_(2); pre.record()
e2 = torch.cuda.Event()
e2.record()
with gp.region("r"):
    x.mul_(2)
torch.cuda.synchronize()
e1.synchronize(); e2.query()
ch = _activity.collect(True)
print("events after (new event, reused pre, no-timing, region)", len(ch.events), ch.events)
print("kernels", len(ch.kernels), "extcorr", len(ch.extcorr))
C._activity_release(_activity.REGIONS | _activity.KERNELS)
