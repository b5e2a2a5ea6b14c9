"""Data-parallel training under torchrun: how one optimizer step is spread over the ranks.

Every rank builds the same batches and takes every world-th micro-batch of a step; each
micro-batch's loss is divided by the supervised tokens of the whole step (all ranks), so the
step's gradient is the *sum* of the ranks' gradients. Two ways to get that sum:

* `ddp` (the default): every rank holds the whole model; after the step's backward passes the
  trainable gradients are summed in one flat all-reduce (`all_reduce_grads`).
* `fsdp`: PyTorch's FSDP2 (`fully_shard`) splits every weight, gradient and AdamW state
  across the ranks. Each decoder layer is one unit, all-gathered just for its forward and its
  backward; a root unit (`Sharded`) holds the rest — embeddings, final norm, LM head (tied or
  not) — and is the module the loop calls as its decoder body, so FSDP's root hooks wrap every
  pass. Gradients are reduce-scattered as sums. Because every pass all-gathers with the other
  ranks, all ranks must run the same number of passes (`passes` pads with zero-weight ones),
  and the saved weights are gathered first (`full_state`): checkpoints and the final adapter or
  model have exactly the single-process format, so a run can resume under either mode.

Works on CUDA (NCCL) and on CPU (gloo: torch 2.13's `fully_shard` takes a CPU device mesh;
gloo has no pre-scaled sum, so reductions are plain sums). QLoRA shards too: bitsandbytes keeps
each 4-bit layer's quantisation state on the module and re-attaches it to the all-gathered
weight.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn

from mens.errors import MensError

MODES = ("auto", "ddp", "fsdp")


def build_in_shares(items: list, build: Callable[[list, int], object], rank: int, world: int) -> list:
    """`build(share, start)` over this rank's contiguous share of `items`, gathered from every
    rank in rank order: each rank ends with every share's result for a world-th of the work
    (every rank used to tokenize all the pairs itself). A user error on any rank is raised on
    every rank, so none is left waiting in a collective."""
    if world == 1 or not dist.is_initialized():
        return [build(items, 0)]
    lo, hi = len(items) * rank // world, len(items) * (rank + 1) // world
    try:
        mine = (build(items[lo:hi], lo), None)
    except MensError as exc:
        mine = (None, (exc.what, exc.where, exc.todo))
    gathered: list = [None] * world
    dist.all_gather_object(gathered, mine)
    for _, err in gathered:
        if err is not None:
            raise MensError(*err)
    return [result for result, _ in gathered]


def mode(requested: str, world: int) -> str | None:
    """The data-parallel mode of a run: None in one process, else ddp or fsdp (auto = ddp)."""
    if world <= 1:
        return None
    return "ddp" if requested == "auto" else requested


# ---------------------------------------------------------------- ddp

def all_reduce_grads(params: list[torch.Tensor], shared: SharedSum | None = None) -> None:
    """Sum every trainable gradient across ranks in one flat fp32 all-reduce (a rank whose
    passes gave a weight no gradient contributes zeros), through `shared` memory when given."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1).float() for g in grads])
    if shared is not None:
        shared(flat)
    else:
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for p in params:
        p.grad = flat[offset: offset + p.numel()].view_as(p).to(p.dtype)
        offset += p.numel()


class SharedSum:
    """The sum of a flat fp32 vector over ranks that share one host's memory: each rank copies
    its vector into its slot of a shared buffer, and after a barrier each sums the slots (in
    slot order, so every rank gets the same bits). gloo's all-reduce runs over TCP even between
    processes on one machine: 5.8 ms for the quickstart base's 1.2M gradients on two ranks,
    against ~2 ms this way (`mens train --nproc 2` on a 2-core CPU). Made by `shared_sum`, which
    says when it applies."""

    def __init__(self, slots: torch.Tensor, rank: int):
        self.slots, self.rank = slots, rank

    def __call__(self, flat: torch.Tensor) -> None:
        self.slots[self.rank].copy_(flat)
        dist.barrier()                      # every slot written
        torch.sum(self.slots, dim=0, out=flat)
        dist.barrier()                      # every slot read: the next call may overwrite them


SHARED_SUM_MAX_BYTES = 1 << 30
_SHM = "/dev/shm"


def shared_sum(numel: int, device: str) -> SharedSum | None:
    """A SharedSum for `numel` floats when every rank is a CPU process on this host (as `mens
    train --nproc` starts them, or torchrun on one node) and /dev/shm has room; else None
    (gloo's all-reduce). Collective: every rank must call it."""
    world, rank = dist.get_world_size(), dist.get_rank()
    local = os.environ.get("LOCAL_WORLD_SIZE")
    size = world * numel * 4
    if device != "cpu" or local is None or int(local) != world or size > SHARED_SUM_MAX_BYTES:
        return None
    path = ""
    if rank == 0:
        try:  # reserved now: a /dev/shm too small fails here, not with SIGBUS at the first write
            fd, path = tempfile.mkstemp(prefix="mens-grads.", dir=_SHM)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except (OSError, AttributeError):
            if path:
                os.unlink(path)
            path = ""
    box = [path]
    dist.broadcast_object_list(box, src=0)
    path = box[0]
    if not path:
        return None
    try:
        slots = torch.from_file(path, shared=True, size=world * numel, dtype=torch.float32).view(world, numel)
    except (OSError, RuntimeError):
        slots = None
    mapped = torch.tensor([0.0 if slots is None else 1.0])
    dist.all_reduce(mapped, op=dist.ReduceOp.MIN)  # all ranks or none; and every one has mapped it
    if rank == 0:
        os.unlink(path)                     # the mappings stay; nothing is left behind in /dev/shm
    return SharedSum(slots, rank) if mapped.item() == 1.0 else None


