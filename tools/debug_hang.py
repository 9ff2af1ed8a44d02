import faulthandler, sys, threading, torch, gpuprofile as gp
faulthandler.dump_traceback_later(25, exit=True)
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
stage = sys.argv[1]
with gp.profile(memory=False) as p:
    print("profiling", flush=True)
    if stage == "a":
        with gp.region("a", stream=s1):
            x.mul_(1)
    if stage == "b":
        with torch.cuda.stream(s1), gp.region("b", stream=s1):
            x.mul_(1)
    if stage == "c":
        with torch.cuda.stream(s1):
            print("in stream", flush=True)
            r = gp.region("c", stream=s1)
            print("made", flush=True)
            with r:
                x.mul_(1)
    print("done body", flush=True)
print(stage, "ok", len(p.kernels), flush=True)
