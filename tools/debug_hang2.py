import faulthandler, threading, torch, gpuprofile as gp
faulthandler.dump_traceback_later(20, exit=True)
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.randn(1 << 20, device="cuda")
go = threading.Barrier(2)
def other():
    with torch.cuda.stream(s2):
        print("other waits", flush=True)
        go.wait()
        print("other passed", flush=True)
        for _ in range(20):
            torch.cuda._sleep(20_000)
            x.add_(1)
with gp.profile(memory=False) as p:
    t = threading.Thread(target=other)
    t.start()
    print("main enters", flush=True)
    with torch.cuda.stream(s1):
        print("main in stream", flush=True)
        r = gp.region("mine", stream=s1)
        print("main made region", flush=True)
        with r:
            print("main in region", flush=True)
            go.wait()
            for _ in range(20):
                torch.cuda._sleep(20_000)
                x.mul_(1.0)
    t.join()
    torch.cuda.synchronize()
print("ok", len(p.kernels))
