"""Export PyTorch models with ExecuTorch under a chosen memory planner, and run the programs.

A small harness for tests that compare memory plans on real ExecuTorch programs:

    model, inputs = MODELS["mobilenet_v3_small"]()
    lowered = lower(model, inputs)                  # ExecuTorch's default (greedy) planner
    other = lower(model, inputs, algo=my_algo)      # any planner in ExecuTorch's algo form
    for a, b in zip(run(lowered.pte, inputs), run(other.pte, inputs)):
        assert torch.equal(a, b)

The planner hook is `MemoryPlanningPass(memory_planning_algo=algo, alignment=16)`, handed to
`EdgeProgramManager.to_executorch` in `ExecutorchBackendConfig(memory_planning_pass=...)`.
`algo(alignment, specs, graph_module, graph_signature, extra_padding)` is called once per
graph with the specs to plan, and either sets `mem_id` (1-based), `mem_offset` and
`mem_obj_id` (may be None) on every spec and returns the buffer sizes
`[0, bytes_of_mem_id_1, ...]` (the form `MemoryPlanningPass` takes), or returns a
`MemoryAlgoResult` (the form `MemoryPlanningAlgorithmSuite` takes, like ExecuTorch's
`greedy` itself), which `lower` writes onto the specs the way the suite does.

ExecuTorch itself checks a plan for overlaps only when the algorithm's `__name__` is exactly
"greedy", so a wrong custom plan lowers and often runs without a visible error. `lower`
therefore checks every plan itself (`check_plan`): tensors whose lifetimes overlap must not
share bytes, and every tensor must lie inside its buffer.

Models (`MODELS`), all with random weights from a fixed seed, since no weights can be
downloaded:

- resnet50, mobilenet_v3_small, densenet121: torchvision, weights=None, 1x3x224x224.
- vit: torchvision's `VisionTransformer` at ViT-S/16 width with 6 layers (image 224, patch
  16, 6 heads, hidden 384, mlp 1536), not vit_b_16: on a 2-core machine vit_b_16 lowered in
  17 s but one run on ExecuTorch's portable kernels took 80 s; this one takes 7 s and 4 s.
  Its classification head gets random weights (torchvision zero-initializes it).
- bert: a small BERT-like encoder written here (vocab 1000, seq 64, hidden 256, 4 layers,
  4 heads), int64 token ids in, last hidden state out.
- llama: a small llama-like decoder written here (RMSNorm, rotary embeddings, causal
  attention, SwiGLU MLP; 4 layers, dim 256, 4 heads, vocab 1000, seq 32), prefill only, no KV
  cache, int64 token ids in, logits out.

With random weights mobilenet_v3_small's outputs are tiny (about 1e-9; its activations
shrink block by block), so compare outputs with `torch.equal`, never with an absolute
tolerance.

Only ExecuTorch and torch are used; nothing here knows about a particular planner.
"""

from __future__ import annotations

import copy
import functools
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from executorch.exir import EdgeProgramManager, ExecutorchBackendConfig, to_edge
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.memory_planning import (
    MemoryAlgoResult,
    MemoryPlanningAlgorithmSuite,
    collect_specs_from_nodes,
    greedy,
)
from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
from executorch.runtime import Runtime

ALIGNMENT = 16
SEED = 0

# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


def _seeded(build: Callable[[], tuple[nn.Module, tuple]]) -> Callable[[], tuple[nn.Module, tuple]]:
    """Run `build` under a fixed seed without disturbing the caller's RNG state."""

    @functools.wraps(build)
    def factory() -> tuple[nn.Module, tuple]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            model, inputs = build()
        return model.eval(), inputs

    return factory


def _image() -> tuple[torch.Tensor]:
    return (torch.randn(1, 3, 224, 224),)


def _tokens(vocab: int, seq: int) -> tuple[torch.Tensor]:
    return (torch.randint(0, vocab, (1, seq), dtype=torch.int64),)


