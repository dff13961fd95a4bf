"""Bad input to `ftcore run` and `ftcore generate` on a tiny model
(tests/reference/tiny_training.py) is refused clearly, before anything is
trained or lost; and what a run reports about itself is true:

- a trainer_state.json with an impossible field (negative or zero step, a step
  past the plan or 1e18, a negative cursor, 1e9 epochs) stops the resume with
  a message naming the file and the field (no SIGFPE, no hang);
- recipe.lock.toml round-trips: run from another folder it validates and
  reproduces the run's losses bit for bit;
- sequence_len too short for any target token is an error, not a run that
  trains nothing; val_set_size holding out every row is an error;
- a tokenizer with ids past the model's embedding is a config error (exit 2);
- a recipe dropping an inherited [adapter] with name = "none" trains no adapter;
- a base chain 70 files deep is refused with a message;
- effective_batch is the rows a step really takes (5 rows, not 16);
- the run's summary says "eval before" only when an eval ran before training;
- `generate` refuses a prompt or --max-new-tokens past max_position_embeddings.

Usage: input_errors_test.py FTCORE_BINARY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402


def expect(p, code, *fragments):
    text = p.stdout + p.stderr
    if p.returncode != code or not all(f in text for f in fragments):
        raise SystemExit(f"expected exit {code} with {fragments}, got {p.returncode}:\n{text[-3000:]}")


def ftcore(binary, *args, cwd=None):
    env = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True, cwd=cwd)


def check_tampered_resume(binary, out, model, data):
    recipe = tt.write_recipe(out, "base", model, data, train=dict(max_steps=4, save_steps=2))
    tt.run_ftcore(binary, recipe)
    finished = os.path.join(out, "runs", "base")
    cases = [
        ("global_step", -5, "field 'global_step' is -5, must be >= 1"),
        ("global_step", 0, "field 'global_step' is 0, must be >= 1"),
        ("global_step", 10**18, "field 'global_step' is 1000000000000000000, past its own total_steps"),
        ("cursor.batch", -3, "field 'cursor.batch' is -3, must be >= 0"),
        ("epoch", 1e9, "field 'epoch' is 1000000000.0, more epochs than its 2 steps can make"),
    ]
    for i, (field, value, message) in enumerate(cases):
        name = f"tampered{i}"
        shutil.copytree(finished, os.path.join(out, "runs", name))
        checkpoint = os.path.join(out, "runs", name, "checkpoint-2")
        state_file = os.path.join(checkpoint, "trainer_state.json")
        with open(state_file) as f:
            state = json.load(f)
        if field == "cursor.batch":
            state["cursor"]["batch"] = value
        else:
            state[field] = value
        with open(state_file, "w") as f:
            json.dump(state, f)
        p = ftcore(binary, "run", recipe, "--set", f"train.run_name={name}",
                   "--set", f"train.resume_from_checkpoint={checkpoint}")
        expect(p, 1, state_file, message)
        print(f"resume with {field} = {value}: refused ({message})")
    return recipe, finished


def check_resume_past_plan(binary, recipe, finished):
    """A valid checkpoint, but the recipe now plans fewer steps than it took.
    The refused resume leaves the folder's recipe.lock.toml as the run that wrote it."""
    lock = os.path.join(finished, "recipe.lock.toml")
    with open(lock) as f:
        before = f.read()
    p = ftcore(binary, "run", recipe, "--set", "train.max_steps=2", "--set", "train.run_name=base",
               "--set", "train.resume_from_checkpoint=" + os.path.join(finished, "checkpoint-4"))
    expect(p, 1, "field 'global_step' is 4, past the 2 steps this recipe plans")
    with open(lock) as f:
        if f.read() != before:
            raise SystemExit("a refused resume rewrote recipe.lock.toml")
    print("a resume past the plan: refused, recipe.lock.toml untouched")


def check_lock_round_trip(binary, out, finished):
    lock = os.path.join(finished, "recipe.lock.toml")
    elsewhere = os.path.join(out, "elsewhere")
    os.makedirs(elsewhere)
    p = ftcore(binary, "validate", lock, cwd=elsewhere)
    expect(p, 0, ": ok (")
    p = ftcore(binary, "run", lock, "--set", "train.run_name=from_lock", cwd=elsewhere)
    expect(p, 0)
    again = tt.train_losses(os.path.join(out, "runs", "from_lock"))
    first = tt.train_losses(finished)
    if again != first or not first:
        raise SystemExit(f"the lock did not reproduce the run: {first} vs {again}")
    print(f"recipe.lock.toml run from another folder: losses identical ({len(first)} steps)")


