#!/usr/bin/env python3
"""Tables of tests/gpu/calibrate.sh.

  calibrate.py probe GPU.jsonl SIM.jsonl   switch-probe on the GPU beside simgpu's h200 preset
  calibrate.py free WORKDIR NAME...         switch-probe --free requests beside each LP
  calibrate.py pair GPU.json SIM.json REC.jsonl   the recorded pair replayed on both
"""
import json
import os
import sys


def lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def q(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5)))]


def probe(gpu, sim):
    g = {(r["case"], r["variant"]): r for r in lines(gpu)}
    s = {(r["case"], r["variant"]): r for r in lines(sim)}
    keys = list(g) + [k for k in s if k not in g]
    print(f"{'case':9} {'variant':30} {'GPU p50 (p10-p90) us':>24} {'simgpu h200 p50 us':>19}")
    for k in keys:
        a, b = g.get(k), s.get(k)
        ga = f"{a['p50_us']:.1f} ({a['p10_us']:.1f}-{a['p90_us']:.1f})" if a else "-"
        sb = f"{b['p50_us']:.1f}" if b else "-"
        print(f"{k[0]:9} {k[1]:30} {ga:>24} {sb:>19}")
    print("(delays against the same request after the context's own work; 'itself' rows and the cache and")
    print(" slice rows are absolute times; simgpu models no cache, so its two cache rows are equal)")


def runs(path):
    return [r for r in lines(path) if "run" in r and "jct_ns" in r]


def free(work, names):
    base = [r["jct_ns"] for r in lines(os.path.join(work, "free-alone.jsonl")) if "jct_ns" in r]
    b50 = q(base, 0.5)
    print(f"probe request alone: p50 {b50 / 1e3:.1f} us over {len(base)} requests")
    print("requests after an LP request with none of this context's inside it (they may pay the switch back),")
    print("by how long the LP had been idle; 'LP running': requests made while the LP's ran (they wait for")
    print("its time slice)")
    print(f"{'beside':18} {'LP idle since':14} {'n':>4} {'delay p50 us':>13} {'p90 us':>8}")
    for name in names:
        if name == "alone":
            continue
        reqs = [r for r in lines(os.path.join(work, f"free-{name}.jsonl")) if "jct_ns" in r]
        lp = sorted((r["start_ns"], r["start_ns"] + r["jct_ns"]) for r in runs(os.path.join(work, f"free-{name}-lp.jsonl")))
        # A request that may pay the switch back from the LP: none of this
        # context's requests ran during the LP's last request, which left
        # the LP's context loaded.
        bins = {}
        prev_end = 0
        for r in sorted(reqs, key=lambda r: r["start_ns"]):
            t = r["start_ns"]
            label = None
            last = None
            for s, e in lp:
                if s <= t < e:
                    label = "LP running"
                    break
                if e <= t:
                    last = (s, e)
            if label is None:
                if last is None or prev_end > last[0]:
                    prev_end = t + r["jct_ns"]
                    continue
                gap = (t - last[1]) / 1e6
                label = next(l for lim, l in ((1, "0-1 ms"), (5, "1-5 ms"), (20, "5-20 ms"), (1e18, ">20 ms")) if gap < lim)
            prev_end = t + r["jct_ns"]
            bins.setdefault(label, []).append(r["jct_ns"] - b50)
        for label in ("0-1 ms", "1-5 ms", "5-20 ms", ">20 ms", "LP running"):
            d = bins.get(label, [])
            if d:
                print(f"{name:18} {label:14} {len(d):4} {q(d, 0.5) / 1e3:13.1f} {q(d, 0.9) / 1e3:8.1f}")


def pair(gpu, sim, rec):
    rj = [r["jct_ns"] for r in runs(rec)]
    if rj:
        print(f"recorded CUDA-graph request alone (PyTorch): p50 {q(rj, 0.5) / 1e6:.3f} ms")
    print(f"{'':10} {'HP alone p50':>12} {'sharing p50':>12} {'fikit p10':>10} {'fikit p50':>10} {'fikit p99':>10} {'LP fikit % alone':>17}")
    for label, path in (("GPU", gpu), ("simgpu", sim)):
        try:
            r = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"{label:10} (no result: {e})")
            continue
        a = r["alone"]["hp_p50_ns"]
        sh, fk = r["default_sharing"], r["fikit"]
        p10 = fk.get("hp_p10_ns", 0)
        la = r.get("lp_alone_runs_per_s") or 0
        lp = 100 * fk["lp_runs_per_s"] / la if la else 0
        print(f"{label:10} {a / 1e6:10.3f}ms {sh['hp_p50_ns'] / a:11.2f}x {p10 / a if p10 else 0:9.2f}x "
              f"{fk['hp_p50_ns'] / a:9.2f}x {fk['hp_p99_ns'] / a:9.2f}x {lp:16.0f}%")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    cmd = sys.argv[1]
    if cmd == "probe":
        probe(sys.argv[2], sys.argv[3])
    elif cmd == "free":
        free(sys.argv[2], sys.argv[3:])
    elif cmd == "pair":
        pair(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
