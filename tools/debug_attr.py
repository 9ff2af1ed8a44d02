import numpy as np, torch, gpuprofile as gp
x = torch.randn(1 << 20, device="cuda", requires_grad=True)
w = torch.randn(1 << 20, device="cuda", requires_grad=True)
for _ in range(2):
    (x * w).sum().backward()
torch.cuda.synchronize()
with gp.profile(memory=False) as p:
    with gp.region("forward"):
        loss = (x * w).sum()
    with gp.region("backward"):
        loss.backward()
c = p._chunk
print("events", len(c.events), c.events[:10])
print("extcorr", len(c.extcorr))
print("intervals", p._intervals())
k = p.kernels
print(k[["name", "stream", "start_ns", "end_ns", "region", "attribution", "correlation_id"]])
print(gp.records()[["name", "host_start_ns", "host_end_ns", "gpu_ms"]])
print("t0 t1", p.start_ns, p.stop_ns)