class BertEncoder(nn.Module):
    """BERT-like encoder: token + position embeddings, post-norm layers, GELU MLP."""

    def __init__(self, vocab=1000, seq=64, hidden=256, layers=4, heads=4, mlp=1024):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(_BertLayer(hidden, heads, mlp) for _ in range(layers))
        self.register_buffer("positions", torch.arange(seq), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.tok(ids) + self.pos(self.positions[: ids.shape[1]]))
        for layer in self.layers:
            x = layer(x)
        return x


class _BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, mlp)
        self.down = nn.Linear(mlp, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        attn = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = self.norm1(x + self.proj(attn))
        return self.norm2(x + self.down(F.gelu(self.up(x))))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Llama(nn.Module):
    """Llama-like decoder, prefill only: RMSNorm, rotary embeddings, causal attention, SwiGLU."""

    def __init__(self, vocab=1000, seq=32, dim=256, layers=4, heads=4, mlp=688):
        super().__init__()
        head_dim = dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(_LlamaBlock(dim, heads, mlp) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv_freq)  # [seq, head_dim / 2]
        angles = torch.cat([angles, angles], dim=-1)  # [seq, head_dim], rotate-half layout
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        cos, sin, mask = self.cos[:s], self.sin[:s], self.mask[:s, :s]
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.head(self.norm(x))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class _LlamaBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, mlp, bias=False)
        self.up = nn.Linear(dim, mlp, bias=False)
        self.down = nn.Linear(mlp, dim, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, d = x.shape
        h = self.attn_norm(x)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = heads(self.wq(h)), heads(self.wk(h)), heads(self.wv(h))
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + mask
        attn = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.wo(attn)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


@_seeded
def resnet50():
    """torchvision resnet50, random weights, 1x3x224x224."""
    import torchvision

    return torchvision.models.resnet50(weights=None), _image()


@_seeded
def vit():
    """torchvision VisionTransformer, ViT-S/16 width, 6 layers (module doc), 1x3x224x224."""
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(
        image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384, mlp_dim=1536
    )
    # torchvision zero-initializes the classification head, which would make every output 0
    # and output comparisons vacuous.
    nn.init.normal_(model.heads.head.weight, std=0.02)
    return model, _image()


@_seeded
def bert():
    """BertEncoder(vocab 1000, seq 64, hidden 256, 4 layers, 4 heads), int64 ids 1x64."""
    return BertEncoder(), _tokens(1000, 64)


@_seeded
def mobilenet_v3_small():
    """torchvision mobilenet_v3_small, random weights, 1x3x224x224."""
    import torchvision

    return torchvision.models.mobilenet_v3_small(weights=None), _image()


@_seeded
def densenet121():
    """torchvision densenet121, random weights, 1x3x224x224."""
    import torchvision

    return torchvision.models.densenet121(weights=None), _image()


@_seeded
def llama():
    """Llama(vocab 1000, seq 32, dim 256, 4 layers, 4 heads), int64 ids 1x32, prefill only."""
    return Llama(), _tokens(1000, 32)


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple]]] = {
    f.__name__: f for f in (resnet50, vit, bert, mobilenet_v3_small, densenet121, llama)
}

# ---------------------------------------------------------------------------------------------
# Lowering and running
# ---------------------------------------------------------------------------------------------

# algo(alignment, specs, graph_module, graph_signature, extra_padding) -> sizes or MemoryAlgoResult
Algo = Callable[..., Any]


@dataclass
class Lowered:
    """One lowered program: the .pte bytes and the planned non-constant buffers.

    `buffer_sizes[i]` is the size in bytes of planned buffer (mem_id) i as the program
    records it (`ExecutionPlan.non_const_buffer_sizes`); entry 0 stands for constants and is
    always 0. `arena` is the sum of the planned buffers, `sum(buffer_sizes[1:])`.
    """

    pte: bytes
    buffer_sizes: list[int]
    arena: int = field(init=False)

    def __post_init__(self) -> None:
        self.arena = sum(self.buffer_sizes[1:])


