#!/usr/bin/env python3
"""A PyTorch service for checking fikit on a real GPU.

Builds a model with random weights (nothing is downloaded), then serves
requests: one forward pass each, ended by torch.cuda.synchronize() (the
device synchronisation that ends a run for fikit's hook). With --interval
requests arrive every INTERVAL ms (open loop: a late request starts at once);
without it they run back to back until --runs or SIGTERM.

--graph captures the forward pass once as a CUDA graph (torch.cuda.graph,
static input) and serves each request with one graph replay: one launch
per request. --train runs training steps instead of requests: zero_grad,
forward, loss, backward, an SGD step, then loss.item(), the synchronisation
that ends each step.

With --trace-dir, torch.profiler records the GPU's kernels for a while, the
ground truth of who ran when: the service started --trace-lead (the HP)
records requests --trace-from to --trace-from + --trace-runs and marks the
window with files in the directory; the other records while the marks say
the window is open. Each writes DIR/<pid>.json (Chrome trace format); every
request inside the window is marked with a "fikit.run N" annotation, which
`fikit-replay convert --torch-profile` turns into a replay trace.

Output, one JSON object per line (the shape of fikit-replay --json):
  {"ready": true}                             after warm-up
  {"run": i, "start_ns": …, "jct_ns": …}      per request (CLOCK_MONOTONIC)
  {"summary": {"runs": n, "p50_ns": …, "p99_ns": …}, "pid": …}
"""
import argparse
import json
import os
import signal
import sys
import time

import torch


def build(name, batch):
    if name == "bert":
        from transformers import BertConfig, BertModel

        model = BertModel(BertConfig())
        x = torch.randint(0, 30000, (batch, 128))
    else:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(batch, 3, 224, 224)
    return model.eval().cuda(), x.cuda()


class Tracer:
    """A torch.profiler window shared by two services through marker files."""

    def __init__(self, a):
        os.makedirs(a.trace_dir, exist_ok=True)
        self.a, self.prof, self.done = a, None, False
        self.start, self.stop = os.path.join(a.trace_dir, "start"), os.path.join(a.trace_dir, "stop")

    def step(self, i):
        a = self.a
        if self.done:
            return
        if self.prof is None:
            go = i == a.trace_from if a.trace_lead else os.path.exists(self.start)
            if go:
                from torch.profiler import ProfilerActivity, profile

                self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
                self.prof.__enter__()
                if a.trace_lead:
                    open(self.start, "w").close()
            return
        if (a.trace_lead and i >= a.trace_from + a.trace_runs) or (not a.trace_lead and os.path.exists(self.stop)):
            self.close()

    def mark(self, i):
        """The annotation of request i while the window is open (else None)."""
        if self.prof is None or self.done:
            return None
        from torch.profiler import record_function

        return record_function(f"fikit.run {i}")

    def close(self):
        if self.prof is None or self.done:
            return
        torch.cuda.synchronize()
        self.prof.__exit__(None, None, None)
        self.done = True
        if self.a.trace_lead:
            open(self.stop, "w").close()
        self.prof.export_chrome_trace(os.path.join(self.a.trace_dir, f"{os.getpid()}.json"))


class Graphed:
    """The model's forward pass captured once as a CUDA graph on a static input."""

    def __init__(self, model, x):
        self.x = x
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.out = model(x)

    def __call__(self, _x):
        self.g.replay()
        return self.out


class Trainer:
    """One training step per call: zero_grad, forward, loss, backward, SGD."""

    def __init__(self, model, x, bert):
        self.model, self.x, self.bert = model.train(), x, bert
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        self.y = None if bert else torch.randint(0, 1000, (x.shape[0],), device=x.device)

    def __call__(self, x):
        self.opt.zero_grad()
        out = self.model(x)
        if self.bert:
            loss = out.last_hidden_state.float().pow(2).mean()
        else:
            loss = torch.nn.functional.cross_entropy(out, self.y)
        loss.backward()
        self.opt.step()
        return loss.item()  # the synchronisation that ends the step


def quantile(xs, q):
    if not xs:
        return 0
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(q * len(xs) + 0.999999) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", help="a torchvision model name, or bert")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0, help="ms between request arrivals (0: back to back)")
    ap.add_argument("--graph", action="store_true", help="serve each request as one CUDA graph replay")
    ap.add_argument("--train", action="store_true", help="run training steps instead of inference requests")
    ap.add_argument("--trace-dir", help="record a torch.profiler trace into this directory")
    ap.add_argument("--trace-lead", action="store_true", help="this service opens and closes the trace window")
    ap.add_argument("--trace-from", type=int, default=100)
    ap.add_argument("--trace-runs", type=int, default=30)
    a = ap.parse_args()
    tracer = Tracer(a) if a.trace_dir else None

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    if a.graph and a.train:
        ap.error("--graph and --train exclude each other")
    torch.backends.cudnn.benchmark = False
    model, x = build(a.model, a.batch)
    run = model
    def grad():
        return torch.enable_grad() if a.train else torch.inference_mode()

    with grad():
        if a.train:
            run = Trainer(model, x, a.model == "bert")
        elif a.graph:
            run = Graphed(model, x)
    out = sys.stdout
    jcts = []
    with grad():
        for _ in range(a.warmup):
            run(x)
            torch.cuda.synchronize()
        print(json.dumps({"ready": True}), file=out, flush=True)
        step = int(a.interval * 1e6)
        arrival = time.monotonic_ns()
        for i in range(a.runs):
            if stop:
                break
            if step:
                wait = arrival - time.monotonic_ns()
                if wait > 0:
                    time.sleep(wait / 1e9)
            if tracer:
                tracer.step(i)
            mark = tracer.mark(i) if tracer else None
            t0 = time.monotonic_ns()
            if mark:
                with mark:
                    run(x)
                    torch.cuda.synchronize()
            else:
                run(x)
                torch.cuda.synchronize()
            jct = time.monotonic_ns() - t0
            jcts.append(jct)
            print(json.dumps({"run": i, "start_ns": t0, "jct_ns": jct}), file=out, flush=True)
            arrival += step
    if tracer:
        tracer.close()
    summary = {"runs": len(jcts), "p50_ns": quantile(jcts, 0.5), "p99_ns": quantile(jcts, 0.99)}
    print(json.dumps({"summary": summary, "pid": os.getpid()}), file=out, flush=True)


if __name__ == "__main__":
    main()
