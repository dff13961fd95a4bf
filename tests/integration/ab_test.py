"""`ftcore ab` end to end on a tiny Llama (tests/reference/tiny_training.py):

- bad input: a missing arm file, an unknown key in an arm's `set`, one seed,
  identical arms -> each a located error, exit 2;
- pairing (common random numbers): arms that differ only in a logger give
  per-seed deltas of exactly 0; arms that differ in the optimizer log the same
  batch_hash at every step of a seed;
- a planted effect (lr 10x smaller) is judged worse with 5 seeds, and the
  A/A arm (--aa) "no detectable difference";
- the statistics of the real summary.json equal scipy.stats' (ttest_rel,
  wilcoxon) to 1e-9;
- SIGKILL of `ftcore ab` midway, then a rerun: finished runs are not trained
  again, and summary.json equals an uninterrupted experiment's (--jobs 2),
  timings aside;
- report.html renders in headless Chromium with its plots drawn.

Usage: ab_test.py FTCORE_BINARY
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

from scipy import stats  # noqa: E402

TIMING = {"wall_seconds", "tokens_per_second", "peak_rss_mb"}


def recipe(out, name, model, data, lr=5e-3, extra=""):
    text = f"""[model]
path = {json.dumps(model)}

[data]
path = {json.dumps(data)}
format = "alpaca"
sequence_len = 64
val_set_size = 0.25

[train]
micro_batch_size = 4
max_steps = 9
eval_steps = 3
logging_steps = 1
precision = "fp32"
seed = 1

[adapter]
name = "lora"
r = 4
alpha = 8.0
dropout = 0.1
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]

[optimizer]
name = "adamw"
lr = {lr}

[scheduler]
name = "constant"