def greedy_algo() -> Algo:
    """ExecuTorch's own default planner (its greedy algorithm), in the form `algo` takes.

    `greedy` itself returns a `MemoryAlgoResult`, not buffer sizes; ExecuTorch's default
    planner wraps it in `MemoryPlanningAlgorithmSuite([greedy])`, which writes the result onto
    the specs and returns the sizes. This returns a fresh instance of exactly that.
    """
    return MemoryPlanningAlgorithmSuite(algo_list=[greedy])


def lower(
    model: nn.Module,
    inputs: Sequence,
    algo: Optional[Algo] = None,
    *,
    xnnpack: bool = False,
    check: bool = True,
) -> Lowered:
    """Export `model` on `inputs` and lower it to an ExecuTorch program planned by `algo`.

    torch.export.export -> to_edge (to_edge_transform_and_lower with XnnpackPartitioner when
    xnnpack=True; what it does not take runs on the portable kernels) -> to_executorch with
    `MemoryPlanningPass(memory_planning_algo=algo, alignment=16)`, all under torch.no_grad().
    algo=None is ExecuTorch's default planner (greedy); otherwise either form described in
    the module doc. The edge program is cached per model (see `_edge`). check=True verifies
    the plan with `check_plan` and raises `PlanError` if it is wrong.
    """
    with torch.no_grad():
        edge = _edge(model, tuple(inputs), xnnpack)
        # A fresh pass each time: ExecutorchBackendConfig's default pass object is shared.
        planner = MemoryPlanningPass(
            memory_planning_algo=None if algo is None else _sizes_form(algo), alignment=ALIGNMENT
        )
        program = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner))
    plan = _forward_plan(program.executorch_program)
    lowered = Lowered(pte=program.buffer, buffer_sizes=list(plan.non_const_buffer_sizes))
    if check:
        check_plan(program.exported_program("forward").graph_module, lowered.buffer_sizes)
    return lowered


# model -> {(xnnpack, input signature): (model fingerprint, edge program)}
_EDGE_CACHE: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()


def clear_cache() -> None:
    """Forget every cached edge program."""
    _EDGE_CACHE.clear()


def _edge(model: nn.Module, inputs: tuple, xnnpack: bool) -> EdgeProgramManager:
    """A private copy of the edge program of `model` on `inputs`, exported once per model.

    `to_executorch` rewrites the edge program it is called on (a second call on the same
    object fails), so each lowering gets a deep copy of the cached one; the copy lowers to
    the same bytes as a fresh export. The cache entry is dropped when the model is garbage
    collected, and rebuilt if any parameter or buffer was replaced or modified in place, or
    a module's train/eval mode changed.
    """
    key = (xnnpack, _signature(inputs))
    fingerprint = _fingerprint(model)
    entries = _EDGE_CACHE.setdefault(model, {})
    cached = entries.get(key)
    if cached is None or cached[0] != fingerprint:
        cached = entries[key] = (fingerprint, _export(model, inputs, xnnpack))
    return copy.deepcopy(cached[1])


def _export(model: nn.Module, inputs: tuple, xnnpack: bool) -> EdgeProgramManager:
    exported = torch.export.export(model, inputs)
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    return to_edge(exported)


