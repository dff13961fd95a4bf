"""The optimizer families through `ftcore run` on a tiny model (tests/reference/tiny_training.py):
convergence of the 8-bit, paged and factored optimizers next to their 32-bit family member, and
resuming a run with an optimizer of another precision or family.

Full fine-tune of the tiny Llama (3.2M parameters): the embedding [49152, 64], q/o_proj [64, 64] and
the MLP [128, 64] / [64, 128] have >= 4096 elements, so adamw_8bit / lion_8bit / paged_adamw_8bit
keep their state in 8 bits there (min_8bit_size = 4096; checked in a saved checkpoint), while
k/v_proj [32, 64] and the norms keep fp32 state. Every run: same data, seed, batches, 40 steps,
constant lr after 3 warmup steps (so a run stopped at step K has the schedule of one going on).

(a) convergence, final loss = mean of the last 5 steps' losses, L0 = the first step's loss:
  - paged_adamw_32bit (max_resident_bytes 4 MiB of its 25.8 MB state, 1 MiB pages, so every step
    reads and writes back pages: asserted from FTCORE_PAGED_STATS) gives adamw's losses exactly
    (the same kernel, README), and paged_adamw_8bit gives adamw_8bit's exactly;
  - adamw_8bit and paged_adamw_8bit vs adamw, lion_8bit vs lion: |final - final_32bit| <=
    2% of the 32-bit run's loss decrease (L0 - final_32bit). Why 2%: blockwise dynamic 8-bit
    state (Dettmers et al. 2022) stores each moment with a relative error of at most ~1% for the
    values that dominate a block (the map's spacing near absmax is 1/127 of absmax), so each
    update is within ~1-2% of the 32-bit one and, on a smooth 40-step descent, the loss curve
    within that fraction of the distance travelled;
  - adafactor (fixed lr 1e-3, no parameter scaling, no momentum) vs adamw: |final - final_adamw|
    <= 15% of adamw's decrease. Wider because it is another algorithm, not a quantization of the
    same one: a rank-1 factored second moment, no first moment and update clipping at RMS 1
    change every step by more than 8-bit rounding does; the band says "trains like AdamW".
  - every run ends >= 1 nat below L0 (L0 ~ ln(49152) = 10.8, the uniform guess).
(b) resume across precisions/families (K = 10):
  - adamw K steps (checkpoint) -> adamw_8bit with state_conversion = "convert" to 2K (checkpoint)
    -> adamw to 3K, vs adamw uninterrupted to 3K: steps 1..K+1 equal the uninterrupted run's
    exactly (the loss at K+1 is computed from the restored weights, bit for bit), and
    after each switch the per-step loss differs from the uninterrupted run's by <= 1% relative
    (the 2% band of (a) is on the loss decrease, ~36% of the loss here; 1% of the loss ~ 2.5% of
    the decrease over 20 steps, the 8-bit state's error with a margin); no spike: the step after
    a switch rises over the step before by at most the uninterrupted run's own rise + 1%;
    the 8-bit checkpoint holds codes (.q8) for the large tensors and step = 2K (state carried);
  - lion K steps -> adamw_8bit with "convert" is refused: exit 1 (the CLI's runtime-error exit),
    a message naming adamw_8bit, lion and state_conversion; with "reset" it trains on, and its
    checkpoint at 2K has step = K (a fresh state).

Usage: optimizer_family_test.py FTCORE_BINARY
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

from safetensors.torch import load_file  # noqa: E402

STEPS = 40
K = 10
PAGED = {"max_resident_bytes": 4 << 20, "page_bytes": 1 << 20}
OPTIMIZERS = {  # name -> [optimizer] keys; lion at 3e-4 (it wants 3-10x less lr than AdamW's 1e-3)
    "adamw": {"name": "adamw", "lr": 1e-3},
    "adamw_8bit": {"name": "adamw_8bit", "lr": 1e-3},
    "paged_adamw_32bit": {"name": "paged_adamw_32bit", "lr": 1e-3, **PAGED},
    "paged_adamw_8bit": {"name": "paged_adamw_8bit", "lr": 1e-3, "max_resident_bytes": 1 << 20,
                         "page_bytes": 256 << 10},
    "lion": {"name": "lion", "lr": 3e-4},
    "lion_8bit": {"name": "lion_8bit", "lr": 3e-4},
    "adafactor": {"name": "adafactor", "lr": 1e-3, "relative_step": False, "scale_parameter": False},
}
SAME_FAMILY = {"adamw_8bit": "adamw", "paged_adamw_8bit": "adamw", "lion_8bit": "lion", "adafactor": "adamw"}
BAND = {"adamw_8bit": 0.02, "paged_adamw_8bit": 0.02, "lion_8bit": 0.02, "adafactor": 0.15}
MIN_DROP = 1.0    # nats below the first step's loss
SWITCH_REL = 0.01  # per-step relative loss difference after a switch


def recipe(out, name, model, data, optimizer, **train):
    keys = dict(max_steps=STEPS, logging_steps=1)
    keys.update(train)
    path = tt.write_recipe(out, name, model, data, train=keys, optimizer=optimizer)
    with open(path) as f:  # constant lr: the schedule of steps 1..K does not depend on max_steps
        text = f.read().replace('name = "cosine"', 'name = "constant"')
    with open(path, "w") as f:
        f.write(text)
    return path


def run_dir(out, name):
    return os.path.join(out, "runs", name)


def final(losses):
    return sum(losses[-5:]) / 5


def check_convergence(ftcore, out, model, data):
    losses, paged_stats = {}, {}
    for name, opt in OPTIMIZERS.items():
        p = tt.run_ftcore(ftcore, recipe(out, name, model, data, opt), env={"FTCORE_PAGED_STATS": "1"})
        losses[name] = tt.train_losses(run_dir(out, name))
        assert len(losses[name]) == STEPS, f"{name}: {len(losses[name])} losses logged, expected {STEPS}"
        paged_stats[name] = [json.loads(line.split("paged_stats ", 1)[1]) for line in p.stderr.splitlines()
                             if "paged_stats " in line]
    l0 = losses["adamw"][0]
    for name, ls in losses.items():
        assert ls[0] == l0, f"{name}: first loss {ls[0]} differs from adamw's {l0} (same weights and batch)"
        assert final(ls) <= l0 - MIN_DROP, f"{name}: final loss {final(ls):.4f} not {MIN_DROP} below {l0:.4f}"
    assert losses["paged_adamw_32bit"] == losses["adamw"], "paged_adamw_32bit's losses differ from adamw's"
    assert losses["paged_adamw_8bit"] == losses["adamw_8bit"], "paged_adamw_8bit's losses differ from adamw_8bit's"
    for name in ("paged_adamw_32bit", "paged_adamw_8bit"):
        stats, budget = paged_stats[name], OPTIMIZERS[name]["max_resident_bytes"]
        assert len(stats) >= STEPS, f"{name}: {len(stats)} paged_stats lines for {STEPS} steps"
        last = stats[-1]
        assert last["pages_in"] >= STEPS and last["pages_out"] >= STEPS, f"{name} did not page: {last}"
        assert 0 < last["resident_high_water"] <= budget, f"{name}: resident {last} over the budget {budget}"
        print(f"{name}: paged ({last['pages_in']} pages in, {last['pages_out']} out, resident high water "
              f"{last['resident_high_water']} <= {budget} B); losses equal to "
              f"{'adamw' if '32' in name else 'adamw_8bit'}'s for all {STEPS} steps")
    for name, base in SAME_FAMILY.items():
        drop = l0 - final(losses[base])
        diff = abs(final(losses[name]) - final(losses[base]))
        assert diff <= BAND[name] * drop, (f"{name}: final loss {final(losses[name]):.4f} vs {base}'s "
                                           f"{final(losses[base]):.4f}: {diff / drop:.2%} of the decrease > "
                                           f"{BAND[name]:.0%}")
        print(f"{name}: final {final(losses[name]):.4f} vs {base} {final(losses[base]):.4f} "
              f"(|diff| {diff:.4f} = {diff / drop:.2%} of the decrease {drop:.3f}, band {BAND[name]:.0%})")
    print(f"all: first loss {l0:.4f}; final losses " +
          ", ".join(f"{n} {final(ls):.4f}" for n, ls in losses.items()) + f" (each >= {MIN_DROP} nat down)")
    return losses["adamw"]


def optimizer_state(out, run, step):
    return load_file(os.path.join(run_dir(out, run), f"checkpoint-{step}", "optimizer.safetensors"))


def check_step_count(state, expected, what):
    steps = {k: int(v) for k, v in state.items() if k.endswith(".step")}
    assert steps and set(steps.values()) == {expected}, f"{what}: step counts {set(steps.values())}, expected {expected}"


def check_resume_across_precisions(ftcore, out, model, data, reference):
    ref = reference[:3 * K]
    segments = (("seg_adamw_1", "adamw", None), ("seg_8bit_2", "adamw_8bit", "seg_adamw_1"),
                ("seg_adamw_3", "adamw", "seg_8bit_2"))
    losses = []
    for i, (name, opt, previous) in enumerate(segments, start=1):
        train = dict(max_steps=i * K, save_steps=K, state_conversion="convert")
        if previous:
            train["resume_from_checkpoint"] = os.path.join(run_dir(out, previous), f"checkpoint-{(i - 1) * K}")
        tt.run_ftcore(ftcore, recipe(out, name, model, data, OPTIMIZERS[opt], **train))
        got = tt.train_losses(run_dir(out, name))
        assert len(got) == K, f"{name}: {len(got)} steps logged, expected {K}"
        losses += got
    assert losses[:K] == ref[:K], "adamw stopped at step K does not repeat the uninterrupted run's losses"
    state = optimizer_state(out, "seg_8bit_2", 2 * K)
    q8 = [k for k in state if k.endswith(".exp_avg.q8")]
    fp32 = [k for k in state if k.endswith(".exp_avg")]
    assert any("embed_tokens" in k for k in q8) and any("mlp" in k for k in q8) and fp32, \
        f"adamw_8bit's checkpoint: 8-bit moments {q8}, fp32 moments {fp32}"
    check_step_count(state, 2 * K, "adamw_8bit resumed from adamw (convert)")
    # Step K+1's loss is computed from adamw's weights after step K, restored from the checkpoint.
    assert losses[K] == ref[K], f"step {K + 1}: loss {losses[K]} vs {ref[K]}: the weights were not restored exactly"
    for switch in (K, 2 * K):  # losses[switch] is step switch + 1's, the first after the switch
        worst = max(abs(a - b) / b for a, b in zip(losses[switch:switch + K], ref[switch:switch + K]))
        assert worst <= SWITCH_REL, f"after the switch at step {switch}: losses differ by {worst:.3%} > {SWITCH_REL:.0%}"
        rise, ref_rise = losses[switch + 1] - losses[switch - 1], ref[switch + 1] - ref[switch - 1]
        assert rise <= ref_rise + SWITCH_REL * ref[switch - 1], (f"spike after the switch at step {switch}: "
                                                                 f"+{rise:.4f} vs +{ref_rise:.4f} uninterrupted")
        print(f"switch at step {switch} ({'adamw -> adamw_8bit' if switch == K else 'adamw_8bit -> adamw'}): "
              f"next {K} losses within {worst:.3%} of the uninterrupted run's (bound {SWITCH_REL:.0%}), "
              f"step {switch + 2} vs {switch}: {rise:+.4f} (uninterrupted {ref_rise:+.4f})")
    print(f"resume adamw -> adamw_8bit -> adamw: steps 1..{K} equal, final loss {losses[-1]:.4f} vs "
          f"{ref[-1]:.4f} uninterrupted; 8-bit checkpoint: {len(q8)} 8-bit and {len(fp32)} fp32 moments, step {2 * K}")


def check_cross_family(ftcore, out, model, data):
    tt.run_ftcore(ftcore, recipe(out, "seg_lion", model, data, OPTIMIZERS["lion"], max_steps=K, save_steps=K))
    source = os.path.join(run_dir(out, "seg_lion"), f"checkpoint-{K}")
    train = dict(max_steps=2 * K, save_steps=K, resume_from_checkpoint=source)
    p = tt.run_ftcore(ftcore, recipe(out, "lion_to_8bit", model, data, OPTIMIZERS["adamw_8bit"],
                                     state_conversion="convert", **train), check=False)
    assert p.returncode == 1, f"lion -> adamw_8bit (convert): exit {p.returncode}, expected 1\n{p.stderr}"
    for word in ("adamw_8bit", "lion", "state_conversion"):
        assert word in p.stderr, f"lion -> adamw_8bit refusal does not name {word}: {p.stderr}"
    refusal = next(line for line in p.stderr.splitlines() if "state_conversion" in line)
    p = tt.run_ftcore(ftcore, recipe(out, "lion_to_8bit_reset", model, data, OPTIMIZERS["adamw_8bit"],
                                     state_conversion="reset", **train))
    got = tt.train_losses(run_dir(out, "lion_to_8bit_reset"))
    assert len(got) == K and all(x == x for x in got) and final(got) < got[0], f"reset run's losses {got}"
    check_step_count(optimizer_state(out, "lion_to_8bit_reset", 2 * K), K, "adamw_8bit reset after lion")
    print(f"lion -> adamw_8bit: convert refused with exit 1 ({refusal.strip()}); reset trains on "
          f"({got[0]:.4f} -> {got[-1]:.4f}) from a fresh state (step {K} at checkpoint-{2 * K})")


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    with tempfile.TemporaryDirectory() as out:
        model = tt.make_model(out)
        data = tt.make_data(out)
        reference = check_convergence(ftcore, out, model, data)
        check_resume_across_precisions(ftcore, out, model, data, reference)
        check_cross_family(ftcore, out, model, data)


if __name__ == "__main__":
    main()