[[logger]]
name = "jsonl"
{extra}"""
    path = os.path.join(out, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def env():
    e = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    e.pop("FTCORE_NUM_THREADS", None)
    return e


def ab(ftcore, *args, check=True):
    p = subprocess.run([ftcore, "ab", *args], env=env(), capture_output=True, text=True, timeout=900)
    if check and p.returncode != 0:
        raise SystemExit(f"ftcore ab {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def expect_usage_error(ftcore, label, args, needle):
    p = ab(ftcore, *args, check=False)
    assert p.returncode == 2, f"{label}: exit {p.returncode}, expected 2:\n{p.stdout}\n{p.stderr}"
    assert needle in p.stderr, f"{label}: the error does not say {needle!r}:\n{p.stderr}"
    first = p.stderr.strip().splitlines()[0]
    print(f"bad input ({label}): exit 2: {first[:160]}")


def check_bad_input(ftcore, out, control):
    missing = os.path.join(out, "nope.toml")
    expect_usage_error(ftcore, "missing arm file", [control, missing, "--seeds", "2", "--out", f"{out}/x"], "nope.toml")
    exp = os.path.join(out, "bad_set.toml")
    with open(exp, "w") as f:
        f.write(f'[experiment]\nbase = "{os.path.basename(control)}"\nseeds = 2\n\n'
                '[[arm]]\nname = "a"\n\n[[arm]]\nname = "b"\nset = { "optimizer.lrr" = 1e-3 }\n')
    expect_usage_error(ftcore, "unknown key in set", [exp, "--out", f"{out}/y"], "bad_set.toml:8:1")
    expect_usage_error(ftcore, "one seed", [control, control.replace("control", "lowlr"), "--seed-list", "3",
                                            "--out", f"{out}/z"], "at least two distinct seeds")
    twin = os.path.join(out, "twin.toml")
    shutil.copy(control, twin)
    expect_usage_error(ftcore, "identical arms", [control, twin, "--seeds", "2", "--out", f"{out}/w"], "same settings")


def summary(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        return json.load(f)


def train_hashes(run_dir):
    hashes = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "train" and "batch_hash" in r:
                hashes[r["step"]] = r["batch_hash"]
    return hashes


def check_pairing(ftcore, out, control, model, data):
    logger_arm = recipe(out, "csvlog", model, data, extra='\n[[logger]]\nname = "csv"\n')
    lion_arm = recipe(out, "lion", model, data, extra="").replace("lion.toml", "lion.toml")
    with open(lion_arm) as f:
        text = f.read().replace('name = "adamw"\nlr = 0.005', 'name = "lion"\nlr = 0.0005')
    with open(lion_arm, "w") as f:
        f.write(text)
    folder = os.path.join(out, "pairing")
    ab(ftcore, control, logger_arm, lion_arm, "--seeds", "2", "--out", folder)
    s = summary(folder)
    for metric, arms in s["statistics"].items():
        if metric in TIMING:
            continue
        assert all(d == 0.0 for d in arms["csvlog"]["deltas"]), f"logger-only arm: {metric} deltas {arms['csvlog']['deltas']}"
    for seed in (1, 2):
        a = train_hashes(os.path.join(folder, "runs", "control", f"seed-{seed}"))
        b = train_hashes(os.path.join(folder, "runs", "lion", f"seed-{seed}"))
        assert len(a) == 9 and a == b, f"seed {seed}: adamw and lion saw different batches:\n{a}\n{b}"
    seeds_differ = train_hashes(os.path.join(folder, "runs", "control", "seed-1")) != \
        train_hashes(os.path.join(folder, "runs", "control", "seed-2"))
    assert seeds_differ, "seeds 1 and 2 saw the same batches: the seed does not reach the data order"
    print("pairing: a logger-only arm has deltas exactly 0 on every metric but timings; "
          "adamw and lion see the same 9 batch hashes per seed (and seeds differ)")


def comparable(s):
    runs = sorted(((r["arm"], r["seed"], {k: v for k, v in r["metrics"].items() if k not in TIMING}) for r in s["runs"]),
                  key=lambda x: (x[0], x[1]))
    statistics = {m: v for m, v in s["statistics"].items() if m not in TIMING}
    return runs, statistics, s["verdicts"]


def check_against_scipy(s):
    metric = "final_eval_loss"
    by = {(r["arm"], r["seed"]): r["metrics"][metric] for r in s["runs"]}
    for arm, c in s["statistics"][metric].items():
        seeds = s["experiment"]["seeds"]
        control = [by[("control", k)] for k in seeds]
        treat = [by[(arm, k)] for k in seeds]
        deltas = [b - a for a, b in zip(control, treat)]
        t = stats.ttest_rel(treat, control)
        if all(d == 0 for d in deltas):  # identical runs (the A/A arm on a deterministic CPU): scipy says nan
            assert c["t_p_value"] == 1.0 and c["verdict"] == "no detectable difference", f"{arm}: {c}"
            continue
        assert abs(t.pvalue - c["t_p_value"]) <= 1e-9, f"{arm}: t p {c['t_p_value']} vs scipy {t.pvalue}"
        if any(d != 0 for d in deltas):
            w = stats.wilcoxon(deltas)
            assert abs(w.pvalue - c["wilcoxon_p_value"]) <= 1e-9, f"{arm}: Wilcoxon p {c['wilcoxon_p_value']} vs {w.pvalue}"
    print("summary.json statistics equal scipy.stats.ttest_rel and wilcoxon on the real runs (1e-9)")


def done_runs(folder):
    n = 0
    for root, _, files in os.walk(os.path.join(folder, "runs")):
        n += "ab_result.json" in files
    return n


def check_planted_effect_and_resume(ftcore, out, control, lowlr):
    # --jobs 2 in both: the thread count per run (cores / jobs) changes float
    # reduction order, so experiments compare at the same jobs.
    args = [control, lowlr, "--seeds", "5", "--aa", "--jobs", "2"]
    whole = os.path.join(out, "planted_whole")
    ab(ftcore, *args, "--out", whole)
    s = summary(whole)
    assert s["verdicts"]["lowlr"] == "worse", f"lr / 10 judged {s['verdicts']['lowlr']}: {s['statistics']['final_eval_loss']['lowlr']}"
    assert s["verdicts"]["control-aa"] == "no detectable difference", f"A/A judged {s['verdicts']['control-aa']}"
    c = s["statistics"]["final_eval_loss"]["lowlr"]
    print(f"planted effect: lr/10 {c['verdict']} (mean delta {c['mean_delta']:.4f}, CI {c['ci95']}, Holm p "
          f"{c['holm_p_value']:.2g}); A/A: {s['verdicts']['control-aa']}")
    check_against_scipy(s)

    killed = os.path.join(out, "planted_killed")
    p = subprocess.Popen([ftcore, "ab", *args, "--out", killed], env=env(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while done_runs(killed) < 5 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.7)  # into the next run
    p.send_signal(signal.SIGKILL)
    p.wait()
    finished = done_runs(killed)
    assert 0 < finished < 15, f"the kill landed outside the experiment ({finished} of 15 runs done)"
    stamps = {}
    for root, _, files in os.walk(os.path.join(killed, "runs")):
        if "ab_result.json" in files:
            stamps[root] = os.path.getmtime(os.path.join(root, "adapter_model.safetensors"))
    time.sleep(1.0)  # no orphan run may still be writing
    again = ab(ftcore, *args, "--out", killed)
    for root, stamp in stamps.items():
        assert os.path.getmtime(os.path.join(root, "adapter_model.safetensors")) == stamp, f"{root} was trained again"
    got, want = comparable(summary(killed)), comparable(s)
    if got != want:
        diffs = [(a, b) for a, b in zip(got[0], want[0]) if a != b][:3]
        raise SystemExit(f"after a kill and a rerun, summary.json differs from the uninterrupted one: runs {diffs}; "
                         f"statistics equal: {got[1] == want[1]}; verdicts {got[2]} vs {want[2]}")
    print(f"SIGKILL after {finished} of 15 runs, rerun: those runs untouched; summary.json equals the uninterrupted "
          f"experiment's, timings aside")
    return whole, again


def check_report_renders(folder):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        raise SystemExit("chromium is not installed (third_party/bootstrap.sh installs it)")
    png = os.path.join(folder, "report.png")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                    "--window-size=1200,1400", "file://" + os.path.join(folder, "report.html")],
                   capture_output=True, timeout=120, check=True)
    from PIL import Image
    image = Image.open(png).convert("RGB")
    pixels = [image.getpixel((x, y)) for y in range(image.height) for x in range(image.width)]
    # Arm colours of the plots: lowlr red (#d62728); the A/A arm green (#2ca02c), drawn over
    # the control's identical curve. Text is black, so coloured pixels are plot marks.
    lowlr_red = sum(1 for (r, g, b) in pixels if r > 170 and g < 90 and b < 90)
    aa_green = sum(1 for (r, g, b) in pixels if r < 90 and g > 130 and b < 90)
    assert aa_green > 300 and lowlr_red > 300, f"the plots are not drawn ({aa_green} green, {lowlr_red} red pixels)"
    print(f"report.html rendered by headless Chromium: {aa_green} green (A/A) and {lowlr_red} red (lr/10) plot pixels")


def main():
    ftcore = os.path.abspath(sys.argv[1])
    tt.require_default_tokenizer()
    with tempfile.TemporaryDirectory() as out:
        model, data = tt.make_model(out), tt.make_data(out, rows=64)
        control = recipe(out, "control", model, data)
        lowlr = recipe(out, "lowlr", model, data, lr=5e-4)
        check_bad_input(ftcore, out, control)
        check_pairing(ftcore, out, control, model, data)
        whole, _ = check_planted_effect_and_resume(ftcore, out, control, lowlr)
        check_report_renders(whole)
    print("ab: all checks passed")


if __name__ == "__main__":
    main()
