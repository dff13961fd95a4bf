"""core/src/ab's paired statistics (through tests/tools/ab_stats_tool) against scipy.stats.

Synthetic paired samples: normal and skewed differences at n = 3..8, 20, 50, 51
and 60; scores with ties (multiples of 1/64 and of 1/50), with zero differences
(some or all), constant nonzero differences (bitwise, and up to rounding:
k/50 scores), n = 0, 1, 2, a lower-is-better loss.
For every case:
  - deltas bit-equal to numpy's treatment - control; mean and sd (ddof 1) within 1e-12;
  - paired t: statistic and p vs scipy.stats.ttest_rel, within 1e-9 (relative, or
    absolute 1e-15 for p below 1e-6);
  - Wilcoxon: statistic equal and p within 1e-12 of scipy.stats.wilcoxon(d) with
    its defaults (and, for n <= 13, of a brute-force sum over the 2^n sign flips);
  - probability of improvement and d_z vs numpy within 1e-12;
  - minimum detectable effect vs the power equation solved here with scipy.stats.nct
    and scipy.optimize.brentq, within 1e-9 relative;
  - BCa: the acceleration within 1e-9 of a jackknife computed here from its
    definition; the CI endpoints and z0 at 10000 and at 10^6 resamples vs
    scipy.stats.bootstrap(method='BCa', n_resamples=10^6). Both sides are Monte
    Carlo, so the tolerance is derived per endpoint: the level at which each
    side reads its quantile has a Monte-Carlo sd (binomial sd of a quantile at
    B resamples, plus z0's sd carried through the BCa level formula); the
    tolerance is how far scipy's 10^6-resample quantile function moves when the
    level moves by 4 of those sds (about 0.1-0.2 x se(mean) at 10000 resamples and
    0.02 x se at 10^6 for smooth cases, up to an atom's gap where few seeds make
    the bootstrap distribution discrete; it is printed), and it must stay below
    1 x se at 10000 and 0.15 x se at 10^6 so the check has teeth. scipy gets a
    mean summed in sorted order, as ours sums in one canonical order, so
    resamples that reorder the data tie with the observed mean exactly on both
    sides (see bootstrap_interval.h).
  - the verdict from its definition; documented values for degenerate inputs.
Then Holm over the arms of one metric vs Holm computed here from its definition
(with tied and capped p-values), hopeless() on clearly bad and good arms,
reproducibility for a seed, the percentile fallback, and the errors (mismatched
lengths, resamples 0, a negative margin, hopeless() told the other direction).
The definitions used as references are in ab_statistics_definitions.py.
Exits 1 on any failure.

usage: ab_statistics_reference.py AB_STATS_TOOL
"""
import json
import math
import subprocess
import sys
import os
import tempfile
import warnings

import numpy as np
import scipy
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_statistics_definitions import (  # noqa: E402
    bca_levels, brute_force_wilcoxon_p, holm_reference, jackknife_acceleration, level_sd, mde_reference,
    scipy_wilcoxon_path, verdict_reference)

TOOL = sys.argv[1]
REFERENCE_RESAMPLES = 1_000_000
failures = []
paths_seen = set()  # scipy Wilcoxon computations the cases reached
worst = {}  # quantity -> largest deviation seen, printed at the end


def note(quantity, deviation):
    worst[quantity] = max(worst.get(quantity, 0.0), deviation)


def check(ok, what):
    if not ok:
        failures.append(what)
        print("  FAIL", what)


def close(ours, ref, rtol, atol=0.0):
    return abs(ours - ref) <= max(atol, rtol * abs(ref))