def _signature(inputs: tuple) -> tuple:
    return tuple(
        (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else (type(x), repr(x))
        for x in inputs
    )


def _fingerprint(model: nn.Module) -> tuple:
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return (
        tuple((name, t.data_ptr(), t._version) for name, t in tensors),
        tuple(m.training for m in model.modules()),
    )


def _sizes_form(algo: Algo) -> Algo:
    """`algo` as MemoryPlanningPass calls it, whichever of the two forms it returns."""

    def planned(alignment, specs, graph_module, graph_signature, extra_padding):
        result = algo(alignment, specs, graph_module, graph_signature, extra_padding)
        if not isinstance(result, MemoryAlgoResult):
            return result
        # What MemoryPlanningAlgorithmSuite does with the result it picks.
        for spec, placed in result.spec_dict.items():
            spec.mem_id = placed.mem_id
            spec.mem_offset = placed.mem_offset
            spec.mem_obj_id = placed.mem_obj_id
        return list(result.bufsizes)

    return planned


def _forward_plan(program):
    plans = [p for p in program.execution_plan if p.name == "forward"]
    assert len(plans) == 1, [p.name for p in program.execution_plan]
    return plans[0]


def run(pte: bytes, inputs: Sequence) -> list[torch.Tensor]:
    """Run method "forward" of a .pte with ExecuTorch's runtime; return its outputs, cloned."""
    method = Runtime.get().load_program(pte).load_method("forward")
    outputs = method.execute(list(inputs))
    return [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]


# ---------------------------------------------------------------------------------------------
# Plan check
# ---------------------------------------------------------------------------------------------


class PlanError(AssertionError):
    """A memory plan that would let two live tensors share bytes, or leave its buffer."""


def check_plan(graph_module: torch.fx.GraphModule, buffer_sizes: Sequence[int]) -> int:
    """Check the plan ExecuTorch recorded on `graph_module`'s tensor specs.

    Every planned tensor (non-constant, non-empty) must have a mem_id in 1..len-1 and lie
    inside that buffer; two tensors in the same buffer whose inclusive lifetimes overlap must
    not share a byte unless one is stored inside the other by design (`storage_base`, used
    for in-place ops). Returns the number of planned tensors checked.
    """
    specs = [
        s
        for s in collect_specs_from_nodes(
            graph_module.graph.nodes,
            ignore_const=True,
            ignore_out_var_node=False,
            dedup=True,
            do_assertion=False,
        )
        if s.allocated_memory > 0
    ]
    by_buffer: dict[int, list] = {}
    for s in specs:
        if s.mem_id is None or s.mem_offset is None:
            raise PlanError(f"unplanned tensor: {_describe(s)}")
        if not 1 <= s.mem_id < len(buffer_sizes):
            raise PlanError(f"mem_id outside buffer_sizes {list(buffer_sizes)}: {_describe(s)}")
        if s.mem_offset < 0 or s.mem_offset + s.allocated_memory > buffer_sizes[s.mem_id]:
            size = buffer_sizes[s.mem_id]
            raise PlanError(f"tensor outside buffer {s.mem_id} of {size} bytes: {_describe(s)}")
        by_buffer.setdefault(s.mem_id, []).append(s)

    for group in by_buffer.values():
        group.sort(key=lambda s: s.mem_offset)
        for i, a in enumerate(group):
            a_end = a.mem_offset + a.allocated_memory
            for b in group[i + 1 :]:
                if b.mem_offset >= a_end:
                    break
                live = max(a.lifetime[0], b.lifetime[0]) <= min(a.lifetime[1], b.lifetime[1])
                if live and not _stored_inside(a, b):
                    raise PlanError(f"live tensors share bytes: {_describe(a)} and {_describe(b)}")
    return len(specs)


def _stored_inside(a, b) -> bool:
    """Whether one spec is stored inside the other by design (a chain of storage_base)."""
    return any(x is b for x in _storage_chain(a)) or any(x is a for x in _storage_chain(b))


def _storage_chain(spec) -> list:
    chain = [spec]
    base = spec.storage_base
    while base is not None and all(x is not base for x in chain):
        chain.append(base)
        base = base.storage_base
    return chain


def _describe(spec) -> str:
    return (
        f"{tuple(spec.shape)} {spec.dtype} {spec.allocated_memory} B at mem_id {spec.mem_id} "
        f"offset {spec.mem_offset}, lifetime {spec.lifetime}"
    )
