"""``ignition serve --data-parallel-size N``: N replicas and their router on Ray Serve, behind
one OpenAI-compatible endpoint (docs/scaling.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ignition.replicas.replica import ReplicaServer
from ignition.replicas.router import Router
from ignition.replicas.routing import DEFAULT_MAX_IMBALANCE

APP_NAME = "ignition"
HEALTH_CHECK_PERIOD_S = 2.0
# Seconds a stopping replica's open streams get to finish (Ray Serve's drain).
DRAIN_TIMEOUT_S = 300.0
# Ray's per-replica limit must never bind: Helios queues and refuses (--max-waiting) itself.
MAX_ONGOING_REQUESTS = 100_000


class RayMissingError(RuntimeError):
    """Ray Serve is not installed (the ``replicas`` install extra)."""


@dataclass(frozen=True)
class ReplicaPlan:
    """The replicas to start: how many, on which cluster, routed how, and their resources."""

    num_replicas: int
    ray_address: str | None = None
    routing: str = "affinity"
    max_imbalance: int = DEFAULT_MAX_IMBALANCE
    num_cpus_per_replica: float = 1.0
    num_gpus_per_replica: float = 0.0

    @property
    def names(self) -> list[str]:
        return [f"replica-{i}" for i in range(self.num_replicas)]


def require_ray() -> None:
    try:
        import ray  # noqa: F401
        from ray import serve  # noqa: F401
    except ImportError as err:
        raise RayMissingError(
            f"--data-parallel-size needs Ray Serve ({err}); install the extra: "
            "pip install 'ignition[replicas]'"
        ) from None


def application(options: Any, plan: ReplicaPlan) -> Any:
    """The Ray Serve application: one deployment per replica and the router over them."""
    from ray import serve

    options = replace(options, artifacts=str(Path(options.artifacts).resolve()))
    actor = {"num_cpus": plan.num_cpus_per_replica, "num_gpus": plan.num_gpus_per_replica}
    replicas = {
        name: serve.deployment(ReplicaServer)
        .options(
            name=name,
            num_replicas=1,
            ray_actor_options=actor,
            max_ongoing_requests=MAX_ONGOING_REQUESTS,
            health_check_period_s=HEALTH_CHECK_PERIOD_S,
            graceful_shutdown_timeout_s=DRAIN_TIMEOUT_S,
        )
        .bind(options, name)
        for name in plan.names
    }
    router = serve.deployment(Router).options(
        name="router",
        num_replicas=1,
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=MAX_ONGOING_REQUESTS,
        graceful_shutdown_timeout_s=DRAIN_TIMEOUT_S,
    )
    return router.bind(replicas, plan.routing, plan.max_imbalance)


def connect(plan: ReplicaPlan) -> None:
    """Join the plan's Ray cluster, or start a local one that fits every replica."""
    require_ray()
    import ray

    address = plan.ray_address or os.environ.get("RAY_ADDRESS")
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:  # a local cluster large enough for every replica, whatever the core count
            wanted = int(plan.num_replicas * plan.num_cpus_per_replica + 0.999)
            ray.init(num_cpus=max(os.cpu_count() or 1, wanted), log_to_driver=False)


def start(options: Any, plan: ReplicaPlan, host: str, port: int) -> None:
    """Start the HTTP proxy on ``host:port`` and run the app; returns once it answers."""
    from ray import serve

    connect(plan)
    serve.start(http_options={"host": host, "port": port})
    serve.run(application(options, plan), name=APP_NAME, route_prefix="/")


def stop() -> None:
    """Stop the application and, when this process started it, the local cluster."""
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()
