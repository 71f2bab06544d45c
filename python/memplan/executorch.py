"""memplan as ExecuTorch's memory planner.

One line in an export script switches it on::

    from memplan.executorch import memplan_planning_pass

    program = edge.to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=memplan_planning_pass())
    )

ExecuTorch hands the planner its tensor specs (inclusive lifetimes ``[first, last]``,
sizes realigned to the pass's alignment) and trusts whatever offsets come back: its
overlap verifier runs only for its own ``greedy``. memplan therefore checks its own
result with its independent checker before handing it back, and refuses to hand back a
plan that breaks a lifetime, an alignment, a storage alias or a bank's capacity.

What the algorithm handles, as ExecuTorch's ``greedy`` and ``BankedGreedy`` do:

- every ``mem_id`` planned separately; a ``mem_id`` a pass pre-assigned is kept, the
  others go to arena 1 (or, with ``target=``, to the banks of a ``TargetMemoryMap``);
- bytes reserved at the start of an arena by control-flow submodules
  (``graph_module.input_mem_buffer_sizes``) are left free;
- zero-size specs (they occupy nothing), ``extra_padding`` (added to each used arena,
  64 bytes with an XNNPACK delegate);
- storage-backed specs: placed inside their base, with the alignment and containment
  ExecuTorch requires. ExecuTorch 1.5 names the base ``spec.storage_base`` (at
  ``storage_base_offset``); other versions ``spec.inplace_base`` (at offset 0). A spec
  with neither field is refused (:func:`_storage`), as ExecuTorch's ``naive`` refuses
  storage-backed specs, rather than planned as if it owned its bytes;
- banks with capacities: pinned specs must fit their bank, the others fill the banks in
  preference order and spill to the next; one that fits nowhere fails the export with
  ``BankPlacementError``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import memplan

try:  # ExecuTorch is an optional dependency: `pip install memplan[executorch]`.
    from executorch.exir.memory_planning import (
        MemoryAlgoResult,
        MemoryPlanningAlgorithmSuite,
        SpecAllocResult,
    )
    from executorch.exir.passes.memory_planning_pass import MemoryPlanningPass
except ImportError as error:  # pragma: no cover - exercised only without executorch
    raise ImportError(
        "memplan.executorch needs ExecuTorch: pip install executorch"
    ) from error

try:
    from executorch.exir.banked_memory_planning import BankPlacementError, TargetMemoryMap
except ImportError:  # pragma: no cover - ExecuTorch before banked planning

    class BankPlacementError(memplan.PlanningError):  # type: ignore[no-redef]
        """A bank cannot hold the buffers given to it."""

    TargetMemoryMap = Any  # type: ignore[misc,assignment]

__all__ = [
    "BankPlacementError",
    "MemplanAlgorithm",
    "memplan_algorithm",
    "memplan_planning_pass",
]

# A planner: a name of memplan.planners(), or a callable taking a memplan.Problem and
# returning one offset per buffer (an external solver, a plan read from a file).
PlannerLike = Union[str, Callable[[memplan.Problem], Sequence[int]]]


_MISSING = object()


def _storage(spec: Any) -> Optional[Tuple[Any, int]]:
    """``(base, byte offset)`` of a spec whose bytes lie inside another spec's, or None
    for a spec that owns its bytes.

    ExecuTorch 1.5's ``TensorSpec`` has ``storage_base`` and ``storage_base_offset`` (and
    ``inplace_base`` as a property over them, valid only at offset 0, so it is read
    last); ExecuTorch's main branch has ``inplace_base`` alone, an alias at offset 0. A
    spec with neither cannot be interpreted: planning it as owning its bytes could put
    an alias's base under another tensor, so it is refused with ``InputError``.
    """
    base = getattr(spec, "storage_base", _MISSING)
    if base is not _MISSING:
        if base is None:
            return None
        return base, int(getattr(spec, "storage_base_offset", 0))
    base = getattr(spec, "inplace_base", _MISSING)
    if base is not _MISSING:
        return None if base is None else (base, 0)
    raise memplan.InputError(
        f"tensor spec {spec!r} ({type(spec).__module__}.{type(spec).__qualname__}) has "
        f"neither storage_base nor inplace_base, so memplan cannot tell which tensors "
        f"share bytes; this ExecuTorch's TensorSpec is not one memplan understands. Use "
        f"ExecuTorch's greedy algorithm, or a memplan that supports this ExecuTorch."
    )


def _refuse_if_invalid(problem: memplan.Problem, offsets: Sequence[int], what: str) -> None:
    """Raises PlanningError listing the checker's violations of `offsets`, if any."""
    violations = memplan.check(problem, offsets)
    if violations:
        shown = "\n  ".join(v.message for v in violations[:10])
        raise memplan.PlanningError(
            f"memplan refuses {what}: {len(violations)} violations, ExecuTorch would run "
            f"it with wrong results:\n  {shown}"
        )


