"""`ftcore merge` vs PEFT's merge_and_unload, read back by transformers.

On the tiny Llama of tiny_training.py (tied embeddings, the default model's
tokenizer) and three PEFT adapters with random non-zero factors:

  qkvo      LoRA r 4 on q/k/v/o_proj (tiny_training.make_adapter)
  lm_head   all-linear rsLoRA r 4 with modules_to_save = ["lm_head"] (a
            trained lm_head copy: the merged model is untied)
  dora      DoRA r 4 on q/v/up_proj (magnitude vectors perturbed too)

`ftcore merge` writes an HF folder that AutoModelForCausalLM.from_pretrained
loads; its fp32 logits equal those of PEFT's merge_and_unload on the same
adapter within 1e-5, also when --max-shard-size forces shards (index file,
model-0000k-of-0000n names). With --dtype bf16 the folder loads as bf16 with
the weights of PEFT's merged model cast to bf16. The reported merged-vs-
unmerged difference is small; usage errors exit 2, a failed merge exits 1
and leaves no folder behind.

Usage: merge_reference.py FTCORE_BINARY
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import tiny_training as tt

import torch  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaForCausalLM  # noqa: E402

TOLERANCE = 1e-5


def make_peft_adapter(out, model_path, name, config):
    """A PEFT adapter with every trainable tensor moved off its initial value."""
    base = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    peft_model = get_peft_model(base, config)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_" in n or "modules_to_save" in n:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)
    path = os.path.join(out, name)
    peft_model.save_pretrained(path)
    return path


def peft_merged(model_path, adapter):
    base = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    return PeftModel.from_pretrained(base, adapter).merge_and_unload().eval()


def inputs():
    g = torch.Generator().manual_seed(3)
    return torch.randint(3, 1000, (2, 17), generator=g)


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def merge(ftcore, *args, expect=0):
    p = subprocess.run([ftcore, "merge", *args], capture_output=True, text=True,
                       env=dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE"))
    if p.returncode != expect:
        raise SystemExit(f"ftcore merge {' '.join(args)} exited {p.returncode}, expected {expect}:\n"
                         f"{p.stdout}\n{p.stderr}")
    return p


def reported_difference(stdout):
    m = re.search(r"merged vs unmerged \(fp32[^)]*\): ([0-9.e+-]+)", stdout)
    assert m, stdout
    return float(m.group(1))


def check_folder(label, out, reference, ids, sharded):
    files = sorted(os.listdir(out))
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert name in files, f"{label}: {name} missing from {files}"
    if sharded:
        shards = [f for f in files if re.fullmatch(r"model-\d{5}-of-\d{5}\.safetensors", f)]
        assert len(shards) > 1 and "model.safetensors" not in files, f"{label}: {files}"
        with open(os.path.join(out, "model.safetensors.index.json")) as f:
            index = json.load(f)
        assert sorted(set(index["weight_map"].values())) == shards, index
    else:
        assert "model.safetensors" in files and "model.safetensors.index.json" not in files, files
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    diff = (logits(model, ids) - reference).abs().max().item()
    print(f"{label}: transformers loads ftcore merge's folder ({len(files)} files); "
          f"max |logit diff| vs PEFT merge_and_unload {diff:.2e}")
    assert diff <= TOLERANCE, f"{label}: {diff}"
    return model


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    torch.set_num_threads(2)
    ids = inputs()
    with tempfile.TemporaryDirectory() as tmp:
        model_path = tt.make_model(tmp)
        adapters = {
            "qkvo": tt.make_adapter(tmp, model_path),
            "lm_head": make_peft_adapter(tmp, model_path, "lm_head_adapter", LoraConfig(
                r=4, lora_alpha=8, target_modules="all-linear", use_rslora=True, modules_to_save=["lm_head"])),
            "dora": make_peft_adapter(tmp, model_path, "dora_adapter", LoraConfig(
                r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], use_dora=True)),
        }
        for label, adapter in adapters.items():
            reference_model = peft_merged(model_path, adapter)
            reference = logits(reference_model, ids)
            out = os.path.join(tmp, f"merged_{label}")
            p = merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", out, "--dtype", "fp32")
            reported = reported_difference(p.stdout)
            print(f"{label}: ftcore merge reports max |logit diff| merged vs unmerged {reported:.2e}")
            assert reported <= 1e-4, p.stdout
            merged = check_folder(label, out, reference, ids, sharded=False)
            with open(os.path.join(out, "config.json")) as f:
                config = json.load(f)
            assert config["torch_dtype"] == "float32", config
            assert config["tie_word_embeddings"] == (label != "lm_head"), config
            assert merged.lm_head.weight.data_ptr() != merged.model.embed_tokens.weight.data_ptr() or label != "lm_head"

            sharded = os.path.join(tmp, f"sharded_{label}")
            merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", sharded, "--dtype", "fp32",
                  "--max-shard-size", "2MB")
            check_folder(f"{label} sharded (2MB)", sharded, reference, ids, sharded=True)

            bf16 = os.path.join(tmp, f"bf16_{label}")
            merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", bf16, "--dtype", "bf16")
            loaded = AutoModelForCausalLM.from_pretrained(bf16).eval()
            assert loaded.dtype == torch.bfloat16, loaded.dtype
            with open(os.path.join(bf16, "config.json")) as f:
                assert json.load(f)["torch_dtype"] == "bfloat16"
            expected = {k: v.to(torch.bfloat16) for k, v in reference_model.state_dict().items()}
            worst = max((v.float() - expected[k].float()).abs().max().item() for k, v in loaded.state_dict().items())
            assert torch.isfinite(logits(loaded, ids)).all()
            print(f"{label} bf16: loads as bf16 (torch_dtype bfloat16); max |weight diff| vs PEFT's merged "
                  f"weights cast to bf16 {worst:.2e}")
            assert worst == 0.0, worst

        # Usage errors exit 2; a failed merge exits 1 and leaves nothing behind.
        adapter = adapters["qkvo"]
        out = os.path.join(tmp, "errors")
        merge(ftcore, "--model", os.path.join(tmp, "nope"), "--adapter", adapter, "--out", out, expect=2)
        merge(ftcore, "--model", model_path, "--adapter", tmp, "--out", out, expect=2)
        merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", out, "--dtype", "int8", expect=2)
        merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", out, "--max-shard-size", "5XB", expect=2)
        merge(ftcore, "--model", model_path, "--adapter", adapter, expect=2)
        existing = os.path.join(tmp, "merged_qkvo")
        merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", existing, expect=2)
        merge(ftcore, "--model", model_path, "--adapter", adapter, "--out", existing, "--overwrite")
        check_folder("qkvo --overwrite", existing, logits(peft_merged(model_path, adapter), ids), ids, sharded=False)
        broken = os.path.join(tmp, "broken_adapter")
        os.makedirs(broken)
        for name in ("adapter_model.safetensors", "adapter_config.json"):
            with open(os.path.join(adapter, name), "rb") as src, open(os.path.join(broken, name), "wb") as dst:
                dst.write(src.read())
        with open(os.path.join(broken, "adapter_config.json")) as f:
            config = json.load(f)
        config["r"] = 8  # the weights are rank 4
        with open(os.path.join(broken, "adapter_config.json"), "w") as f:
            json.dump(config, f)
        p = merge(ftcore, "--model", model_path, "--adapter", broken, "--out", out, expect=1)
        assert not os.path.exists(out) and not os.path.exists(out + ".tmp"), os.listdir(tmp)
        print("errors: usage errors exit 2; a failed merge exits 1 and writes nothing:", p.stderr.strip().splitlines()[-1][:120])


if __name__ == "__main__":
    main()
