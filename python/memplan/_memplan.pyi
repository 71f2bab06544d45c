"""Type stubs of memplan's native module."""

from os import PathLike
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

class MemplanError(Exception): ...
class InputError(MemplanError): ...
class PlanningError(MemplanError): ...

class Buffer:
    name: str
    size: int
    start: int
    end: int
    alignment: int
    offset: Optional[int]
    def __init__(
        self,
        name: str,
        size: int,
        start: int,
        end: int,
        alignment: int = 1,
        offset: Optional[int] = None,
    ) -> None: ...

class Problem:
    def __init__(self, buffers: Sequence[Buffer]) -> None: ...
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

class PlanResult:
    offsets: List[int]
    arena: int
    lower_bound: int
    max_live: int
    alignment: int
    planner: str
    chosen: Optional[str]
    proven_optimal: Optional[bool]
    stop: Optional[str]
    seconds: float
    names: List[str]
    @property
    def ratio(self) -> float: ...
    def offset_of(self, name: str) -> int: ...
    def as_dict(self) -> Dict[str, int]: ...
    def to_json(self, problem: Problem) -> str: ...
    def to_csv(self, problem: Problem) -> str: ...
    def __len__(self) -> int: ...

class Violation:
    kind: str
    message: str
    buffers: List[str]

def plan(
    problem: Problem,
    planner: str = "best-of",
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
def check(problem: Problem, plan: Union[PlanResult, Sequence[int]]) -> List[Violation]: ...
def planners() -> List[Tuple[str, str]]: ...
def read_plan(text: str, problem: Problem, source: str = "<string>") -> PlanResult: ...
def load_onnx(
    path: Union[str, PathLike],
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    dims: Optional[Mapping[str, int]] = None,
    alias: bool = True,
    inplace: bool = True,
) -> Problem: ...
def load_tflite(path: Union[str, PathLike], alias: bool = True, inplace: bool = True) -> Problem: ...
