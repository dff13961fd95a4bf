"""Turn an FTCORE_PROFILE trace (core/include/ftcore/op_profile.h; any
Kineto Chrome trace) into the table of docs/benchmarks.md: the ftcore::
phase ranges with their inclusive time, then the ATen ops by SELF time (an
op's time minus the ops it called), each with its call count and share of
the profiled window.

usage: profile_table.py TRACE.json [--top 25]
"""
import argparse
import collections
import json


def self_times(events):
    """Self time per op name: each thread's events nested by [ts, ts + dur)."""
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    total = collections.Counter()
    calls = collections.Counter()
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, time taken by children]
        for e in evs:
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                done, children = stack.pop()
                total[done["name"]] += done["dur"] - children
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
            calls[e["name"]] += 1
        while stack:
            done, children = stack.pop()
            total[done["name"]] += done["dur"] - children
    return total, calls


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    with open(a.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    phases = [e for e in events if e["name"].startswith("ftcore::")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    start = min(e["ts"] for e in events)
    window_us = max(e["ts"] + e["dur"] for e in events) - start
    print(f"profiled window {window_us / 1e3:.1f} ms; {len(ops)} ATen op calls")
    print("\n| phase (inclusive) | ms | share |\n|---|---|---|")
    phase_ms = collections.Counter()
    for e in phases:
        phase_ms[e["name"]] += e["dur"]
    for name, us in phase_ms.most_common():
        print(f"| {name} | {us / 1e3:.1f} | {100 * us / window_us:.1f}% |")
    total, calls = self_times(ops)
    print(f"\n| op (self time) | calls | ms | share |\n|---|---|---|---|")
    for name, us in total.most_common(a.top):
        print(f"| {name} | {calls[name]} | {us / 1e3:.1f} | {100 * us / window_us:.1f}% |")
    rest = sum(total.values()) - sum(us for _, us in total.most_common(a.top))
    print(f"| (other ops) | | {rest / 1e3:.1f} | {100 * rest / window_us:.1f}% |")
    outside = window_us - sum(total.values())
    print(f"| (between ops: ftcore code, dispatch, allocation outside ops) | | {outside / 1e3:.1f} | "
          f"{100 * outside / window_us:.1f}% |")


if __name__ == "__main__":
    main()
