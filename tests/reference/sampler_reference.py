"""Reference batches for sampler_reference_test.cpp, from the code users
trust, computed now, at test time:

  sequential       torch.utils.data.DistributedSampler(shuffle=False)
  random           torch.utils.data.DistributedSampler(shuffle=True, seed), set_epoch(epoch)
  group_by_length  transformers' DistributedLengthGroupedSampler(seed), set_epoch(epoch);
                   on one rank LengthGroupedSampler with a generator seeded seed + epoch
  multipack        no installable reference: first-fit-decreasing written here,
                   independently of the C++, then DistributedSampler(shuffle=True)
                   over the packed rows

each batched by torch.utils.data.BatchSampler(batch_size, drop_last), as a
DataLoader batches a sampler.

Input: a JSON list (argv[1], or stdin when no argument) of
  {"id": str, "sampler": ftcore name, "lengths": [int], "batch_size": int,
   "sequence_len": int, "seed": int, "world_size": int, "epochs": [int],
   "options": {only the keys the recipe sets}}
Output: a JSON list of {"id": str, "runs": [{"rank", "epoch", "batches",
"efficiency"}]}, one run per (rank, epoch); "batches" is a list of
micro-batches, each a list of rows, each a list of example indices (one
index per row except for multipack). "efficiency" (multipack only) is
example tokens / (rows x sequence_len) over that run's rows.
"""

import functools
import json
import sys
from unittest import mock

import torch
from torch.utils.data import BatchSampler, DistributedSampler
from transformers import trainer_pt_utils
from transformers.trainer_pt_utils import DistributedLengthGroupedSampler, LengthGroupedSampler


def batched(sampler, batch_size, drop_last):
    return [list(batch) for batch in BatchSampler(sampler, batch_size, drop_last)]


def torch_distributed(n, c, rank, epoch, shuffle):
    sampler = DistributedSampler(range(n), num_replicas=c["world_size"], rank=rank, shuffle=shuffle, seed=c["seed"])
    sampler.set_epoch(epoch)
    return sampler


def length_grouped(c, rank, epoch):
    grouping = c["options"].get("grouping_batch_size", c["batch_size"])
    if c["world_size"] == 1:
        generator = torch.Generator().manual_seed(c["seed"] + epoch)
        return LengthGroupedSampler(grouping, lengths=c["lengths"], generator=generator)
    sampler = DistributedLengthGroupedSampler(grouping, num_replicas=c["world_size"], rank=rank, seed=c["seed"],
                                              lengths=c["lengths"])
    sampler.set_epoch(epoch)
    return sampler


def group_by_length_batches(c, rank, epoch, drop_last):
    grouping = trainer_pt_utils.get_length_grouped_indices
    if "mega_batch_mult" in c["options"]:  # the samplers do not pass it on; they call the module's function
        grouping = functools.partial(grouping, mega_batch_mult=c["options"]["mega_batch_mult"])
    with mock.patch.object(trainer_pt_utils, "get_length_grouped_indices", grouping):
        return [[[i] for i in b] for b in batched(length_grouped(c, rank, epoch), c["batch_size"], drop_last)]


def first_fit_decreasing(lengths, capacity):
    """Longest first (ties by index); each into the first row, in opening order, with room."""
    rows, room = [], []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, left in enumerate(room):
            if left >= lengths[i]:
                break
        else:
            r = len(rows)
            rows.append([])
            room.append(capacity)
        rows[r].append(i)
        room[r] -= lengths[i]
    return rows


def efficiency(batches, lengths, sequence_len):
    rows = [row for batch in batches for row in batch]
    if not rows:
        return 0.0
    return sum(lengths[i] for row in rows for i in row) / (len(rows) * sequence_len)


def run(c, rank, epoch):
    n, bs = len(c["lengths"]), c["batch_size"]
    drop_last = c["options"].get("drop_last", False)
    name = c["sampler"]
    out = {"rank": rank, "epoch": epoch}
    if name in ("sequential", "random"):
        sampler = torch_distributed(n, c, rank, epoch, shuffle=(name == "random"))
        out["batches"] = [[[i] for i in b] for b in batched(sampler, bs, drop_last)]
    elif name == "group_by_length":
        out["batches"] = group_by_length_batches(c, rank, epoch, drop_last)
    elif name == "multipack":
        rows = first_fit_decreasing(c["lengths"], c["sequence_len"])
        assert all(sum(c["lengths"][i] for i in row) <= c["sequence_len"] for row in rows)
        sampler = torch_distributed(len(rows), c, rank, epoch, shuffle=True)
        out["batches"] = [[rows[u] for u in b] for b in batched(sampler, bs, drop_last)]
        out["efficiency"] = efficiency(out["batches"], c["lengths"], c["sequence_len"])
    else:
        raise ValueError(f"no reference for sampler {name!r}")
    return out


def reference(c):
    runs = [run(c, rank, epoch) for epoch in c["epochs"] for rank in range(c["world_size"])]
    return {"id": c["id"], "runs": runs}


def main():
    configs = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    json.dump([reference(c) for c in configs], sys.stdout)


if __name__ == "__main__":
    main()
