"""Wall time of `ftcore validate RECIPE` (process start, libtorch load, plugin
loading, recipe validation), median of N runs, next to `ftcore --help` (process
start and libtorch load only) measured in the same run as the baseline.
Target (issue #2): validate < 0.3 s.

usage: cli_wall_time.py BUILD_DIR RECIPE [RUNS]
"""
import os
import statistics
import subprocess
import sys
import time


def median_wall(cmd, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, FTCORE_PLUGIN_PATH=""))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    build, recipe = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    ftcore = os.path.join(build, "bin", "ftcore")
    baseline = median_wall([ftcore, "--help"], runs)
    validate = median_wall([ftcore, "validate", recipe], runs)
    plugins = median_wall([ftcore, "plugins"], runs)
    print(f"ftcore --help            {baseline * 1000:7.1f} ms (baseline: process + libtorch load)")
    print(f"ftcore plugins           {plugins * 1000:7.1f} ms")
    print(f"ftcore validate {os.path.basename(recipe):8s} {validate * 1000:7.1f} ms  "
          f"(target < 300 ms: {'met' if validate < 0.3 else 'MISSED'}; "
          f"{(validate - baseline) * 1000:.1f} ms over the baseline)")


if __name__ == "__main__":
    main()
