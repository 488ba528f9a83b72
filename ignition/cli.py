"""The ``ignition`` command line.

Commands import their rooms lazily so that ``ignition recipes`` or
``ignition catalog`` start without importing torch.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ignition.recipes import SPECULATION_MODES, LoadOptions, RecipeError, get_recipe, list_recipes


class _UserError(click.ClickException):
    """A bad recipe, option or catalog: one line, no traceback, exit status 2."""

    exit_code = 2


def _user_errors() -> tuple[type[Exception], ...]:
    """Errors that mean "bad input", imported only once a command fails."""
    from ignition.components.capacity import CapacityError
    from ignition.components.catalog import CatalogError

    errors: list[type[Exception]] = [RecipeError, CapacityError, CatalogError]
    try:
        from ignition.compiler.build import BuildError
        from ignition.model.config import ConfigError
        from ignition.model.weights import WeightsError
        from ignition.runtime.bundle import BundleError

        errors += [BuildError, BundleError, ConfigError, WeightsError]
    except ImportError:  # torch missing: only the planning commands work
        pass
    return tuple(errors)


def _fail_cleanly(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _user_errors() as err:
            raise _UserError(str(err)) from None

    return wrapper


def capacity_options(
    fn: Callable[..., Any] | None = None, *, recipe_help: str | None = None
) -> Callable[..., Any]:
    """The load-time options shared by ``catalog`` and ``build``; ``recipe_help`` set makes
    ``--recipe`` optional (``build`` can take it from the checkpoint)."""
    if fn is None:
        return functools.partial(capacity_options, recipe_help=recipe_help)
    options = [
        click.option(
            "--recipe",
            "recipe_name",
            required=recipe_help is None,
            help=recipe_help or "Recipe name, alias (qwen3.8-flash) or path to a recipe.yaml.",
        ),
        click.option(
            "--mixed-prefill",
            is_flag=True,
            help="Add mixed prompt/decode programs (recipes that declare mixed capture).",
        ),
        click.option(
            "--concurrency",
            type=int,
            help="Request slots (default: the recipe's; at most its capacity.maxima).",
        ),
        click.option(
            "--speculative-token-capacity",
            type=int,
            help="Target-token envelope R for wider speculative programs (up to capacity.maxima).",
        ),
        click.option("--num-draft-tokens", type=int, help="MTP draft tokens D (0: ordinary)."),
        click.option(
            "--max-prefill-chunk",
            type=int,
            help="Largest prompt bucket to prepare (one of the recipe's buckets).",
        ),
        click.option(
            "--speculation",
            type=click.Choice(SPECULATION_MODES),
            help="off: none; fixed: host-allocated; adaptive: adds device-allocated.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def load_options_from(kwargs: dict[str, Any]) -> LoadOptions:
    return LoadOptions(
        mixed_prefill=kwargs["mixed_prefill"],
        concurrency=kwargs["concurrency"],
        speculative_token_capacity=kwargs["speculative_token_capacity"],
        num_draft_tokens=kwargs["num_draft_tokens"],
        max_prefill_chunk=kwargs["max_prefill_chunk"],
        speculation=kwargs["speculation"],
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ignition")
def main() -> None:
    """Ignition: prepare and serve hybrid LLMs from captured graphs."""


@main.command("recipes")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_fail_cleanly
def recipes_cmd(as_json: bool) -> None:
    """List recipes, their aliases and what each supports."""
    recipes = list_recipes()
    if as_json:
        rows = [
            {
                "name": r.name,
                "aliases": list(r.aliases),
                "family": r.family,
                "description": r.description,
                "supports": {
                    "mixed_capture": r.supports.mixed_capture,
                    "speculation": r.supports.speculation,
                    "vision": r.supports.vision,
                },
                "path": str(r.path),
            }
            for r in recipes
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Ignition recipes")
    for column in ("name", "aliases", "family", "supports", "concurrency", "prompt buckets"):
        table.add_column(column)
    for r in recipes:
        table.add_row(
            r.name,
            ", ".join(r.aliases),
            r.family,
            r.supports_summary(),
            str(r.capacity.concurrency),
            f"{len(r.capacity.prompt_buckets)} (<= {r.capacity.max_prefill_chunk})",
        )
    Console(width=max(Console().width, 120)).print(table)


@main.command("catalog")
@capacity_options
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")
@click.option(
    "--check",
    is_flag=True,
    help="Compare counts with the recipe's expected_catalogs; exit 1 on a mismatch.",
)
@_fail_cleanly
def catalog_cmd(recipe_name: str, as_json: bool, check: bool, **kwargs: Any) -> None:
    """Enumerate the physical programs a build would prepare."""
    from ignition.components.capacity import plan_catalog
    from ignition.components.catalog_check import check_expected_catalogs

    recipe = get_recipe(recipe_name)
    options = load_options_from(kwargs)
    if check:
        explicit = options if options != LoadOptions() else None
        failures, lines = check_expected_catalogs(recipe, explicit)
        for line in lines:
            click.echo(line)
        if failures:
            for failure in failures:
                click.echo(failure, err=True)
            sys.exit(1)
        return
    catalog = plan_catalog(recipe, options)
    if as_json:
        data = catalog.to_json()
        data = {
            "recipe": data["recipe"],
            "options": data["options"],
            "counts": data["counts"],
            "descriptors": data["descriptors"],
        }
        click.echo(json.dumps(data, indent=2))
        return
    from ignition.components.catalog_report import print_catalog_tables

    print_catalog_tables(recipe, catalog)


@main.command("build")
@capacity_options(
    recipe_help="Recipe name, alias or path; default: the recipe registered for the "
    "checkpoint's config.json model_type."
)
@click.option(
    "--weights",
    type=click.Path(file_okay=False, path_type=Path),
    help="Checkpoint folder (HF layout); default: the embedded tiny checkpoint.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder; default: artifacts/<recipe>.",
)
@click.option("--copy-weights", is_flag=True, help="Copy the weights into the bundle.")
@click.option("--device", help="torch device (default: cuda when available, else cpu).")
@click.option("--threads", type=int, help="torch CPU threads (default on CPU: 1).")
@_fail_cleanly
def build_cmd(
    recipe_name: str | None,
    weights: Path | None,
    out_dir: Path | None,
    copy_weights: bool,
    device: str | None,
    threads: int | None,
    **kwargs: Any,
) -> None:
    """Prepare and validate every program of a recipe; write the bundle."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ignition.compiler.build import DEFAULT_CHECKPOINT, build_bundle, resolve_recipe

    options = load_options_from(kwargs)
    resolve_recipe(recipe_name, weights or DEFAULT_CHECKPOINT)  # a mismatch fails before any bar
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[program]}"),
    ) as progress:
        task = progress.add_task("preparing programs", total=None, program="")

        def started(total: int) -> None:
            progress.update(task, total=total)

        def done(d: Any, reused: bool) -> None:
            label = f"{d.name} (reused)" if reused else d.name
            progress.update(task, advance=1, program=label)

        result = build_bundle(
            recipe_name,
            options,
            weights=weights,
            out_dir=out_dir,
            copy_weights=copy_weights,
            device=device,
            threads=threads,
            on_program=done,
            on_start=started,
        )
    for note in result.notes:
        click.echo(f"note: {note}")
    counts = " ".join(f"{k}={v}" for k, v in result.catalog.counts().items())
    click.echo(
        f"built {result.out_dir}: {len(result.catalog.descriptors)} programs ({counts}), "
        f"{result.num_reused} reused; report: {result.out_dir / 'build_report.md'}"
    )