# ---------------------------------------------------------------- fsdp

class Sharded(nn.Module):
    """The FSDP root: decoder body and LM head under one module whose forward is the body's.
    The loop calls the body and the head separately (the head only at supervised positions);
    calling the body through this module runs FSDP's root hooks, which all-gather the root's
    weights — the head's included — for the whole pass and reduce their gradients after it."""

    def __init__(self, body: nn.Module, head: nn.Module):
        super().__init__()
        self.body, self.head = body, head

    def forward(self, *args, **kwargs):
        return self.body(*args, **kwargs)


def decoder_layers(body: nn.Module) -> nn.ModuleList:
    """The repeated blocks of a decoder body (`layers` in Llama/Qwen/Mistral/Gemma, `h` in
    GPT-2 …): the ModuleList holding most of its parameters."""
    lists = [m for m in body.modules() if isinstance(m, nn.ModuleList) and len(m) > 0]
    if not lists:
        raise MensError(f"cannot find the decoder layers of {type(body).__name__}", "--distributed fsdp",
                        "use --distributed ddp")
    return max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))


def shard(model: nn.Module, body: nn.Module, head: nn.Module, device: torch.device,
          defer_sync: bool) -> Sharded:
    """Shard `model` in place with FSDP2: one unit per decoder layer, then the root over body
    and head. Returns the root, which the loop calls in place of the body. `defer_sync`:
    reduce gradients only at a step's last backward pass (small adapter gradients) instead of
    after every pass (whole-model gradients are never held unsharded)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if device.type not in ("cpu", "cuda"):
        raise MensError(f"--distributed fsdp runs on CUDA or CPU, not {device.type}", "--device",
                        "use --distributed ddp")
    root = Sharded(body, head)
    inside = {id(p) for p in root.parameters()}
    outside = [n for n, p in model.named_parameters() if id(p) not in inside]
    if outside:
        raise MensError(f"the model has weights outside its decoder body and LM head ({outside[0]})",
                        "--distributed fsdp", "use --distributed ddp")
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for layer in decoder_layers(body):
        fully_shard(layer, mesh=mesh)
    fully_shard(root, mesh=mesh)
    for module in root.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)           # sum, as the loss is already normalised
            module.set_force_sum_reduction_for_comms(True)   # a plain SUM (gloo has no PREMUL_SUM)
    root.defer_sync, root.device = defer_sync, device
    return root


def passes(batches: list, rank: int, world: int, split: Callable[[object], list],
           root: Sharded | None) -> Iterator[tuple[object, float]]:
    """This rank's forward/backward passes over `batches` (a step's window, or the validation
    batches) as (part, weight): every world-th micro-batch, each cut by `split` into row groups.

    Unsharded (`root` None), lazily and each with weight 1. Sharded, every pass all-gathers
    weights with the other ranks, so the ranks agree on the most passes any of them has and a
    rank with fewer adds passes of weight 0 over a real part (same graph, zero gradient);
    gradient sync is switched on for the last pass only when the root defers it; and the root's
    weights are resharded at the end (an eval forward leaves them gathered)."""
    mine = batches[rank::world]
    if root is None:
        for b in mine:
            for part in split(b):
                yield part, 1.0
        return
    parts = [part for b in mine for part in split(b)]
    most = torch.tensor(len(parts), device=root.device)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    filler = parts[0] if parts else (split(batches[0])[0] if batches else None)
    todo = [(part, 1.0) for part in parts] + [(filler, 0.0)] * (int(most) - len(parts))
    for i, item in enumerate(todo):
        if root.defer_sync:
            root.set_requires_gradient_sync(i == len(todo) - 1)
        yield item
    root.reshard()


def full_state(model: nn.Module, optimizer=None, root: Sharded | None = None) -> dict:
    """The gathered trainable weights (with the persistent buffers, by state-dict name) and
    optimizer state (in `optimizer.state_dict()`'s layout) of a sharded model, as keyword
    arguments of save_checkpoint / a builder's save. A collective: every rank calls it; rank 0 gets
    CPU tensors, the others an empty dict."""
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)

    if root is not None:
        root.reshard()
    options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True)
    weights = get_model_state_dict(model, options=options)
    first: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if name in weights:  # tied weights (embeddings = LM head) share one tensor again, as saved unsharded
            weights[name] = weights[first.setdefault(id(p), name)]
    out = {"weights": weights}
    if optimizer is not None:
        optim = get_optimizer_state_dict(model, optimizer, options=options)
        out["optimizer_state"] = _by_index(optim) if optim else {}
    return out if dist.get_rank() == 0 else {}


def load_optimizer_state(model: nn.Module, optimizer, saved: dict) -> None:
    """Load a full `optimizer.state_dict()` (parameters by index) into a sharded model's
    optimizer: each rank keeps its shard of every state tensor."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    names = {p: n for n, p in model.named_parameters()}
    order = [names[p] for group in optimizer.param_groups for p in group["params"]]
    by_name = {"state": {order[i]: s for i, s in saved["state"].items()},
               "param_groups": [{**g, "params": [order[i] for i in g["params"]]} for g in saved["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, by_name, options=StateDictOptions(full_state_dict=True))


def _by_index(optim: dict) -> dict:
    """torch.distributed.checkpoint's optimizer state (parameters by name) → the layout of
    `optimizer.state_dict()` (parameters numbered in param-group order)."""
    index: dict[str, int] = {}
    groups = [{**g, "params": [index.setdefault(n, len(index)) for n in g["params"]]}
              for g in optim["param_groups"]]
    return {"state": {index[n]: s for n, s in optim["state"].items()}, "param_groups": groups}
