"""Load-time selection: the programs of a catalog a runtime loads for one decode mode."""

from __future__ import annotations

from ignition.components.capacity import CapacityError
from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.recipes import SPECULATION_MODES


def select_for_mode(catalog: Catalog, speculation: str, mixed: bool = True) -> Catalog:
    """The programs a runtime loads for one decode mode.

    Core selection keeps the speculation_enabled variant matching the mode:
    ``off`` serves ordinary decode and ordinary mixed programs; ``fixed`` the
    host-allocated speculative ones (width one keeps the draft state);
    ``adaptive`` adds the device-allocated ones. Prefill programs serve every mode.
    ``mixed=False`` drops mixed programs (``--no-mixed``).
    """
    if speculation not in SPECULATION_MODES:
        raise CapacityError(
            f"speculation mode {speculation!r}: expected one of {SPECULATION_MODES}"
        )
    speculative = speculation != "off"

    def keep(d: Descriptor) -> bool:
        if d.kind is GraphKind.PREFILL:
            return True
        if d.kind is GraphKind.DECODE:
            return not speculative
        if d.kind is GraphKind.MIXED and not mixed:
            return False
        if d.kind in (GraphKind.SPECULATIVE, GraphKind.MIXED):
            allocation_ok = speculation == "adaptive" or not d.is_device_allocated
            return d.speculation_enabled == speculative and allocation_ok
        return True  # state operations serve every mode

    kept = tuple(d for d in catalog.descriptors if keep(d))
    if not any(d.kind not in (GraphKind.PREFILL, GraphKind.VISION) for d in kept):
        raise CapacityError(
            f"catalog of {catalog.recipe} has no decode programs for speculation {speculation!r}"
        )
    return Catalog(catalog.recipe, {**catalog.options, "runtime_speculation": speculation}, kept)
