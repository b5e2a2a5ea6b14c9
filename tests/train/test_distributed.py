"""mens.train.distributed's pass bookkeeping with two real gloo ranks: each rank takes every
world-th micro-batch; under FSDP a rank with fewer passes is padded with zero-weight passes so
every rank all-gathers the same number of times; DDP's flat all-reduce sums the gradients, over
gloo and through shared memory alike; work built in shares reaches every rank, errors too."""

from __future__ import annotations

import json
import os
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from mens.errors import MensError
from mens.train import distributed


def _split(batch):
    """A 'micro-batch' of n rows runs as n passes of one row (as speed.row_groups would)."""
    return [f"{batch['name']}/{i}" for i in range(batch["rows"])]


BATCHES = [{"name": "a", "rows": 2}, {"name": "b", "rows": 1}, {"name": "c", "rows": 1}]


def test_single_process_passes_are_every_part_with_weight_one():
    assert distributed.mode("fsdp", 1) is None and distributed.mode("auto", 2) == "ddp"
    assert list(distributed.passes(BATCHES, 0, 1, _split, None)) == [("a/0", 1.0), ("a/1", 1.0), ("b/0", 1.0),
                                                                      ("c/0", 1.0)]
    assert list(distributed.passes(BATCHES, 1, 2, _split, None)) == [("b/0", 1.0)]  # every world-th batch


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Module()
        self.body.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.head = nn.Linear(4, 2)


def _rank(rank: int, world: int, port: int, out: str) -> None:
    # The rendezvous store lives in the test process (as torchrun keeps it in its agent): a rank
    # that hosted it could exit while the other still talks to it, and gloo aborts that one.
    store = dist.TCPStore("127.0.0.1", port, world, is_master=False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = _Model()
        root = distributed.shard(model, model.body, model.head, torch.device("cpu"), defer_sync=True)
        got = list(distributed.passes(BATCHES, rank, world, _split, root))
        # DDP: rank r's gradient is r + 1 everywhere, except a weight with no gradient on rank 0
        params = [nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2, 2))]
        params[0].grad = torch.full((3,), float(rank + 1))
        params[1].grad = None if rank == 0 else torch.full((2, 2), 5.0)
        own = [p.grad for p in params]
        distributed.all_reduce_grads(params)
        gloo = [p.grad.clone() for p in params]
        # the same sum through shared memory, as `mens train --nproc` ranks on one host take it
        os.environ["LOCAL_WORLD_SIZE"] = str(world)
        shared = distributed.shared_sum(sum(p.numel() for p in params), "cpu")
        for p, g in zip(params, own):
            p.grad = g
        distributed.all_reduce_grads(params, shared)
        # build_in_shares: each rank builds its contiguous share; all get every share, in order
        shares = distributed.build_in_shares(list(range(5)), lambda share, at: [at, share], rank, world)

        def broken_on_rank_1(share, at):
            if at:
                raise MensError("the chat template fails on pair 3", "data.jsonl", "fix the pair")
            return share

        try:
            distributed.build_in_shares(list(range(5)), broken_on_rank_1, rank, world)
            error = None
        except MensError as exc:  # raised on both ranks, not only where it happened
            error = exc.format()
        with open(f"{out}.{rank}", "w") as fh:
            json.dump({"passes": got, "grads": [g.tolist() for g in gloo], "shared": shared is not None,
                       "shared_grads": [p.grad.tolist() for p in params], "shares": shares, "error": error}, fh)
        dist.barrier()
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    # Leave as `mens train`'s ranks do (train/cli.py _end_rank): tearing the gloo group down
    # aborts a rank now and then ("terminate called without an active exception").
    os._exit(0)


@pytest.mark.slow  # two spawned gloo ranks
def test_two_ranks_pad_passes_sum_gradients_and_share_built_work(tmp_path):
    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    mp.spawn(_rank, args=(2, store.port, str(tmp_path / "out")), nprocs=2, join=True)
    del store
    rank0 = json.loads((tmp_path / "out.0").read_text())
    rank1 = json.loads((tmp_path / "out.1").read_text())
    assert rank0["passes"] == [["a/0", 1.0], ["a/1", 1.0], ["c/0", 1.0]]
    # rank 1 has one real pass; two of weight 0 over a real part keep the all-gathers in step
    assert rank1["passes"] == [["b/0", 1.0], ["b/0", 0.0], ["b/0", 0.0]]
    for r in (rank0, rank1):
        assert r["grads"] == [[3.0, 3.0, 3.0], [[5.0, 5.0], [5.0, 5.0]]]
        assert r["shared"] and r["shared_grads"] == r["grads"]
        assert r["shares"] == [[0, [0, 1]], [2, [2, 3, 4]]]
        assert r["error"] == "mens: error: the chat template fails on pair 3 (data.jsonl) — fix the pair"