class MemplanAlgorithm:
    """A memory planning algorithm for ExecuTorch, for a ``MemoryPlanningAlgorithmSuite``:
    called with ``(alignment, specs, graph_module, graph_signature, extra_padding)``, it
    returns a ``MemoryAlgoResult``.

    :param planner: ``None`` (default: memplan's default planner, ``search`` for at most
        one second per arena, as ``memplan plan`` without ``--planner``), ``"search"``,
        ``"best-of"``, any name of :func:`memplan.planners`, or a callable
        ``problem -> offsets`` whose plan memplan checks before using it.
    :param time_limit: seconds for ``search`` per arena (default: one second for the
        default planner, five for ``"search"``).
    :param target: an ExecuTorch ``TargetMemoryMap`` of banks with capacities.
    """

    def __init__(
        self,
        planner: Optional[PlannerLike] = None,
        *,
        time_limit: Optional[float] = None,
        target: Optional[TargetMemoryMap] = None,
    ) -> None:
        self.planner = planner
        self.time_limit = time_limit
        self.target = target
        self.__name__ = "memplan"
        # What the last call planned, per mem_id: (arena, lower bound), for reports.
        self.last_arenas: Dict[int, tuple] = {}

    # -- planning one arena -------------------------------------------------------------

    def _plan(self, problem: memplan.Problem, planner: Optional[PlannerLike] = None) -> List[int]:
        planner = self.planner if planner is None else planner
        if callable(planner):
            offsets = [int(o) for o in planner(problem)]
        elif planner is None or planner == "search":
            offsets = memplan.plan(problem, planner, time_limit=self.time_limit).offsets
        else:
            offsets = memplan.plan(problem, planner).offsets
        _refuse_if_invalid(problem, offsets, f"the plan of {len(problem)} tensors")
        return offsets

    @staticmethod
    def _problem(specs: Sequence[Any], alignment: int) -> memplan.Problem:
        sizes, starts, ends = [], [], []
        for i, spec in enumerate(specs):
            first, last = spec.lifetime
            if first is None or last is None or last < first:
                raise memplan.InputError(
                    f"tensor spec {i} (shape {list(spec.shape)}) has lifetime "
                    f"{spec.lifetime}; ExecuTorch's memory planning pass should have set it"
                )
            sizes.append(int(spec.allocated_memory))
            starts.append(int(first))
            ends.append(int(last) + 1)
        return memplan.Problem.from_lists(
            sizes, starts, ends, names=[str(i) for i in range(len(specs))],
            alignments=[alignment] * len(specs),
        )

    @staticmethod
    def _arena(problem: memplan.Problem, offsets: Sequence[int]) -> int:
        return max((o + b.size for o, b in zip(offsets, problem.buffers)), default=0)

    # -- banks ----------------------------------------------------------------------------

    def _bank_alignment(self, mem_id: int, alignment: int) -> int:
        if self.target is None or not self.target.manages(mem_id):
            return alignment
        bank_alignment = self.target.bank(mem_id).alignment
        if bank_alignment is None:
            return alignment
        if bank_alignment % alignment:
            raise BankPlacementError(
                f"bank {self.target.bank(mem_id).name} declares alignment {bank_alignment}, "
                f"not a multiple of the graph's alignment {alignment}"
            )
        return bank_alignment

    def _usage(self, specs: Sequence[Any], alignment: int, reserved: int, padding: int) -> int:
        """Bytes an arena holding `specs` needs (best-of: fast, for the spill loop)."""
        if not specs:
            return reserved
        problem = self._problem(specs, alignment)
        return reserved + memplan.plan(problem, "best-of").arena + padding

    def _assign_banks(
        self,
        roots: List[Any],
        alignment: int,
        reserved: Dict[int, int],
        padding: int,
    ) -> Dict[int, List[Any]]:
        """Specs per mem_id: pins where pinned, the rest filling declared banks in
        preference order, the largest spilling first."""
        by_mem: Dict[int, List[Any]] = defaultdict(list)
        free: List[Any] = []
        for spec in roots:
            if spec.mem_id is not None:
                by_mem[spec.mem_id].append(spec)
            else:
                free.append(spec)
        if self.target is None:
            if free:
                by_mem[1].extend(free)
            return by_mem
        banks = self.target.banks
        for mem_id, pinned in by_mem.items():
            if not self.target.manages(mem_id):
                continue
            bank = self.target.bank(mem_id)
            need = self._usage(pinned, self._bank_alignment(mem_id, alignment),
                               reserved.get(mem_id, 0), padding)
            if need > bank.size:
                raise BankPlacementError(
                    f"the {len(pinned)} buffers pinned to bank {bank.name} (mem_id={mem_id}) "
                    f"need {need} bytes, but the bank has {bank.size}; a pinned buffer has "
                    f"no fallback bank. Give the bank more room or pin fewer buffers to it."
                )
        # Spill the largest first (ties: the longest-lived), so that what stays behind
        # packs best.
        spill = sorted(free, key=lambda s: (s.allocated_memory, s.lifetime[1] - s.lifetime[0]))
        for bank in banks:
            placed = by_mem[bank.mem_id]
            align = self._bank_alignment(bank.mem_id, alignment)
            moved: List[Any] = []
            # Try everything left; move the largest out until the bank fits.
            candidates = list(spill)
            while True:
                need = self._usage(placed + candidates, align, reserved.get(bank.mem_id, 0), padding)
                if need <= bank.size or not candidates:
                    break
                moved.append(candidates.pop())
            if need > bank.size:
                raise BankPlacementError(
                    f"bank {bank.name} (mem_id={bank.mem_id}) cannot hold even its pinned "
                    f"buffers: {need} bytes of {bank.size}"
                )
            placed.extend(candidates)
            spill = sorted(moved, key=lambda s: (s.allocated_memory, s.lifetime[1] - s.lifetime[0]))
            if not spill:
                break
        if spill:
            largest = spill[-1]
            raise BankPlacementError(
                f"no declared bank can hold {len(spill)} more buffers (the largest "
                f"{largest.allocated_memory} bytes, shape {list(largest.shape)}): "
                f"{self.target.describe()}. Give a bank more room, or declare another one."
            )
        return by_mem

    # -- the algorithm --------------------------------------------------------------------

    def __call__(
        self,
        alignment: int,
        specs: Iterable[Any],
        graph_module: Any,
        graph_signature: Any = None,
        extra_padding: int = 0,
    ) -> MemoryAlgoResult:
        result = MemoryAlgoResult({}, [])
        all_specs = list(specs)
        storage = {spec: _storage(spec) for spec in all_specs}
        roots = [s for s in all_specs if storage[s] is None]
        aliases = [s for s in all_specs if storage[s] is not None]
        for spec in all_specs:
            spec.realign(alignment)
        reserved_list = getattr(graph_module, "input_mem_buffer_sizes", None) or []
        reserved = {i: int(r) for i, r in enumerate(reserved_list)}

        by_mem = self._assign_banks(roots, alignment, reserved, extra_padding)
        placed: Dict[Any, tuple] = {}  # spec -> (mem_id, obj_id, offset)
        sizes: Dict[int, int] = {}
        self.last_arenas = {}
        for mem_id in sorted(by_mem):
            group = by_mem[mem_id]
            if not group:
                continue
            align = self._bank_alignment(mem_id, alignment)
            for spec in group:
                spec.realign(align)
            problem = self._problem(group, align)
            offsets = self._plan(problem)
            if self.target is not None and self.target.manages(mem_id):
                # search never ends above best-of, but a custom planner might: keep the
                # smaller of the two when the bank is tight.
                base = reserved.get(mem_id, 0)
                if base + self._arena(problem, offsets) + extra_padding > self.target.bank(mem_id).size:
                    offsets = self._plan(problem, "best-of")
            arena = self._arena(problem, offsets)
            self.last_arenas[mem_id] = (arena, problem.lower_bound())
            base = reserved.get(mem_id, 0)
            for obj, (spec, offset) in enumerate(zip(group, offsets)):
                placed[spec] = (mem_id, obj, base + offset)
            sizes[mem_id] = base + arena + extra_padding
            if self.target is not None and self.target.manages(mem_id):
                bank = self.target.bank(mem_id)
                if sizes[mem_id] > bank.size:
                    raise BankPlacementError(
                        f"bank {bank.name} (mem_id={mem_id}) needs {sizes[mem_id]} bytes "
                        f"but holds {bank.size}: {self.target.describe()}"
                    )

        # Storage-backed specs live inside their base's bytes.
        pending = list(aliases)
        while pending:
            progress = False
            rest = []
            for spec in pending:
                base, within = storage[spec]
                if base not in placed:
                    rest.append(spec)
                    continue
                mem_id, obj, base_offset = placed[base]
                offset = base_offset + within
                if within < 0 or within + spec.allocated_memory > base.allocated_memory:
                    raise memplan.PlanningError(
                        f"a storage-backed tensor spec (shape {list(spec.shape)}, "
                        f"{spec.allocated_memory} bytes at offset {within}) "
                        f"does not fit in its {base.allocated_memory}-byte base"
                    )
                if offset % spec.alignment:
                    raise memplan.PlanningError(
                        f"a storage-backed tensor spec lands at offset {offset}, not a "
                        f"multiple of its alignment {spec.alignment}"
                    )
                placed[spec] = (mem_id, obj, offset)
                progress = True
            if not progress:
                raise memplan.PlanningError(
                    f"{len(rest)} storage-backed tensor specs have a base that is not "
                    f"planned (circular or missing storage_base/inplace_base)"
                )
            pending = rest

        self._verify(all_specs, placed, storage)
        for spec, (mem_id, obj, offset) in placed.items():
            result.spec_dict[spec] = SpecAllocResult(mem_id, obj, offset)
        length = max([1, *sizes.keys()]) + 1
        result.bufsizes = [sizes.get(i, 0) for i in range(length)]
        return result

    @staticmethod
    def _verify(
        specs: Sequence[Any],
        placed: Dict[Any, tuple],
        storage: Dict[Any, Optional[Tuple[Any, int]]],
    ) -> None:
        """memplan's checker over the final placement of every spec that owns bytes,
        per arena: what ExecuTorch will run, checked independently of how it was made."""
        by_mem: Dict[int, List[Any]] = defaultdict(list)
        for spec in specs:
            if spec not in placed:
                raise memplan.PlanningError(f"tensor spec {spec} was not planned")
            if storage[spec] is None:
                by_mem[placed[spec][0]].append(spec)
        for mem_id, group in by_mem.items():
            problem = MemplanAlgorithm._problem(group, 1)
            offsets = [placed[s][2] for s in group]
            _refuse_if_invalid(problem, offsets, f"its plan of arena {mem_id}")