def run_tool(payload):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(payload, f)
        f.flush()
        proc = subprocess.run([TOOL, f.name], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr
    decoded = json.loads(proc.stdout)
    fix = lambda o: {k: (float(v) if v in ("inf", "-inf", "nan") else v) for k, v in o.items()}  # noqa: E731
    return ([fix(o) for o in decoded] if isinstance(decoded, list) else fix(decoded)), proc.stderr


def compare(control, treatment, higher_is_better=True, seed=7, resamples=10000, **extra):
    payload = {"control": list(map(float, control)), "treatment": list(map(float, treatment)),
               "higher_is_better": higher_is_better, "seed": seed, "resamples": resamples, **extra}
    out, err = run_tool(payload)
    if out is None:
        raise RuntimeError(err)
    return out


def sorted_mean(x, axis=-1):
    return np.sort(x, axis=axis).sum(axis=axis) / x.shape[axis]


# ---- the BCa comparison -----------------------------------------------------------------------
def check_bca(name, d, ours_by_resamples):
    se = d.std(ddof=1) / math.sqrt(len(d))
    ref = stats.bootstrap((d,), sorted_mean, vectorized=True, method="BCa", n_resamples=REFERENCE_RESAMPLES,
                          batch=200_000, rng=np.random.default_rng(12345))
    dist = np.sort(ref.bootstrap_distribution)
    theta = sorted_mean(d)
    below = (np.count_nonzero(dist < theta) + np.count_nonzero(dist <= theta)) / (2 * len(dist))
    z0_ref, a_ref = stats.norm.ppf(below), jackknife_acceleration(d)
    levels = bca_levels(z0_ref, a_ref)
    ref_ci = (ref.confidence_interval.low, ref.confidence_interval.high)
    quantile = lambda p: float(np.quantile(dist, min(max(p, 0.0), 1.0)))  # noqa: E731
    largest = 0.0
    for resamples, ours in ours_by_resamples.items():
        check(ours["ci_method"] == "BCa", f"{name}: ci_method {ours['ci_method']} at B={resamples}")
        check(close(ours["bca_acceleration"], a_ref, 1e-9, 1e-14),
              f"{name}: acceleration {ours['bca_acceleration']} vs jackknife {a_ref}")
        for endpoint, key in enumerate(("ci_low", "ci_high")):
            sd_ours, sdz_ours = level_sd(levels[endpoint], below, z0_ref, a_ref, resamples, endpoint)
            sd_ref, sdz_ref = level_sd(levels[endpoint], below, z0_ref, a_ref, REFERENCE_RESAMPLES, endpoint)
            window = 4 * math.hypot(sd_ours, sd_ref)
            q = quantile(levels[endpoint])
            tol = max(abs(quantile(levels[endpoint] + window) - q), abs(q - quantile(levels[endpoint] - window)))
            tol += 1e-12 * (abs(q) + se)
            diff = abs(ours[key] - ref_ci[endpoint])
            largest = max(largest, diff / se)
            note(f"BCa endpoint at B={resamples}, |ours - scipy(10^6)| / se", diff / se)
            note(f"BCa endpoint at B={resamples}, |ours - scipy(10^6)| / tolerance", diff / tol)
            print(f"    BCa B={resamples:>7} {key:7s} ours {ours[key]: .6f} scipy {ref_ci[endpoint]: .6f}"
                  f"  |diff| {diff / se:.4f} se  tol {tol / se:.4f} se")
            check(diff <= tol, f"{name}: {key} at B={resamples}: |{ours[key]} - {ref_ci[endpoint]}| > {tol}")
            cap = 1.0 if resamples <= 10000 else 0.15
            check(tol <= cap * se, f"{name}: tolerance {tol / se:.3f} se at B={resamples} is too wide to mean anything")
        z_tol = 4 * math.hypot(sdz_ours, sdz_ref) + 1e-12
        check(abs(ours["bca_bias_correction"] - z0_ref) <= z_tol,
              f"{name}: z0 {ours['bca_bias_correction']} vs {z0_ref} (tol {z_tol})")
        note("BCa acceleration, |ours - jackknife|", abs(ours["bca_acceleration"] - a_ref))
        note(f"BCa z0 at B={resamples}, |ours - scipy(10^6)| / tolerance", abs(ours["bca_bias_correction"] - z0_ref) / z_tol)
    return largest


# ---- one case ---------------------------------------------------------------------------------
def check_case(name, control, treatment, higher_is_better=True):
    control, treatment = np.asarray(control, float), np.asarray(treatment, float)
    d = treatment - control
    n = len(d)
    ours = compare(control, treatment, higher_is_better)
    report = {"n": n, "wilcoxon": ours["wilcoxon_method"], "ci": ours["ci_method"]}
    check(ours["n"] == n and ours["deltas"] == d.tolist(), f"{name}: deltas differ from numpy's")
    if n:
        check(close(ours["mean_delta"], d.mean(), 1e-12, 1e-15), f"{name}: mean {ours['mean_delta']} vs {d.mean()}")
    # spreads within 8 ulps of the inputs' magnitude are rounding and reported as 0 (paired_statistics.h)
    rounding = n >= 2 and d.std(ddof=1) <= 8 * np.finfo(float).eps * max(np.abs(control).max(), np.abs(treatment).max())
    if n >= 2:
        check(close(ours["sd_delta"], 0.0 if rounding else d.std(ddof=1), 1e-12, 1e-15), f"{name}: sd {ours['sd_delta']}")
    better = d if higher_is_better else -d
    poi = float(np.mean((better > 0) + 0.5 * (better == 0))) if n else 0.5
    check(close(ours["probability_of_improvement"], poi, 1e-12), f"{name}: P(improvement) {ours['probability_of_improvement']} vs {poi}")

    # Wilcoxon (defined for every n >= 1; ours says p = 1 where scipy has NaN: all d == 0)
    if n == 0:
        check(ours["wilcoxon_statistic"] == 0 and ours["wilcoxon_p_value"] == 1, f"{name}: empty Wilcoxon")
    else:
        with warnings.catch_warnings():  # scipy divides 0 by 0 when every d is 0
            warnings.simplefilter("ignore", RuntimeWarning)
            w = stats.wilcoxon(d)
        ref_p = 1.0 if np.all(d == 0) else float(w.pvalue)
        check(ours["wilcoxon_statistic"] == float(w.statistic), f"{name}: W {ours['wilcoxon_statistic']} vs {w.statistic}")
        check(close(ours["wilcoxon_p_value"], ref_p, 0, 1e-12), f"{name}: Wilcoxon p {ours['wilcoxon_p_value']} vs {ref_p}")
        report["dW_p"] = abs(ours["wilcoxon_p_value"] - ref_p)
        note(f"Wilcoxon p, |ours - scipy| ({ours['wilcoxon_method']})", report["dW_p"])
        nonzero = np.abs(d[d != 0])
        ties, zeros = len(np.unique(nonzero)) < len(nonzero), int(np.sum(d == 0))
        path = scipy_wilcoxon_path(n, ties, zeros, len(nonzero))
        paths_seen.add(path)
        report["ties"], report["zeros"] = ties, zeros
        check(ours["wilcoxon_method"] == {"exact": "exact", "permutation": "exact"}.get(path, path),
              f"{name}: Wilcoxon method {ours['wilcoxon_method']} where scipy takes {path}")
        if n <= 13 and np.any(d != 0):
            bf = brute_force_wilcoxon_p(d)
            check(close(ours["wilcoxon_p_value"], bf, 0, 1e-12), f"{name}: Wilcoxon p vs brute force {bf}")

    sd = d.std(ddof=1) if n >= 2 and not rounding else 0.0
    if n >= 2 and sd > 0:
        t = stats.ttest_rel(treatment, control)
        check(close(ours["t_statistic"], t.statistic, 1e-9), f"{name}: t {ours['t_statistic']} vs {t.statistic}")
        check(close(ours["t_p_value"], t.pvalue, 1e-9, 1e-15 if t.pvalue < 1e-6 else 0),
              f"{name}: t p {ours['t_p_value']} vs {t.pvalue}")
        report["rel_dt_p"] = abs(ours["t_p_value"] - t.pvalue) / t.pvalue
        note("t statistic, relative", abs(ours["t_statistic"] - t.statistic) / abs(t.statistic))
        note("t p-value, relative", report["rel_dt_p"])
        check(close(ours["cohens_dz"], d.mean() / sd, 1e-12), f"{name}: d_z {ours['cohens_dz']}")
        mde = mde_reference(n, sd)
        check(close(ours["minimum_detectable_effect"], mde, 1e-9), f"{name}: MDE {ours['minimum_detectable_effect']} vs {mde}")
        report["rel_dMDE"] = abs(ours["minimum_detectable_effect"] - mde) / mde
        note("minimum detectable effect, relative", report["rel_dMDE"])
        big = compare(control, treatment, higher_is_better, resamples=REFERENCE_RESAMPLES)
        report["worst_dCI_se"] = check_bca(name, d, {10000: ours, REFERENCE_RESAMPLES: big})
    else:  # documented degenerate values (paired_statistics.h)
        c = d.mean() if n else 0.0
        inf = math.inf
        check(ours["t_p_value"] == 1 and ours["holm_p_value"] == 1, f"{name}: degenerate p must be 1")
        check(ours["t_statistic"] == (0.0 if c == 0 or n < 2 else math.copysign(inf, c)), f"{name}: degenerate t")
        check(ours["cohens_dz"] == (0.0 if c == 0 or n < 2 else math.copysign(inf, c)), f"{name}: degenerate d_z")
        expected_ci = {0: (0.0, 0.0), 1: (-inf, inf)}.get(n, (float(np.min(d)) if n else 0.0, float(np.max(d)) if n else 0.0))
        if rounding and c != 0:
            with warnings.catch_warnings():  # scipy warns of catastrophic cancellation, rightly
                warnings.simplefilter("ignore", RuntimeWarning)
                report["scipy_t_p"] = float(stats.ttest_rel(treatment, control).pvalue)
        check((ours["ci_low"], ours["ci_high"]) == expected_ci and ours["ci_method"] == "none", f"{name}: degenerate CI")
        check(ours["minimum_detectable_effect"] == (inf if n < 2 else 0.0), f"{name}: degenerate MDE")
        check(ours["verdict"] == "no detectable difference", f"{name}: degenerate verdict {ours['verdict']}")
    check(ours["holm_p_value"] == ours["t_p_value"], f"{name}: single-arm Holm p must be the t p")
    check(ours["verdict"] == verdict_reference(ours, ours["t_p_value"]), f"{name}: verdict {ours['verdict']}")
    report["verdict"] = ours["verdict"]
    print(f"  {name:28s} " + " ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}" for k, v in report.items()))


