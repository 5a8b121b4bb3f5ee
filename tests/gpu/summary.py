#!/usr/bin/env python3
"""Tables of tests/gpu/torch.sh: summary.py WORKDIR [MODE…].

Per mode: the high-priority (HP) service's p50 / p99 JCT and their ratio to
the HP alone without the hook, and the low-priority (LP) service's requests
per second inside the HP's span against the LP alone. Last, the daemon's
counters at the end (WORKDIR/torch-status.json, `fikit status --json`).
"""
import json
import os
import sys


def runs(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith('{"run"'):
                    out.append(json.loads(line))
    except OSError:
        pass
    return out


def q(xs, p):
    if not xs:
        return 0
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(p * len(xs) + 0.999999) - 1))]


def span(rs):
    return (rs[0]["start_ns"], max(r["start_ns"] + r["jct_ns"] for r in rs)) if rs else (0, 0)


def rate(rs, lo, hi):
    n = sum(1 for r in rs if r["start_ns"] >= lo and r["start_ns"] + r["jct_ns"] <= hi)
    return n / ((hi - lo) / 1e9) if hi > lo else 0


def daemon_stats(path):
    """The daemon's counters at the end (`fikit status --json`, docs/status-api.md)."""
    try:
        with open(path) as f:
            s = json.load(f)["stats"]
        out = {k: s[k] for k in ("grants", "windows", "idle_periods", "early_stops", "board_stops", "unscheduled_launches")}
        if s["prediction_samples"]:
            out["prediction_mean_abs_error_ns"] = s["prediction_abs_error_sum_ns"] // s["prediction_samples"]
        return out
    except OSError:
        return {}
    except (ValueError, KeyError, TypeError) as e:
        print(f"{path}: not a status document of docs/status-api.md ({e!r})", file=sys.stderr)
        return {}


def main():
    w = sys.argv[1]
    p = lambda name: os.path.join(w, name)
    base = [r["jct_ns"] for r in runs(p("t-hp-alone-nohook.jsonl"))]
    b50 = q(base, 0.5) or 1
    la = runs(p("t-lp-alone.jsonl"))
    lp_alone = rate(la, *span(la)) if la else 0
    modes = sys.argv[2:] or ["sharing", "fikit", "fikit-udp"]
    rows = [("HP alone, no hook", "t-hp-alone-nohook.jsonl", None)]
    rows += [(m, f"t-{m}-hp.jsonl", f"t-{m}-lp.jsonl") for m in modes]
    print(f"{'mode':20} {'HP p50 ms':>10} {'p90 ms':>7} {'p99 ms':>7} {'p50 x':>6} {'p99 x':>6} {'LP req/s':>9} {'LP %alone':>9}")
    res = {"lp_alone_per_s": lp_alone, "modes": {}}
    b99 = q(base, 0.99) or 1
    for name, hpf, lpf in rows:
        hp = runs(p(hpf))
        j = [r["jct_ns"] for r in hp]
        if not j:
            print(f"{name:20} (no runs)")
            continue
        lr = rate(runs(p(lpf)), *span(hp)) if lpf else 0
        m = {"hp_p50_ns": q(j, 0.5), "hp_p90_ns": q(j, 0.9), "hp_p99_ns": q(j, 0.99), "hp_runs": len(j), "lp_per_s": lr}
        res["modes"][name] = m
        print(f"{name:20} {m['hp_p50_ns']/1e6:10.3f} {m['hp_p90_ns']/1e6:7.3f} {m['hp_p99_ns']/1e6:7.3f} "
              f"{m['hp_p50_ns']/b50:6.3f} {m['hp_p99_ns']/b99:6.3f} {lr:9.1f} {100*lr/lp_alone if lp_alone else 0:8.1f}%")
    print(f"LP alone: {lp_alone:.1f} requests/s")
    st = daemon_stats(p("torch-status.json"))
    if st:
        res["daemon"] = st
        print("daemon: " + ", ".join(f"{k} {v}" for k, v in st.items()))
    with open(p("torch-summary.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
