"""Reference computations for ab_statistics_reference.py, written here from their
definitions (not from ftcore's code): brute-force Wilcoxon over sign flips, which
computation scipy's wilcoxon(method='auto') picks, the jackknife acceleration,
the noncentral-t power equation, Holm's step-down, the verdict rule, and the
Monte-Carlo sd of the level at which a BCa interval reads its quantile."""
import math

import numpy as np
from scipy import integrate, optimize, stats


def brute_force_wilcoxon_p(d):
    """Two-sided p over all 2^n sign flips of the nonzero |d| (average ranks), as the permutation test."""
    nz = d[d != 0]
    ranks = stats.rankdata(np.abs(nz))
    observed = ranks[nz > 0].sum()
    signs = (np.arange(2 ** len(nz))[:, None] >> np.arange(len(nz))) & 1
    null = signs @ ranks
    return min(1.0, 2 * min(np.mean(null <= observed), np.mean(null >= observed)))


def scipy_wilcoxon_path(n, ties, zeros, nonzero):
    """Which computation scipy 1.17's wilcoxon(method='auto') does (read from scipy/stats/_wilcoxon.py)."""
    if nonzero == 0:
        return "none"
    if n > 50:
        return "normal"
    if not ties and not zeros:
        return "exact"
    return "permutation" if n <= 13 else "normal"


def jackknife_acceleration(d):
    theta_i = np.array([np.delete(d, i).mean() for i in range(len(d))])
    u = (len(d) - 1) * (theta_i.mean() - theta_i)
    return (u ** 3).sum() / (6 * ((u ** 2).sum()) ** 1.5)


def nct_below(x, df, lam):
    """P(T' < x) for the noncentral t; scipy's nct.cdf is NaN far in the lower tail at df = 1,
    so there it is integrated from T' = (Z + lam) / sqrt(V / df), V ~ chi2(df)."""
    p = stats.nct.cdf(x, df, lam)
    if math.isnan(p):
        p = integrate.quad(lambda v: stats.norm.cdf(x * math.sqrt(v / df) - lam) * stats.chi2.pdf(v, df),
                           0, math.inf)[0]
    return p


def mde_reference(n, sd, alpha=0.05, power=0.8):
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    f = lambda lam: stats.nct.sf(crit, df, lam) + nct_below(-crit, df, lam) - power  # noqa: E731
    high = 1.0
    while f(high) < 0:  # scipy's nct is NaN far out (df = 2 at lambda ~ 80): bracket tightly
        high *= 2
    return optimize.brentq(f, 0.0, high, xtol=1e-14, rtol=1e-15) * sd / math.sqrt(n)


def holm_reference(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def verdict_reference(c, holm_p, alpha=0.05):
    if not holm_p < alpha:
        return "no detectable difference"
    up, down = c["mean_delta"] > 0 and c["ci_low"] > 0, c["mean_delta"] < 0 and c["ci_high"] < 0
    if not (up or down):
        return "no detectable difference"
    return "better" if up == c["higher_is_better"] else "worse"


def bca_levels(z0, a, alpha=0.025):
    out = []
    for z in (stats.norm.ppf(alpha), stats.norm.ppf(1 - alpha)):
        out.append(stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))))
    return out


def level_sd(level, below_fraction, z0, a, resamples, endpoint):
    """Monte-Carlo sd of the level at which a B-resample BCa interval reads its quantile."""
    sd_z0 = math.sqrt(below_fraction * (1 - below_fraction) / resamples) / stats.norm.pdf(z0)
    h = 1e-6
    slope = (bca_levels(z0 + h, a)[endpoint] - bca_levels(z0 - h, a)[endpoint]) / (2 * h)
    return math.sqrt(level * (1 - level) / resamples + (slope * sd_z0) ** 2), sd_z0
