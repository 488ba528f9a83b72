"""Progress on stderr: a build's programs (``build``, and ``serve PATH`` building a
checkpoint) and a bundle's load (``generate``, ``serve``, ``debug-serve``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ignition.recipes import LoadOptions


def build_with_progress(
    recipe_name: str | None,
    options: LoadOptions,
    *,
    weights: Path | None,
    out_dir: Path | None,
    copy_weights: bool = False,
    device: str | None = None,
    threads: int | None = None,
    tensor_parallel_size: int = 1,
    ple: dict[str, Any] | None = None,
) -> Any:
    """build_bundle (on every rank) under a progress bar on stderr; None on a non-zero
    torchrun rank."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ignition.compiler.build import DEFAULT_CHECKPOINT, build_bundle

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[program]}"),
        console=Console(stderr=True),
    ) as progress:
        task = progress.add_task("preparing programs", total=None, program="")

        def started(total: int) -> None:
            progress.update(task, total=total)

        def done(d: Any, reused: bool) -> None:
            label = f"{d.name} (reused)" if reused else d.name
            progress.update(task, advance=1, program=label)

        if tensor_parallel_size == 1:
            from ignition.runtime.ple.validation import BuildRows

            return build_bundle(
                recipe_name,
                options,
                weights=weights,
                out_dir=out_dir,
                copy_weights=copy_weights,
                device=device,
                threads=threads,
                on_program=done,
                on_start=started,
                ple=ple,
                ple_rows=BuildRows.of(weights or DEFAULT_CHECKPOINT, ple),
            )
        from ignition.distributed.build import BuildJob, build_on_rank, follow_build
        from ignition.distributed.launch import run_tensor_parallel

        job = BuildJob(recipe_name, options, weights, out_dir, copy_weights, device, threads)
        return run_tensor_parallel(
            tensor_parallel_size,
            job,
            lambda job, tp: build_on_rank(job, tp, on_program=done, on_start=started),
            follower=follow_build,
        )


class LoadProgress:
    """Prints what is loaded, then a rich progress line over the prepared programs."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._quiet = quiet
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[program]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = None

    @property
    def listener(self) -> Any:
        from ignition.serving.engine import LoadListener

        if self._quiet:
            return LoadListener()
        return LoadListener(on_bundle=self.bundle, on_program=self.program)

    def __enter__(self) -> LoadProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def bundle(self, bundle: Any, num_programs: int) -> None:
        config = bundle.model.config
        device = next(bundle.model.parameters()).device
        click.echo(
            f"loaded {bundle.name} from {bundle.path} on {device}: {config.num_hidden_layers} "
            f"layers, vocabulary {config.vocab_size}; preparing {num_programs} programs",
            err=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("preparing", total=num_programs, program="")

    def program(self, name: str) -> None:
        if self._task is not None:
            self._progress.update(self._task, advance=1, program=name)

    def close(self) -> None:
        self._progress.stop()