def synthetic_cases():
    g = np.random.default_rng(20261201)
    cases = []
    accuracy = lambda n: g.normal(0.55, 0.04, n)  # noqa: E731  (a metric like exact_match)
    for n in range(3, 9):
        base = accuracy(n)
        cases.append((f"normal n={n}", base, base + g.normal(0.02, 0.03, n)))
    for n in (8, 20, 60):
        base = accuracy(n)
        cases.append((f"skewed n={n}", base, base + g.lognormal(-4.5, 1.0, n) - 0.01))
    for n in (20, 50, 51, 60):  # 50 is scipy's last exact n, 51 its first normal one
        base = accuracy(n)
        cases.append((f"normal n={n}", base, base + g.normal(0.005, 0.02, n)))
    base = accuracy(20)
    cases.append(("strong effect n=20", base, base + g.normal(0.2, 0.02, 20)))
    for n in (6, 13, 14, 20, 60):  # scores out of 64 questions: exact ties in |d|, some zeros
        c = g.integers(28, 40, n) / 64
        cases.append((f"ties/64 n={n}", c, np.clip(c + g.integers(-3, 5, n) / 64, 0, 1)))
    for n in (10, 30):  # scores out of 50: float subtraction decides which |d| tie
        c = g.integers(20, 30, n) / 50
        cases.append((f"ties/50 n={n}", c, c + g.integers(-2, 4, n) / 50))
    for n, zeros in ((5, 1), (13, 3), (14, 2), (30, 4), (60, 6)):  # continuous with a few zero deltas
        c = accuracy(n)
        t = c + g.normal(0.01, 0.02, n)
        at = g.choice(n, zeros, replace=False)
        t[at] = c[at]
        cases.append((f"zeros {zeros}/{n}", c, t))
    for n in (13, 14, 8):  # ties without zeros at scipy's 13/14 switch
        c = g.integers(20, 30, n) / 64
        cases.append((f"ties no zeros n={n}", c, c + (g.integers(1, 4, n) * np.where(g.random(n) < 0.7, 1, -1)) / 64))
    loss = g.normal(2.1, 0.05, 8)
    cases.append(("loss (lower better) n=8", loss, loss - g.normal(0.03, 0.02, 8), False))
    c = accuracy(5)
    cases += [("all equal n=5", c, c.copy()), ("all equal n=20", accuracy(20), None),
              ("constant delta n=4", np.full(4, 0.5), np.full(4, 0.625)), ("constant delta n=30", np.full(30, 0.25), np.full(30, 0.125)),
              ("constant up to rounding n=4", [0.42, 0.50, 0.36, 0.28], [0.52, 0.60, 0.46, 0.38]),
              ("constant up to rounding n=3", [0.0, 0.1, 0.2], [0.1, 0.2, 0.3]),
              ("n=2", [0.5, 0.6], [0.55, 0.58]), ("n=1", [0.5], [0.6]), ("n=0", [], [])]
    return [(name, c, c.copy() if t is None else t, *rest) for name, c, t, *rest in cases]


