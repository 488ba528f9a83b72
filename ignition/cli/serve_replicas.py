"""``serve --data-parallel-size N``: the replica flags and serving through Ray Serve
(ignition/replicas/; docs/scaling.md)."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from typing import Any

import click

from ignition.cli.checks import check_range
from ignition.cli.errors import UserError
from ignition.cli.registry import Decorator

ROUTINGS = ("affinity", "round-robin")  # ignition.replicas.routing.ROUTING_POLICIES


def replica_options() -> list[Decorator]:
    return [
        click.option(
            "--data-parallel-size",
            "-dp",
            type=int,
            default=1,
            show_default=True,
            help="Engine replicas behind one endpoint, each with its own bundle load and "
            "Helios, run as Ray Serve deployments (needs the `replicas` install extra).",
        ),
        click.option(
            "--ray-address",
            envvar="RAY_ADDRESS",
            help="Ray cluster to run the replicas on (env RAY_ADDRESS; default: a new local "
            "Ray instance).",
        ),
        click.option(
            "--routing",
            type=click.Choice(ROUTINGS),
            default="affinity",
            show_default=True,
            help="affinity: the replica holding the conversation's cached prefix, else the "
            "one Helios reports most room on; round-robin: each in turn.",
        ),
        click.option(
            "--max-imbalance",
            type=int,
            default=4,
            show_default=True,
            help="Affinity never sends a request to a replica carrying more than this many "
            "requests above the least loaded one.",
        ),
    ]


@dataclass(frozen=True)
class ReplicaArgs:
    data_parallel_size: int
    ray_address: str | None
    routing: str
    max_imbalance: int

    def __post_init__(self) -> None:
        check_range("--data-parallel-size", self.data_parallel_size, 1)
        check_range("--max-imbalance", self.max_imbalance, 0)

    @property
    def is_replicated(self) -> bool:
        return self.data_parallel_size > 1

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ReplicaArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        return cls(
            params.pop("data_parallel_size"),
            params.pop("ray_address"),
            params.pop("routing"),
            params.pop("max_imbalance"),
        )

    def check(self, tensor_parallel_size: int) -> None:
        """Before any build or load: Ray is installed, and no tensor parallelism inside."""
        if not self.is_replicated:
            return
        if tensor_parallel_size > 1:
            raise UserError(
                f"--data-parallel-size {self.data_parallel_size} with --tensor-parallel-size "
                f"{tensor_parallel_size}: tensor-parallel replicas are not supported yet; serve "
                "one tensor-parallel engine, or replicas of one device each"
            )
        from ignition.replicas.launch import RayMissingError, require_ray

        try:
            require_ray()
        except RayMissingError as err:
            raise UserError(str(err)) from None


def _gpus_per_replica(device: Any, args: ReplicaArgs) -> float:
    """One GPU each on CUDA; on a local Ray instance with fewer GPUs than replicas, an equal
    share each (they then share devices) instead of replicas Ray can never place."""
    if device is None or device.type != "cuda":
        return 0.0
    if args.ray_address:
        return 1.0
    import torch

    count = torch.cuda.device_count()
    return 1.0 if count >= args.data_parallel_size else count / args.data_parallel_size


def serve_replicas(options: Any, args: ReplicaArgs, host: str, port: int, device: Any) -> None:
    """Start the replicas and the router on Ray, then wait for Ctrl-C or SIGTERM."""
    from ignition.replicas.launch import ReplicaPlan, connect, start, stop

    gpus = _gpus_per_replica(device, args)
    plan = ReplicaPlan(
        num_replicas=args.data_parallel_size,
        ray_address=args.ray_address,
        routing=args.routing,
        max_imbalance=args.max_imbalance,
        num_cpus_per_replica=1.0,
        num_gpus_per_replica=gpus,
    )

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    try:
        connect(plan)
        # after ray.init, whose own handler dumps a stack and shuts nothing down
        signal.signal(signal.SIGTERM, interrupt)
        start(options, plan, host, port)
        click.echo(f"listening on http://{host}:{port} ({plan.num_replicas} replicas)")
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("stopping the replicas", err=True)
    finally:
        stop()