def runtime_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by generate, serve and debug-serve."""
    options = [
        click.option(
            "--artifacts",
            required=True,
            type=click.Path(exists=True, file_okay=False),
            help="A bundle written by `ignition build`.",
        ),
        click.option(
            "--speculation",
            type=click.Choice(SPECULATION_MODES),
            help="Decode mode (default: the bundle's).",
        ),
        click.option("--no-mixed", is_flag=True, help="Do not use mixed prompt/decode programs."),
        click.option("--max-context", type=int, help="Context limit per request in tokens."),
        click.option("--device", help="torch device (default: cuda when available, else cpu)."),
        click.option("--threads", type=int, help="torch CPU threads."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _serve_options(runtime: dict[str, Any], **extra: Any):
    """ServeOptions from the shared runtime options plus command-specific fields."""
    from ignition.serving import ServeOptions

    return ServeOptions(
        artifacts=runtime["artifacts"],
        speculation=runtime["speculation"],
        mixed=not runtime["no_mixed"],
        max_context_tokens=runtime["max_context"],
        device=runtime["device"],
        num_threads=runtime["threads"],
        **extra,
    )


@main.command("generate")
@runtime_options
@click.option("--prompt", required=True, help="Prompt text.")
@click.option("--max-tokens", type=int, default=64, show_default=True)
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option("--top-p", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=int, default=0, show_default=True)
@click.option("--seed", type=int)
@click.option("--json", "as_json", is_flag=True, help="Token ids, text and per-step timing.")
@_fail_cleanly
def generate_cmd(
    prompt: str,
    max_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int | None,
    as_json: bool,
    **runtime: Any,
) -> None:
    """Generate offline through the same runtime the server uses."""
    from ignition.generate import generate_once

    result = generate_once(
        _serve_options(runtime),
        prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
    )
    click.echo(json.dumps(result, indent=2) if as_json else result["text"])


@main.command("serve")
@runtime_options
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option(
    "--scheduler-policy",
    type=click.Choice(["balanced", "throughput"]),
    default="balanced",
    show_default=True,
)
@click.option("--scheduler-terminal-value", type=float)
@click.option("--scheduler-terminal-age-price", type=float)
@click.option("--mtp-adaptive-verification-alpha", type=float)
@click.option(
    "--max-waiting",
    type=int,
    default=64,
    show_default=True,
    help="Requests that may wait for a slot before new ones get 503.",
)
@_fail_cleanly
def serve_cmd(
    host: str,
    port: int,
    scheduler_policy: str,
    scheduler_terminal_value: float | None,
    scheduler_terminal_age_price: float | None,
    mtp_adaptive_verification_alpha: float | None,
    max_waiting: int,
    **runtime: Any,
) -> None:
    """Serve the OpenAI-compatible API with the Helios scheduler."""
    from ignition.helios import SchedulerError
    from ignition.helios.config import policy_from_preset
    from ignition.serving import serve_forever

    try:
        policy = policy_from_preset(
            scheduler_policy,
            terminal_value=scheduler_terminal_value,
            terminal_age_price=scheduler_terminal_age_price,
            adaptive_verification_alpha=mtp_adaptive_verification_alpha,
        )
    except SchedulerError as err:
        raise _UserError(str(err)) from None
    options = _serve_options(runtime, policy=policy, max_waiting=max_waiting)
    serve_forever(options, host, port, direct=False)


@main.command("debug-serve")
@runtime_options
@click.option(
    "--direct",
    is_flag=True,
    required=True,
    help="Use the diagnostic direct scheduler (required: the only debug mode).",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@_fail_cleanly
def debug_serve_cmd(direct: bool, host: str, port: int, **runtime: Any) -> None:
    """Serve with the diagnostic scheduler of ignition/direct (decode-round selection only)."""
    from ignition.serving import serve_forever

    serve_forever(_serve_options(runtime), host, port, direct=direct)


@main.command("simulate")
@click.option(
    "--scenario",
    type=click.Path(exists=True, dir_okay=False),
    help="Scenario YAML driving Helios alone (see examples/scenarios/).",
)
@click.option("--trace", help="Trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens).")
@click.option("--rows", default="0:600", show_default=True, help="Trace window START:END.")
@click.option("--rate", type=float, help="Load: the window's arrival rate scale.")
@click.option("--sweep", help="Comma-separated loads: every policy at each.")
@click.option("--capacity", is_flag=True, help="SLO capacity search per --slo pair.")
@click.option(
    "--slo",
    default="60:2,100:5,200:10",
    show_default=True,
    help="p99 TBT ms : p99 TTFT s pairs for --capacity ('-' for a TBT that does not bind).",
)
@click.option(
    "--compare",
    default="vllm,vllm-k3,sarathi",
    show_default=True,
    help="Policies beside Helios: vllm, sarathi, prefill-first, with -bBUDGET / -kDRAFTS.",
)
@click.option("--slots", type=int, default=32, show_default=True, help="Request slots.")
@click.option(
    "--speculative-token-capacity",
    "envelope",
    type=int,
    default=128,
    show_default=True,
    help="Helios catalog's target-token envelope R.",
)
@click.option("--device", default="h200", show_default=True, help="h200 or measured:PATH.")
@click.option(
    "--acceptance",
    default="0.8,0.7,0.6,0.5,0.4",
    show_default=True,
    help="Per-position conditional MTP acceptance.",
)
@click.option("--max-prompt", type=int, help="Cap on prompt tokens.")
@click.option("--max-output", type=int, help="Cap on output tokens.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
@click.option("--plot", "plot_dir", help="Write PNG plots into this folder (matplotlib).")
def simulate_cmd(scenario: str | None, as_json: bool, **options: Any) -> None:
    """Simulate Helios (and baselines on a trace) against a device model; no model, no torch."""
    if scenario is not None:
        from ignition.simulate.sim import main as simulate_main

        status = simulate_main(["--scenario", scenario, *(["--json"] if as_json else [])])
        if status:
            sys.exit(status)
        return
    from ignition.simulate.command import main as trace_main

    status = trace_main(as_json=as_json, **options)
    if status:
        sys.exit(status)


if __name__ == "__main__":
    main()