def memplan_algorithm(
    planner: Optional[PlannerLike] = None,
    *,
    time_limit: Optional[float] = None,
    target: Optional[TargetMemoryMap] = None,
) -> MemoryPlanningAlgorithmSuite:
    """The value for ``MemoryPlanningPass(memory_planning_algo=...)``: memplan in
    ExecuTorch's algorithm suite, which writes the plan back onto the specs."""
    return MemoryPlanningAlgorithmSuite(
        [MemplanAlgorithm(planner, time_limit=time_limit, target=target)]
    )


def memplan_planning_pass(
    planner: Optional[PlannerLike] = None,
    *,
    time_limit: Optional[float] = None,
    target: Optional[TargetMemoryMap] = None,
    alignment: int = 16,
    **pass_options: Any,
) -> MemoryPlanningPass:
    """A fresh ``MemoryPlanningPass`` that plans with memplan; pass it as
    ``ExecutorchBackendConfig(memory_planning_pass=memplan_planning_pass())``. Other
    keyword arguments go to ``MemoryPlanningPass`` (``alloc_graph_input`` and friends)."""
    return MemoryPlanningPass(
        memory_planning_algo=memplan_algorithm(planner, time_limit=time_limit, target=target),
        alignment=alignment,
        **pass_options,
    )