def check_holm():
    print("Holm over arms of one metric:")
    g = np.random.default_rng(99)
    control = g.normal(0.5, 0.03, 10)
    effects = [0.0, 0.004, 0.01, 0.03, 0.03, -0.03, 0.002, 0.08, 0.0, -0.002]
    arms = [control + e + g.normal(0, 0.02, 10) for e in effects]
    arms[4] = arms[3].copy()  # identical arms: tied p-values
    for alpha in (0.05, 0.2):
        payload = {"alpha": alpha, "cases": [{"control": control.tolist(), "treatment": a.tolist(),
                                              "higher_is_better": True, "seed": 3, "resamples": 10000} for a in arms]}
        out, err = run_tool(payload)
        check(out is not None, f"holm run failed: {err}")
        raw = [stats.ttest_rel(a, control).pvalue for a in arms]
        expected = holm_reference(raw)
        for i, o in enumerate(out):
            check(close(o["holm_p_value"], expected[i], 1e-9, 1e-15), f"holm arm {i}: {o['holm_p_value']} vs {expected[i]}")
            note("Holm p, relative", abs(o["holm_p_value"] - expected[i]) / expected[i])
            check(o["verdict"] == verdict_reference(o, expected[i], alpha), f"holm arm {i}: verdict {o['verdict']}")
        print(f"  alpha={alpha}: raw p " + " ".join(f"{p:.3g}" for p in raw))
        print("            holm  " + " ".join(f"{o['holm_p_value']:.3g}" for o in out))
        print("            " + ", ".join(o["verdict"] for o in out))
    check(any(p == 1.0 for p in expected), "the Holm case should include a value capped at 1")


