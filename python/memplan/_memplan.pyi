"""Type stubs of memplan's native module (checked by `python -m mypy.stubtest memplan._memplan`)."""

from os import PathLike
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union, final

__all__ = [
    "__version__",
    "MemplanError",
    "InputError",
    "FormatError",
    "ModelError",
    "PlanningError",
    "Buffer",
    "Problem",
    "PlanResult",
    "Violation",
    "plan",
    "plan_file",
    "check",
    "planners",
    "swap_plan_trace",
    "read_plan",
    "load_onnx",
    "load_tflite",
]

__version__: str

class MemplanError(Exception): ...
class InputError(MemplanError): ...
class FormatError(InputError): ...
class ModelError(InputError): ...
class PlanningError(MemplanError): ...

@final
class Buffer:
    @property
    def name(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def alignment(self) -> int: ...
    @property
    def offset(self) -> Optional[int]: ...
    def __new__(
        cls,
        name: str,
        size: int,
        start: int,
        end: int,
        alignment: int = 1,
        offset: Optional[int] = None,
    ) -> Buffer: ...

@final
class Problem:
    def __new__(cls, buffers: Sequence[Buffer]) -> Problem: ...
    @staticmethod
    def from_lists(
        sizes: Sequence[int],
        starts: Sequence[int],
        ends: Sequence[int],
        names: Optional[Sequence[str]] = None,
        alignments: Optional[Sequence[int]] = None,
        offsets: Optional[Sequence[Optional[int]]] = None,
    ) -> Problem: ...
    @staticmethod
    def from_csv(text: str, source: str = "<string>") -> Problem: ...
    def to_csv(self) -> str: ...
    @property
    def buffers(self) -> List[Buffer]: ...
    @property
    def names(self) -> List[str]: ...
    def lower_bound(self) -> int: ...
    def with_alignment(self, alignment: int) -> Problem: ...
    def __len__(self) -> int: ...

@final
class PlanResult:
    @property
    def offsets(self) -> List[int]: ...
    @property
    def arena(self) -> int: ...
    @property
    def lower_bound(self) -> int: ...
    @property
    def max_live(self) -> int: ...
    @property
    def alignment(self) -> int: ...
    @property
    def planner(self) -> str: ...
    @property
    def chosen(self) -> Optional[str]: ...
    @property
    def proven_optimal(self) -> Optional[bool]: ...
    @property
    def stop(self) -> Optional[str]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def names(self) -> List[str]: ...
    @property
    def problem(self) -> Problem: ...
    @property
    def ratio(self) -> float: ...
    def offset_of(self, name: str) -> int: ...
    def as_dict(self) -> Dict[str, int]: ...
    def to_json(self, problem: Problem) -> str: ...
    def to_csv(self, problem: Problem) -> str: ...
    def to_html(
        self,
        problem: Optional[Problem] = None,
        *,
        title: Optional[str] = None,
        compare: Optional[Sequence[PlanResult]] = None,
    ) -> str: ...
    def _repr_html_(self) -> str: ...
    def __len__(self) -> int: ...

@final
class Violation:
    @property
    def kind(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def buffers(self) -> List[str]: ...

def plan(
    problem: Problem,
    planner: Optional[str] = None,
    *,
    time_limit: Optional[float] = None,
    alignment: int = 1,
    seed: int = 0,
    threads: int = 0,
    metric: Optional[str] = None,
    max_iters: Optional[int] = None,
    max_reads: Optional[int] = None,
    return_on_interrupt: bool = True,
) -> PlanResult: ...
def plan_file(
    path: Union[str, PathLike[str]],
    planner: Optional[str] = None,
    *,
    alignment: int = 1,
    time_limit: Optional[float] = None,
    seed: int = 0,
    threads: int = 0,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    dims: Optional[Mapping[str, int]] = None,
    alias: bool = True,
    inplace: bool = True,
) -> Tuple[Problem, PlanResult]: ...
def check(problem: Problem, plan: Union[PlanResult, Sequence[int]]) -> List[Violation]: ...
def planners() -> List[Tuple[str, str]]: ...
def swap_plan_trace(
    trace: str,
    *,
    budget: Optional[int] = None,
    max_overhead: Optional[float] = None,
    to_host: bool = True,
    codec: Optional[str] = None,
    recompute: bool = False,
    planner: str = "method",
    improvements: bool = True,
    th_tts_ms: Optional[float] = None,
    th_size: Optional[int] = None,
    max_count: Optional[int] = None,
    source: str = "<trace>",
) -> str: ...
def read_plan(text: str, problem: Problem, source: str = "<string>") -> PlanResult: ...
def load_onnx(
    path: Union[str, PathLike[str]],
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    dims: Optional[Mapping[str, int]] = None,
    alias: bool = True,
    inplace: bool = True,
) -> Problem: ...
def load_tflite(
    path: Union[str, PathLike[str]], alias: bool = True, inplace: bool = True
) -> Problem: ...
