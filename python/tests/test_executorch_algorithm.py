"""memplan.executorch's algorithm on hand-made tensor specs: every rule of ExecuTorch's
memory planning that it must honour (pinned mem_ids, reserved submodule bytes,
storage-backed specs, zero-size specs, extra padding, banks), without exporting a model.
The exported-model tests are in test_executorch_models.py."""

import pytest
from executorch.exir.banked_memory_planning import Bank, TargetMemoryMap

import memplan
from memplan.executorch import BankPlacementError, MemplanAlgorithm


class Spec:
    """The part of ExecuTorch's TensorSpec a memory planning algorithm reads."""

    def __init__(self, nbytes, first, last, mem_id=None, base=None, base_offset=0):
        self.nbytes = nbytes
        self.allocated_memory = nbytes
        self.lifetime = [first, last]
        self.mem_id = mem_id
        self.storage_base = base
        self.storage_base_offset = base_offset
        self.shape = [nbytes]
        self.alignment = 16

    def realign(self, alignment):
        self.alignment = alignment
        self.allocated_memory = -(-self.nbytes // alignment) * alignment
        return self.allocated_memory


class Module:
    pass


def run(specs, extra_padding=0, reserved=None, **options):
    module = Module()
    if reserved is not None:
        module.input_mem_buffer_sizes = reserved
    return MemplanAlgorithm(**options)(16, specs, module, None, extra_padding)


def placement(result, spec):
    r = result.spec_dict[spec]
    return r.mem_id, r.mem_offset


def assert_no_overlap(result, specs):
    for i, a in enumerate(specs):
        for b in specs[i + 1:]:
            if a.allocated_memory == 0 or b.allocated_memory == 0:
                continue
            if b.storage_base is a or a.storage_base is b:
                continue
            ma, oa = placement(result, a)
            mb, ob = placement(result, b)
            live = a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]
            bytes_shared = oa < ob + b.allocated_memory and ob < oa + a.allocated_memory
            assert not (ma == mb and live and bytes_shared), (a.lifetime, b.lifetime)


def test_inclusive_lifetimes_and_realignment():
    a, b, c = Spec(100, 0, 1), Spec(100, 1, 2), Spec(100, 2, 3)
    result = run([a, b, c])
    # Inclusive: a and b share step 1, b and c step 2; a and c may share bytes.
    assert all(s.allocated_memory == 112 for s in (a, b, c))
    assert result.bufsizes == [0, 224]
    assert placement(result, a)[1] == placement(result, c)[1]
    assert_no_overlap(result, [a, b, c])


def test_pinned_mem_ids_are_planned_separately_and_kept():
    a, b = Spec(64, 0, 5, mem_id=2), Spec(64, 0, 5)
    c = Spec(32, 0, 5, mem_id=2)
    result = run([a, b, c])
    assert placement(result, a)[0] == 2 and placement(result, c)[0] == 2
    assert placement(result, b) == (1, 0)
    assert result.bufsizes == [0, 64, 96]


def test_reserved_submodule_bytes_and_extra_padding():
    a, b = Spec(64, 0, 1), Spec(64, 1, 2)
    result = run([a, b], extra_padding=64, reserved=[0, 48])
    assert min(placement(result, s)[1] for s in (a, b)) == 48
    assert result.bufsizes == [0, 48 + 128 + 64]


def test_zero_size_specs_are_planned_and_occupy_nothing():
    zero = Spec(0, 0, 9)
    a, b = Spec(64, 0, 3), Spec(64, 4, 9)
    result = run([a, zero, b])
    assert zero in result.spec_dict
    assert result.bufsizes == [0, 64]


def test_storage_backed_specs_live_inside_their_base():
    base = Spec(256, 0, 6)
    view = Spec(64, 2, 4, base=base, base_offset=128)
    other = Spec(128, 0, 6)
    result = run([base, view, other])
    mem, off = placement(result, base)
    assert placement(result, view) == (mem, off + 128)
    assert_no_overlap(result, [base, view, other])
    bad = Spec(64, 2, 4, base=base, base_offset=224)
    with pytest.raises(memplan.PlanningError, match="does not fit"):
        run([base, bad])


def test_a_wrong_plan_is_refused():
    a, b = Spec(64, 0, 2), Spec(64, 1, 3)
    with pytest.raises(memplan.PlanningError, match="refuses"):
        run([a, b], planner=lambda problem: [0] * len(problem))


def test_banks_spill_by_capacity_and_overflow_fails():
    specs = [Spec(1024, i, i + 2) for i in range(6)] + [Spec(4096, 0, 7)]
    target = TargetMemoryMap([Bank("sram", 3072, 1), Bank("dram", 1 << 20, 2)])
    result = run(specs, target=target)
    assert result.bufsizes[1] <= 3072
    assert any(placement(result, s)[0] == 2 for s in specs)
    assert_no_overlap(result, specs)
    with pytest.raises(BankPlacementError, match="no declared bank can hold"):
        run(specs, target=TargetMemoryMap([Bank("sram", 3072, 1)]))
    pinned = [Spec(4096, 0, 1, mem_id=1)]
    with pytest.raises(BankPlacementError, match="pinned to bank sram"):
        run(pinned, target=TargetMemoryMap([Bank("sram", 1024, 1)]))


class InplaceSpec(Spec):
    """A stand-in for the TensorSpec of ExecuTorch's main branch, which has ``inplace_base``
    (an alias at offset 0) and no ``storage_base``/``storage_base_offset``. The installed
    ExecuTorch (1.5) still has the older fields, so this newer shape can only be tested
    with a hand-made object, whose old fields are deleted so that they are missing as
    they are on main."""

    def __init__(self, nbytes, first, last, base=None):
        super().__init__(nbytes, first, last)
        del self.storage_base, self.storage_base_offset
        self.inplace_base = base


class OpaqueSpec(Spec):
    """A spec with neither aliasing field: a TensorSpec memplan cannot interpret."""

    def __init__(self, nbytes, first, last):
        super().__init__(nbytes, first, last)
        del self.storage_base, self.storage_base_offset


def test_newer_inplace_base_specs_live_at_their_base():
    base = InplaceSpec(256, 0, 6)
    view = InplaceSpec(256, 2, 4, base=base)
    other = InplaceSpec(128, 0, 6)
    assert not hasattr(view, "storage_base")
    result = run([base, view, other])
    assert placement(result, view) == placement(result, base)
    # The alias owns no bytes of its own: the arena is base + other.
    assert result.bufsizes == [0, 256 + 128]
    mem, off = placement(result, base)
    om, oo = placement(result, other)
    assert mem == om and (oo >= off + 256 or oo + 128 <= off)


def test_a_spec_without_an_aliasing_field_is_refused():
    with pytest.raises(memplan.InputError, match="neither storage_base nor inplace_base"):
        run([OpaqueSpec(64, 0, 1), OpaqueSpec(64, 1, 2)])


def test_the_installed_tensorspec_is_read_by_its_storage_fields():
    """The installed ExecuTorch's own TensorSpec (1.5: storage_base, storage_base_offset,
    and inplace_base as a property valid only at offset 0): the offset is read from
    storage_base_offset, and inplace_base, which would fail at offset 32, is not read."""
    import torch
    from executorch.exir.tensor import TensorSpec

    from memplan.executorch import _storage

    base = TensorSpec.from_tensor(torch.zeros(64))
    view = TensorSpec.from_tensor(torch.zeros(8))
    view.storage_base = base
    view.storage_base_offset = 32
    assert _storage(base) is None
    assert _storage(view) == (base, 32)
    assert _storage(InplaceSpec(8, 0, 1, base=base)) == (base, 0)
