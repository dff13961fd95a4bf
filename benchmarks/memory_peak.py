"""What is live at the peak of an FTCORE_PROFILE window recorded with
FTCORE_PROFILE_MEMORY=1 (core/include/ftcore/op_profile.h), and which op
allocated it: issue #14 item 4's breakdown of a step's peak.

The trace's "[memory]" events are libtorch's CPU allocations and frees (bytes,
address, "Total Allocated": bytes the allocator holds for tensors, counted
from the window's start, so memory that was live before the window — weights,
optimizer state — is not in it). The script replays them to the event with the
highest total, keeps the blocks still live there, and groups them by the
innermost op (and the two around it) whose time range holds the allocation,
split by phase (ftcore::forward_loss, ftcore::backward, ...). Blocks under
--small bytes are one line.

usage: memory_peak.py TRACE.json [--top 20] [--small 1048576]
"""
import argparse
import collections
import json


def innermost(ops, ts):
    holding = [o for o in ops if o["ts"] <= ts <= o["ts"] + o["dur"]]
    holding.sort(key=lambda o: o["dur"])
    return holding


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--small", type=int, default=1 << 20)
    args = p.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    if not memory:
        raise SystemExit(f"{args.trace}: no [memory] events; record it with FTCORE_PROFILE_MEMORY=1")
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    phases = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
              and e["name"] in ("ftcore::forward_loss", "ftcore::backward", "ftcore::optimizer",
                                "ftcore::clip_gradients", "ftcore::collate")]
    peak = max(memory, key=lambda e: e["args"].get("Total Allocated", 0))
    live = {}
    for e in memory:
        if e["ts"] > peak["ts"]:
            break
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = (a["Bytes"], e["ts"])
        else:
            live.pop(a["Addr"], None)

    def phase_of(ts):
        for ph in phases:
            if ph["ts"] <= ts <= ph["ts"] + ph["dur"]:
                return ph["name"].removeprefix("ftcore::")
        return "outside a phase"

    groups = collections.defaultdict(lambda: [0, 0])
    for size, ts in live.values():
        if size < args.small:
            key = f"blocks under {args.small / 2**20:g} MiB"
        else:
            names = [o["name"] for o in innermost(ops, ts)[:3]]
            key = f"{phase_of(ts)}: {' < '.join(names) or '(no op)'}"
        groups[key][0] += size
        groups[key][1] += 1
    total = sum(size for size, _ in live.values())
    print(f"peak: {peak['args']['Total Allocated'] / 2**20:,.1f} MiB allocated since the window began, "
          f"in {phase_of(peak['ts'])}, inside {' < '.join(o['name'] for o in innermost(ops, peak['ts'])[:3])}")
    print(f"live at the peak: {total / 2**20:,.1f} MiB in {len(live)} blocks")
    print(f"{'MiB':>9}  {'blocks':>6}  allocated by")
    for key, (size, count) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{size / 2**20:9.1f}  {count:6d}  {key}")


if __name__ == "__main__":
    main()
