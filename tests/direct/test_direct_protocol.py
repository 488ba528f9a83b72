"""The engine takes its scheduler through SchedulerProtocol: debug-serve --direct builds
the engine around the direct scheduler instead of assigning one over Helios."""

from __future__ import annotations

from ignition.direct.scheduler import DirectScheduler, direct_scheduler
from ignition.helios import Scheduler


def test_the_engine_is_built_around_the_scheduler_its_factory_makes():
    from ignition.components.capacity import plan_catalog
    from ignition.kernels import use_backend
    from ignition.model.config import ModelConfig
    from ignition.model.weights import random_model
    from ignition.recipes import LoadOptions, get_recipe
    from ignition.runtime.assembly import RuntimeOptions, assemble_engine

    model = random_model(ModelConfig.tiny(), seed=3)
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(max_prefill_chunk=256))
    options = RuntimeOptions(
        num_slots=2, page_size=64, max_context_tokens=512, speculation="off", mixed=False
    )
    with use_backend("reference"):
        direct = assemble_engine(
            model, catalog, None, [2], options, scheduler_factory=direct_scheduler
        )
        helios = assemble_engine(model, catalog, None, [2], options)
    assert isinstance(direct.scheduler, DirectScheduler)
    assert isinstance(helios.scheduler, Scheduler)