def check_hopeless_and_misc():
    print("hopeless, reproducibility, fallback, errors:")
    g = np.random.default_rng(5)
    c = g.normal(0.5, 0.02, 5)
    bad = compare(c, c - 0.1 + g.normal(0, 0.01, 5), margin=0.02)
    good = compare(c, c + 0.01 + g.normal(0, 0.01, 5), margin=0.02)
    bad2 = compare(c[:2], c[:2] - 0.1, margin=0.02)
    loss_bad = compare(c, c + 0.1 + g.normal(0, 0.01, 5), False, margin=0.02)
    check(bad["hopeless"] and bad["ci_high"] < -0.02, f"clearly worse arm not hopeless: CI [{bad['ci_low']}, {bad['ci_high']}]")
    check(not good["hopeless"], "better arm called hopeless")
    check(not bad2["hopeless"], "n=2 must never be hopeless")
    check(loss_bad["hopeless"] and loss_bad["verdict"] == "worse", "higher loss arm (lower is better) not hopeless/worse")
    near = compare(c, c - 0.03 + g.normal(0, 0.01, 5), margin=0.5)
    check(not near["hopeless"], "hopeless with a margin larger than the effect")
    print(f"  worse arm CI [{bad['ci_low']:.4f}, {bad['ci_high']:.4f}] hopeless={bad['hopeless']}; "
          f"better arm hopeless={good['hopeless']}; loss arm hopeless={loss_bad['hopeless']}")
    d = g.normal(0.01, 0.02, 12)
    first, again, other = compare(np.zeros(12), d, seed=11), compare(np.zeros(12), d, seed=11), compare(np.zeros(12), d, seed=12)
    check(first == again, "same seed, different result")
    check((first["ci_low"], first["ci_high"]) != (other["ci_low"], other["ci_high"]), "different seeds, same CI")
    one = compare(np.zeros(12), d, resamples=1)
    check(one["ci_method"] == "percentile" and one["ci_low"] == one["ci_high"], f"resamples=1: {one['ci_method']}")
    out, err = run_tool({"control": [1.0, 2.0], "treatment": [1.0], "higher_is_better": True, "seed": 1, "resamples": 100})
    check(out is None and "pair" in err, f"mismatched lengths must fail: {err!r}")
    out, err2 = run_tool({"control": [1.0, 2.0], "treatment": [1.0, 3.0], "higher_is_better": True, "seed": 1, "resamples": 0})
    check(out is None and "resamples" in err2, f"resamples 0 must fail: {err2!r}")
    base = {"control": [1.0, 2.0, 3.0], "treatment": [0.0, 1.1, 1.9], "higher_is_better": True, "seed": 1, "resamples": 100}
    out, err3 = run_tool({**base, "margin": -0.1})
    check(out is None and "margin" in err3, f"negative margin must fail: {err3!r}")
    out, err4 = run_tool({**base, "margin": 0.1, "hopeless_higher_is_better": False})
    check(out is None and "higher_is_better" in err4, f"hopeless with the other direction must fail: {err4!r}")
    for what, e in (("mismatched lengths", err), ("resamples 0", err2), ("margin -0.1", err3), ("other direction", err4)):
        print(f"  {what} -> {e.strip()!r}")
    print(f"  seed reproducible, resamples=1 -> {one['ci_method']}")


def main():
    print(f"scipy {scipy.__version__}, numpy {np.__version__}; reference bootstrap {REFERENCE_RESAMPLES} resamples")
    print("cases (d = treatment - control):")
    for name, control, treatment, *rest in synthetic_cases():
        print(f"  -- {name}")
        check_case(name, control, treatment, *rest)
    check(paths_seen >= {"exact", "permutation", "normal", "none"}, f"cases reach only scipy paths {paths_seen}")
    print(f"scipy Wilcoxon paths reached: {sorted(paths_seen)}")
    check_holm()
    check_hopeless_and_misc()
    print("largest deviations:")
    for quantity, deviation in sorted(worst.items()):
        print(f"  {quantity:60s} {deviation:.3g}")
    if failures:
        print(f"FAILED: {len(failures)} checks")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