def check_nothing_to_train(binary, out, model, data):
    recipe = tt.write_recipe(out, "short", model, data)
    p = ftcore(binary, "run", recipe, "--set", "data.sequence_len=1")
    expect(p, 1, "none of the 48 examples has a target token within sequence_len = 1")
    if os.path.exists(os.path.join(out, "runs", "short", "adapter_model.safetensors")):
        raise SystemExit("a run with nothing to train wrote an adapter")
    p = ftcore(binary, "run", recipe, "--set", "data.val_set_size=0.999")
    expect(p, 1, "val_set_size = 0.999 holds out all 48 examples, leaving none to train on")
    print("sequence_len = 1 and val_set_size = 0.999: refused")


def check_foreign_tokenizer(binary, out, model, data):
    small = os.path.join(out, "small_vocab_model")
    shutil.copytree(model, small)
    config_file = os.path.join(small, "config.json")
    with open(config_file) as f:
        config = json.load(f)
    config["vocab_size"] = 100
    with open(config_file, "w") as f:
        json.dump(config, f)
    recipe = tt.write_recipe(out, "foreign", small, data)
    p = ftcore(binary, "run", recipe)
    expect(p, 2, "is outside the model's embedding of 100 rows", "does not belong to this model")
    print("a tokenizer past the embedding: exit 2")


def check_dropped_adapter(binary, out, model, data):
    base = tt.write_recipe(out, "lora_base", model, data, adapter_dir=None)
    with open(base, "a") as f:
        f.write('\n[adapter]\nname = "lora"\nr = 4\n')
    derived = os.path.join(out, "full.toml")
    with open(derived, "w") as f:
        f.write(f'base = {json.dumps(base)}\n\n[adapter]\nname = "none"\n')
    p = ftcore(binary, "validate", derived)
    expect(p, 0, ": ok (optimizer adamw")
    if "adapter" in p.stdout:
        raise SystemExit(f"name = \"none\" kept the adapter: {p.stdout}")
    p = ftcore(binary, "validate", base)
    expect(p, 0, "adapter lora")
    print("name = \"none\" drops the inherited [adapter]")


def check_deep_base_chain(binary, out):
    folder = os.path.join(out, "chain")
    os.makedirs(folder)
    for i in range(70):
        with open(os.path.join(folder, f"r{i}.toml"), "w") as f:
            f.write(f'base = "r{i + 1}.toml"\n' if i < 69 else "")
    p = ftcore(binary, "validate", os.path.join(folder, "r0.toml"))
    expect(p, 2, "base recipes nest deeper than 64 files")
    print("a 70-deep base chain: exit 2")


def check_reported_batch_and_evals(binary, out, model):
    os.makedirs(os.path.join(out, "five"))
    rows = tt.make_data(os.path.join(out, "five"), rows=5)
    recipe = tt.write_recipe(out, "five_rows", model, rows,
                             train=dict(micro_batch_size=4, gradient_accumulation_steps=4, max_steps=2))
    tt.run_ftcore(binary, recipe)
    with open(os.path.join(out, "runs", "five_rows", "metrics.jsonl")) as f:
        batches = {json.loads(line).get("effective_batch") for line in f} - {None}
    if batches != {5}:
        raise SystemExit(f"effective_batch with 5 rows and 4 x 4 configured: {batches}")
    os.makedirs(os.path.join(out, "evals"))
    data = tt.make_data(os.path.join(out, "evals"), rows=24)
    recipe = tt.write_recipe(out, "evals", model, data, train=dict(max_steps=4, eval_steps=2))
    p = tt.run_ftcore(binary, recipe, "--set", "data.val_set_size=0.25")
    if "eval before" in p.stdout or "eval at step 2:" not in p.stdout or "eval at step 4:" not in p.stdout:
        raise SystemExit(f"summary of a run without an eval before training:\n{p.stdout}")
    print("effective_batch 5 of 16 configured; summary names the eval steps")


def check_generate_limits(binary, model):
    p = ftcore(binary, "generate", "--model", model, "--prompt", "word " * 400)
    expect(p, 2, "the model holds 256 positions (max_position_embeddings)")
    p = ftcore(binary, "generate", "--model", model, "--prompt", "Hello", "--max-new-tokens", "99999999999")
    expect(p, 2, "--max-new-tokens 99999999999 after a", "runs past the model's 256 positions")
    print("generate past max_position_embeddings: exit 2")


def main():
    binary = sys.argv[1]
    tt.require_default_tokenizer()
    with tempfile.TemporaryDirectory() as out:
        model = tt.make_model(out)
        data = tt.make_data(out)
        recipe, finished = check_tampered_resume(binary, out, model, data)
        check_lock_round_trip(binary, out, finished)
        check_resume_past_plan(binary, recipe, finished)
        check_nothing_to_train(binary, out, model, data)
        check_foreign_tokenizer(binary, out, model, data)
        check_dropped_adapter(binary, out, model, data)
        check_deep_base_chain(binary, out)
        check_reported_batch_and_evals(binary, out, model)
        check_generate_limits(binary, model)


if __name__ == "__main__":
    main()
