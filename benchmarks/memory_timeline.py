"""Where a process's resident memory goes over its run (issue #14 item 4):
runs COMMAND, samples /proc/PID/smaps_rollup every INTERVAL seconds, and
splits the resident set into anonymous memory (heap: weights, activations,
logits, gradients, optimizer state, allocator caches) and file-backed pages
(the shared libraries, memory-mapped weight files). At each new peak it also
reads /proc/PID/smaps to name the files holding the file-backed pages.

The command's stderr lines (ftcore's log) mark phases: the table gives, per
phase (from one log line to the next), the highest RSS, anonymous and
file-backed memory seen, so a peak is placed in model loading, data
preparation, evaluation or a training step. The kernel's own count of the
peak (VmHWM, read just before the process ends) is printed beside the
sampled one; a peak shorter than INTERVAL can fall between samples.

usage: memory_timeline.py [--interval 0.05] [--json OUT] -- COMMAND [ARGS...]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time


def read_rollup(pid):
    values = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                values[parts[0][:-1]] = int(parts[1])  # kB
    return values


def read_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def file_pages(pid):
    """Resident kB per mapped file (anonymous mappings left out)."""
    per_file, current = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(maxsplit=5)
            if "-" in first[0] and len(first) >= 5 and not first[0].endswith(":"):
                current = first[5].strip() if len(first) == 6 and first[5].startswith("/") else None
            elif current and first[0] == "Rss:":
                per_file[current] = per_file.get(current, 0) + int(first[1])
    return per_file


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--json")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.exit("memory_timeline.py: no command (usage: memory_timeline.py [--interval S] -- COMMAND ...)")

    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    phases = [{"phase": "(start)", "t": 0.0, "rss": 0, "anon": 0, "file": 0}]
    lock = threading.Lock()

    def read_log():
        for line in proc.stderr:
            text = line.strip()
            if not text or "\r" in line:
                continue
            with lock:
                phases.append({"phase": text[:110], "t": time.monotonic() - start, "rss": 0, "anon": 0, "file": 0})

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    peak, peak_files, peak_phase, hwm, files_at = 0, {}, "", 0, 0
    while proc.poll() is None:
        try:
            r = read_rollup(proc.pid)
            hwm = max(hwm, read_hwm(proc.pid))  # a zombie's status has no VmHWM
        except (FileNotFoundError, ProcessLookupError):
            break
        rss, anon = r.get("Rss", 0), r.get("Anonymous", 0)
        with lock:
            phase = phases[-1]
            phase["rss"] = max(phase["rss"], rss)
            phase["anon"] = max(phase["anon"], anon)
            phase["file"] = max(phase["file"], rss - anon)
            name = phase["phase"]
        if rss > peak:
            peak, peak_phase = rss, name
            if rss > 1.02 * files_at:  # smaps is costly to read: again only after 2% more
                try:
                    peak_files, files_at = file_pages(proc.pid), rss
                except (FileNotFoundError, ProcessLookupError):
                    pass
        time.sleep(args.interval)
    proc.wait()
    reader.join(timeout=5)

    mb = lambda kb: kb / 1024
    print(f"exit {proc.returncode}; sampled peak RSS {mb(peak):,.0f} MB in phase: {peak_phase}")
    print(f"kernel peak (VmHWM, last read) {mb(hwm):,.0f} MB")
    print(f"{'t (s)':>7} {'RSS MB':>8} {'anon MB':>8} {'file MB':>8}  phase (the log line that opened it)")
    for ph in phases:
        if ph["rss"]:
            print(f"{ph['t']:7.1f} {mb(ph['rss']):8,.0f} {mb(ph['anon']):8,.0f} {mb(ph['file']):8,.0f}  {ph['phase']}")
    print("file-backed pages near the peak, by file:")
    for path, kb in sorted(peak_files.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {mb(kb):8,.0f} MB  {path}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "exit": proc.returncode, "peak_kb": peak, "vm_hwm_kb": hwm,
                       "peak_phase": peak_phase, "phases": phases, "peak_files_kb": peak_files}, f, indent=1)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
