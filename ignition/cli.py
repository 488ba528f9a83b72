"""The ``ignition`` command line.

Commands import their rooms lazily so that ``ignition recipes`` or
``ignition catalog`` start without importing torch.
"""

from __future__ import annotations

import functools
import json
import math
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


def _at_least(minimum: int, maximum: int | None = None) -> Callable[..., Any]:
    """A click callback: an integer option in [minimum, maximum], else a one-line error."""

    def check(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        if value is None:
            return value
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f"at least {minimum}"
            raise _UserError(f"--{param.name.replace('_', '-')} = {value}: must be {bound}")
        return value

    return check


def _check_device(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Reject a device torch cannot use before any weights are read."""
    if value is None:
        return value
    import torch

    try:
        device = torch.device(value)
    except (RuntimeError, ValueError):
        raise _UserError(
            f"--device = {value!r}: not a torch device (try cpu, cuda or cuda:N)"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise _UserError(f"--device = {value!r}: CUDA is not available on this machine")
        if device.index is not None and device.index >= count:
            raise _UserError(f"--device = {value!r}: this machine has {count} CUDA device(s)")
    elif device.type != "cpu":
        raise _UserError(f"--device = {value!r}: only cpu and cuda devices are supported")
    return value


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
        click.option(
            "--mixed-wide-prompt-buckets",
            callback=_bucket_list,
            help="Comma-separated prompt buckets at which every wider mixed width is also "
            "prepared ('' for the seed's one balanced bucket; default: the recipe's).",
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
        mixed_wide_prompt_buckets=kwargs["mixed_wide_prompt_buckets"],
    )


def _bucket_list(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...] | None:
    """'2048,4096' -> (2048, 4096); '' -> (); unset -> None (the recipe's)."""
    if value is None:
        return None
    try:
        return tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected comma-separated integers") from None


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


def tensor_parallel_options() -> list[Callable[..., Any]]:
    """--tensor-parallel-size and its debug check (build, generate, serve, debug-serve)."""
    return [
        click.option(
            "--tensor-parallel-size",
            "-tp",
            "tensor_parallel_size",
            type=int,
            default=1,
            show_default=True,
            callback=_at_least(1),
            help="Ranks that each hold a shard of every layer (one GPU each; gloo on CPU). "
            "Spawns the ranks, or joins torchrun's.",
        ),
        click.option(
            "--tensor-parallel-debug",
            is_flag=True,
            help="Check every frame's emitted tokens and committed state equal across ranks.",
        ),
    ]


def _ple_residency(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and value not in ("device", "host", "disk"):
        raise _UserError(f"--ple-residency = {value!r}: one of device, host, disk")
    return value


def _ple_cache_bytes(ctx: click.Context, param: click.Parameter, value: Any) -> int | None:
    if value is None:
        return None
    from ignition.runtime.ple import parse_bytes

    try:
        return parse_bytes(value)
    except ValueError as err:
        raise _UserError(str(err)) from None


def ple_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Where the PLE n-gram table lives (build and serve; docs/ple.md). Models without a
    table accept them and report "no PLE table"."""
    options = [
        click.option(
            "--ple-residency",
            callback=_ple_residency,
            metavar="device|host|disk",
            help="Where the PLE n-gram table lives (default: from its size and the memory).",
        ),
        click.option(
            "--ple-preload/--no-ple-preload",
            default=None,
            help="Host residency: copy the table into pinned memory at load (serve: default "
            "the bundle's).",
        ),
        click.option(
            "--ple-cache-bytes",
            callback=_ple_cache_bytes,
            metavar="BYTES",
            help="Disk residency: the row cache's bound, e.g. 4GiB (build: default 1GiB; "
            "serve: default the bundle's).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _ple_options_from(kwargs: dict[str, Any]) -> Any:
    """PleOptions from (and out of) a command's keyword arguments; a flag not given stays
    None, so that serve takes the built bundle's value (``PleOptions.over``)."""
    from ignition.runtime.ple import PleOptions

    return PleOptions(
        kwargs.pop("ple_residency"), kwargs.pop("ple_preload"), kwargs.pop("ple_cache_bytes")
    )


def _ple_description(options: Any, weights: Path | None, device: str | None) -> dict[str, Any]:
    """The build report's PLE entry: the checkpoint's table and where it will live."""
    from ignition.compiler.build import DEFAULT_CHECKPOINT
    from ignition.compiler.device import resolve_device
    from ignition.runtime.ple import PleTableError, choose_residency, describe_table, find_layout

    try:
        layout = find_layout(weights or DEFAULT_CHECKPOINT)
    except PleTableError as err:
        raise _UserError(str(err)) from None
    if layout is None:
        return describe_table(options, None)
    residency = options.residency or choose_residency(layout.table_bytes, resolve_device(device))
    return describe_table(options, layout, residency)


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
@click.option(
    "--device",
    callback=_check_device,
    help="torch device (default: cuda when available, else cpu).",
)
@click.option(
    "--threads", type=int, callback=_at_least(1), help="torch CPU threads (default on CPU: 1)."
)
@tensor_parallel_options()[0]
@ple_options
@_fail_cleanly
def build_cmd(
    recipe_name: str | None,
    weights: Path | None,
    out_dir: Path | None,
    copy_weights: bool,
    device: str | None,
    threads: int | None,
    tensor_parallel_size: int,
    **kwargs: Any,
) -> None:
    """Prepare and validate every program of a recipe; write the bundle."""
    from ignition.compiler.build import DEFAULT_CHECKPOINT, resolve_recipe

    ple = _ple_description(_ple_options_from(kwargs), weights, device)
    options = load_options_from(kwargs)
    resolve_recipe(recipe_name, weights or DEFAULT_CHECKPOINT)  # a mismatch fails before any bar
    result = _build_with_progress(
        recipe_name,
        options,
        weights=weights,
        out_dir=out_dir,
        copy_weights=copy_weights,
        device=device,
        threads=threads,
        tensor_parallel_size=tensor_parallel_size,
        ple=ple,
    )
    if result is None:  # a non-zero torchrun rank: rank zero reports
        return
    for note in result.notes:
        click.echo(f"note: {note}")
    counts = " ".join(f"{k}={v}" for k, v in result.catalog.counts().items())
    click.echo(
        f"built {result.out_dir}: {len(result.catalog.descriptors)} programs ({counts}), "
        f"{result.num_reused} reused; report: {result.out_dir / 'build_report.md'}"
    )


def _build_with_progress(
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
            from ignition.runtime.ple import BuildRows

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


def runtime_options(
    fn: Callable[..., Any] | None = None, *, artifacts_required: bool = True
) -> Callable[..., Any]:
    """Options shared by generate, serve and debug-serve (serve also takes PATH, so its
    ``--artifacts`` is optional)."""
    if fn is None:
        return functools.partial(runtime_options, artifacts_required=artifacts_required)
    options = [
        click.option(
            "--artifacts",
            required=artifacts_required,
            type=click.Path(exists=True, file_okay=False),
            help="A bundle written by `ignition build`"
            + ("." if artifacts_required else " (or give it, or a checkpoint, as PATH)."),
        ),
        click.option(
            "--speculation",
            type=click.Choice(SPECULATION_MODES),
            help="Decode mode (default: the bundle's).",
        ),
        click.option("--no-mixed", is_flag=True, help="Do not use mixed prompt/decode programs."),
        click.option(
            "--max-context",
            "--max-model-len",
            "max_context",
            type=int,
            callback=_at_least(2),
            help="Context limit per request in tokens (prompt + output); "
            "default: the model's, at most 8192.",
        ),
        click.option(
            "--device",
            callback=_check_device,
            help="torch device (default: cuda when available, else cpu).",
        ),
        click.option(
            "--threads", type=int, callback=_at_least(1), help="torch CPU threads (default: 1)."
        ),
        click.option(
            "--verify-weights",
            is_flag=True,
            help="Hash the checkpoint again (default: compare sizes and modification times).",
        ),
        *tensor_parallel_options(),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _with_ranks(runtime: dict[str, Any], options: Any, rank_zero: Callable[..., Any]) -> Any:
    """``rank_zero(options, tp)`` on rank zero of --tensor-parallel-size ranks, or
    ``rank_zero(options, None)`` on one rank."""
    size = runtime["tensor_parallel_size"]
    if size == 1:
        return rank_zero(options, None)
    from ignition.distributed.launch import run_tensor_parallel

    return run_tensor_parallel(size, options, rank_zero, debug=runtime["tensor_parallel_debug"])


def _finite_nonnegative(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Flag values that must be finite and nonnegative fail with one line naming the flag."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        flag = param.opts[0] if param.opts else param.name
        raise _UserError(f"{flag} = {value!r}: must be finite and nonnegative")
    return value


def _row_count(ctx: click.Context, param: click.Parameter, value: Any) -> int | None:
    """A nonnegative integer count; anything else (nan, inf, 1.5, -2) is one line."""
    if value is None:
        return None
    flag = param.opts[0] if param.opts else param.name
    try:
        count = int(str(value), 10)
    except ValueError:
        raise _UserError(f"{flag} = {value}: must be a nonnegative integer") from None
    if count < 0:
        raise _UserError(f"{flag} = {count}: must be a nonnegative integer")
    return count


def _finite_positive(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None and not (math.isfinite(value) and value > 0):
        flag = param.opts[0] if param.opts else param.name
        raise _UserError(f"{flag} = {value!r}: must be finite and positive")
    return value


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
        verify_weights=runtime["verify_weights"],
        tool_call_parser=runtime.get("tool_call_parser"),
        enable_auto_tool_choice=runtime.get("enable_auto_tool_choice", False),
        reasoning_parser=runtime.get("reasoning_parser"),
        **extra,
    )


@main.command("generate")
@runtime_options
@click.option("--prompt", required=True, help="Prompt text.")
@click.option(
    "--max-tokens",
    type=int,
    default=64,
    show_default=True,
    callback=_at_least(1),
    help="Output tokens to generate at most.",
)
@click.option(
    "--temperature", type=float, default=0.0, show_default=True, help="0: greedy decoding."
)
@click.option("--top-p", type=float, default=1.0, show_default=True, help="Nucleus mass, (0, 1].")
@click.option("--top-k", type=int, default=0, show_default=True, help="0: no top-k limit.")
@click.option("--seed", type=int, help="Sampling seed (default: derived from the request).")
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
    from ignition.runtime.requests import RequestError

    # --json output is for programs: nothing but the JSON, on stdout or stderr.
    with _Progress(quiet=as_json) as progress:

        def run(options: Any, tp: Any) -> dict[str, Any]:
            return generate_once(
                options,
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k,
                seed=seed,
                listener=progress.listener,
                tp=tp,
            )

        try:
            result = _with_ranks(runtime, _serve_options(runtime), run)
        except RequestError as err:
            raise _UserError(str(err)) from None
    if result is None:  # a non-zero torchrun rank: rank zero prints
        return
    click.echo(json.dumps(result, indent=2) if as_json else result["text"])


def server_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """HTTP options shared by serve and debug-serve."""
    from ignition.server.config import DEFAULT_MAX_REQUEST_BYTES

    options = [
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind."),
        click.option(
            "--port",
            type=int,
            default=8000,
            show_default=True,
            callback=_at_least(1, 65535),
            help="TCP port to listen on.",
        ),
        click.option(
            "--served-model-name",
            "served_model_names",
            multiple=True,
            help="Name clients send as `model` (repeatable: the first is reported, all are "
            "accepted; default: the recipe name).",
        ),
        *reply_parsing_options(),
        click.option(
            "--api-key",
            envvar="IGNITION_API_KEY",
            help="Require `Authorization: Bearer KEY` on /v1/* (env IGNITION_API_KEY).",
        ),
        click.option(
            "--max-request-bytes",
            type=int,
            default=DEFAULT_MAX_REQUEST_BYTES,
            show_default=True,
            callback=_at_least(1),
            help="Largest request body; larger ones get 413 before any parsing.",
        ),
        click.option(
            "--allowed-local-media-path",
            type=click.Path(exists=True, file_okay=False, resolve_path=True),
            help="Folder whose image files chat requests may name by path or file:// URL "
            "(default: none; base64 data URLs only, and nothing is fetched over the network).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def reply_parsing_options() -> list[Callable[..., Any]]:
    """Tool calls and reasoning in chat replies (server/tools/; vLLM's flags)."""
    from ignition.server.tools import REASONING_PARSERS, TOOL_CALL_PARSERS

    return [
        click.option(
            "--tool-call-parser",
            type=click.Choice(sorted(TOOL_CALL_PARSERS)),
            help="Tool-call format of replies (default: the one the chat template renders).",
        ),
        click.option(
            "--enable-auto-tool-choice",
            is_flag=True,
            help='Parse tool calls for tool_choice "auto" (without it such requests get 400).',
        ),
        click.option(
            "--reasoning-parser",
            type=click.Choice(sorted(REASONING_PARSERS)),
            help="Split <think>...</think> into reasoning_content (default: no split).",
        ),
    ]


def _http_options(http: dict[str, Any]) -> dict[str, Any]:
    return {
        "served_model_names": tuple(http["served_model_names"]),
        "api_key": http["api_key"],
        "max_request_bytes": http["max_request_bytes"],
        "allowed_local_media_path": http["allowed_local_media_path"],
    }


def _chat_template(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """--chat-template: a file, or the template itself (as vLLM reads it); (source, text)."""
    if value is None:
        return None
    from jinja2 import TemplateSyntaxError

    from ignition.runtime.chat_sandbox import chat_environment

    path = Path(value).expanduser()
    if path.is_file():
        source, text = str(path), path.read_text()
    elif "{{" in value or "{%" in value:
        source, text = "--chat-template", value
    else:
        raise _UserError(
            f"--chat-template = {value!r}: no such file, and not an inline Jinja template "
            "(no {{ or {%)"
        )
    try:
        chat_environment().parse(text)
    except TemplateSyntaxError as err:
        raise _UserError(
            f"--chat-template {source}: line {err.lineno}: syntax error: {err.message}"
        ) from None
    return source, text


def serve_path_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``serve PATH`` and the flags vLLM users type (docs: README, serving)."""
    options = [
        click.argument("path", required=False, type=click.Path(path_type=Path)),
        click.option(
            "--max-num-seqs",
            type=int,
            callback=_at_least(1),
            help="Request slots (sequences decoding at once). A checkpoint is built with "
            "this concurrency; a bundle serves with at most the slots it was built for.",
        ),
        click.option(
            "--chat-template",
            callback=_chat_template,
            help="Chat template replacing the bundle's: a file, or the Jinja text itself.",
        ),
        click.option(
            "--enable-prefix-caching/--no-enable-prefix-caching",
            default=None,
            help="Retained-checkpoint prefix caching (default: on); off is --snapshot-rows 0.",
        ),
        click.option(
            "--metrics-names",
            type=click.Choice(["flare", "vllm"]),
            default="flare",
            show_default=True,
            help="vllm: also export vllm:* aliases of the flare_* metrics on /metrics.",
        ),
        click.option(
            "--cache-dir",
            envvar="IGNITION_CACHE",
            type=click.Path(file_okay=False, path_type=Path),
            help="Where checkpoints served by PATH are built (env IGNITION_CACHE; default "
            "~/.cache/ignition).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _prefix_cache_rows(enabled: bool | None, snapshot_rows: int | None) -> int | None:
    """--[no-]enable-prefix-caching as --snapshot-rows (0: off; None: the default rows)."""
    if enabled is None:
        return snapshot_rows
    if not enabled:
        if snapshot_rows:
            raise _UserError(
                f"--no-enable-prefix-caching with --snapshot-rows = {snapshot_rows}: "
                "prefix caching is the snapshot rows; pick one"
            )
        return 0
    if snapshot_rows == 0:
        raise _UserError("--enable-prefix-caching with --snapshot-rows = 0: pick one")
    return snapshot_rows


def _serve_artifacts(
    path: Path | None,
    runtime: dict[str, Any],
    max_num_seqs: int | None,
    cache_dir: Path | None,
    ple: Any,
) -> tuple[str, int | None]:
    """The bundle to serve for PATH (a checkpoint is built into the cache first) and the
    request slots to ask of it (None: the bundle's)."""
    from ignition.serve_path import (
        CheckpointBuild,
        ServePathError,
        build_options,
        built_bundle,
        choose_path,
        classify,
    )

    try:
        chosen = choose_path(path, runtime["artifacts"])
        kind = classify(chosen)
    except ServePathError as err:
        raise _UserError(str(err)) from None
    if kind == "bundle":
        return str(chosen), max_num_seqs
    if runtime["tensor_parallel_size"] > 1:
        raise _UserError(
            f"{chosen}: a checkpoint with --tensor-parallel-size > 1: build it first "
            f"(`ignition build --weights {chosen} -tp N`) and serve the bundle"
        )
    from ignition.build_cache import CacheError, default_cache_root

    options = build_options(
        chosen,
        max_num_seqs=max_num_seqs,
        speculation=runtime["speculation"],
        mixed=not runtime["no_mixed"],
    )
    build = CheckpointBuild(
        chosen,
        options,
        runtime["device"],
        runtime["threads"],
        _ple_description(ple, chosen, runtime["device"]),
    )

    def run_build(build: CheckpointBuild, folder: Path) -> None:
        result = _build_with_progress(
            None,
            build.options,
            weights=build.checkpoint,
            out_dir=folder,
            device=build.device,
            threads=build.threads,
            ple=build.ple,
        )
        for note in result.notes:
            click.echo(f"note: {note}", err=True)

    def say(line: str) -> None:
        click.echo(line, err=True)

    try:
        bundle = built_bundle(build, cache_dir or default_cache_root(), run_build, say)
    except CacheError as err:
        raise _UserError(str(err)) from None
    return str(bundle), None


@main.command("serve")
@runtime_options(artifacts_required=False)
@server_options
@serve_path_options
@click.option(
    "--scheduler-policy",
    type=click.Choice(["balanced", "throughput"]),
    default="balanced",
    show_default=True,
    help="Helios preset: balanced weighs latency and throughput; throughput favours "
    "tokens per second.",
)
@click.option(
    "--scheduler-terminal-value",
    type=float,
    callback=_finite_nonnegative,
    help="Value per terminal retirement, prompt-token units (overrides the preset's 256; "
    "0 disables).",
)
@click.option(
    "--scheduler-terminal-age-price",
    type=float,
    callback=_finite_nonnegative,
    help="Terminal-wait cost coefficient, value/ms^2 (overrides the preset's 1; 0 disables).",
)
@click.option(
    "--scheduler-checkpoint-extra-work-fraction",
    type=float,
    default=0.05,
    show_default=True,
    callback=_finite_nonnegative,
    help="Checkpoint extras (prefill splits, snapshot copies) per unit of uncached prefill.",
)
@click.option(
    "--scheduler-checkpoint-payoff/--no-scheduler-checkpoint-payoff",
    default=True,
    show_default=True,
    help="Restore and capture checkpoints only where they save more prefill time than they "
    "cost (docs/scheduling.md); off: every restore and capture the allowance admits.",
)
@click.option(
    "--snapshot-rows",
    default=None,
    metavar="N",
    callback=_row_count,
    help="Retained-checkpoint snapshot rows for prefix caching (0: off). Default: 4 per "
    "request slot, at most half the free GPU memory; each row holds a slot's state and pages.",
)
@click.option(
    "--kv-pages",
    type=int,
    callback=_at_least(1),
    help="KV pages requests may own (default: enough for every slot to reach the context "
    "limit). With fewer, a full pool preempts the newest request; it resumes later.",
)
@click.option(
    "--vision-feature-capacity",
    type=int,
    default=0,
    show_default=True,
    callback=_finite_nonnegative,
    help="Image features one request's vision window holds; images beyond it are served "
    "in further windows through a private snapshot (0: the largest prompt chunk).",
)
@click.option(
    "--mtp-adaptive-verification-alpha",
    type=float,
    help="Smoothing of adaptive speculative verification widths (overrides the preset).",
)
@click.option(
    "--max-waiting",
    type=int,
    default=64,
    show_default=True,
    callback=_at_least(0),
    help="Requests that may wait for a slot, beyond the free slots, before new ones get 503.",
)
@ple_options
@_fail_cleanly
def serve_cmd(
    host: str,
    port: int,
    scheduler_policy: str,
    scheduler_terminal_value: float | None,
    scheduler_terminal_age_price: float | None,
    scheduler_checkpoint_extra_work_fraction: float,
    scheduler_checkpoint_payoff: bool,
    snapshot_rows: int | None,
    kv_pages: int | None,
    vision_feature_capacity: int,
    mtp_adaptive_verification_alpha: float | None,
    max_waiting: int,
    served_model_names: tuple[str, ...],
    api_key: str | None,
    max_request_bytes: int,
    allowed_local_media_path: str | None,
    path: Path | None,
    max_num_seqs: int | None,
    chat_template: tuple[str, str] | None,
    enable_prefix_caching: bool | None,
    metrics_names: str,
    cache_dir: Path | None,
    **runtime: Any,
) -> None:
    """Serve the OpenAI-compatible API with the Helios scheduler.

    PATH is a checkpoint folder (built once into the build cache, then served) or a bundle
    written by `ignition build`; `--artifacts BUNDLE` still works.
    """
    from ignition.helios import SchedulerError, policy_from_preset

    ple = _ple_options_from(runtime)
    snapshot_rows = _prefix_cache_rows(enable_prefix_caching, snapshot_rows)
    runtime["artifacts"], num_slots = _serve_artifacts(path, runtime, max_num_seqs, cache_dir, ple)

    try:
        policy = policy_from_preset(
            scheduler_policy,
            terminal_value=scheduler_terminal_value,
            terminal_age_price=scheduler_terminal_age_price,
            adaptive_verification_alpha=mtp_adaptive_verification_alpha,
        )
    except SchedulerError as err:
        raise _UserError(str(err)) from None
    http = _http_options(locals())
    options = _serve_options(
        runtime,
        ple=ple,
        max_num_seqs=num_slots,
        chat_template=chat_template,
        metrics_names=metrics_names,
        policy=policy,
        max_waiting=max_waiting,
        checkpoint_extra_work_fraction=scheduler_checkpoint_extra_work_fraction,
        checkpoint_payoff=scheduler_checkpoint_payoff,
        snapshot_rows=snapshot_rows,
        num_pages=kv_pages,
        vision_feature_capacity=vision_feature_capacity,
        **http,
    )
    _serve(options, host, port, direct=False, runtime=runtime)


@main.command("debug-serve")
@runtime_options
@server_options
@click.option(
    "--direct",
    is_flag=True,
    required=True,
    help="Use the diagnostic direct scheduler (required: the only debug mode).",
)
@_fail_cleanly
def debug_serve_cmd(
    direct: bool,
    host: str,
    port: int,
    served_model_names: tuple[str, ...],
    api_key: str | None,
    max_request_bytes: int,
    allowed_local_media_path: str | None,
    **runtime: Any,
) -> None:
    """Serve with the diagnostic scheduler of ignition/direct (decode-round selection only)."""
    options = _serve_options(runtime, **_http_options(locals()))
    _serve(options, host, port, direct=direct, runtime=runtime)


def _serve(options: Any, host: str, port: int, direct: bool, runtime: dict[str, Any]) -> None:
    """Load with progress, announce the address, and exit 1 if the engine failed."""
    from ignition.serving import serve_forever

    def listening(url: str) -> None:
        progress.close()
        click.echo(f"listening on {url}")

    with _Progress() as progress:

        def run(options: Any, tp: Any) -> str | None:
            listener = progress.listener
            return serve_forever(
                options, host, port, direct, listener=listener, on_listening=listening, tp=tp
            )

        failure = _with_ranks(runtime, options, run)
    if failure is not None:
        click.echo(f"error: {failure}; every open request was ended; exiting", err=True)
        sys.exit(1)


class _Progress:
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
        from ignition.serving import LoadListener

        if self._quiet:
            return LoadListener()
        return LoadListener(on_bundle=self.bundle, on_program=self.program)

    def __enter__(self) -> _Progress:
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


@main.command("simulate")
@click.option(
    "--scenario",
    type=click.Path(exists=True, dir_okay=False),
    help="Scenario YAML: its requests, catalog and durations, Helios and the policies it "
    "names (see examples/scenarios/).",
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
    default=None,
    help="Policies beside Helios: vllm, vllm-dyn, vllm-adaptive, sglang-tiers, sarathi, "
    "prefill-first, with -bBUDGET / -kDRAFTS / -padded. Default: vllm,vllm-k3,sarathi "
    "on a trace; none beside a scenario's policies or Helios's multi-turn rows.",
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
@click.option(
    "--device",
    default="h200",
    show_default=True,
    help="A profile (qwen38-flash-next-h200, qwen38-flash-next-4xh100, qwen38-27b-dense-h200; "
    "docs/devices.md), h200 (the earlier roofline) or measured:PATH.",
)
@click.option(
    "--tasks",
    default=None,
    help="Acceptance by task: a mix name (conv, code, random) or task:weight,... of "
    "random, chat, code, math (replaces --acceptance).",
)
@click.option(
    "--confidence",
    default="perfect",
    show_default=True,
    help="Drafter confidence calibration read by adaptive policies: perfect, eagle2, weak.",
)
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
@click.option(
    "--conversations",
    type=click.IntRange(min=1),
    help="Multi-turn chat instead of a trace: this many conversations, Helios with retention "
    "on and off and any --compare baselines on the same closed-loop turns.",
)
@click.option("--turns", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--snapshot-rows",
    default="0,4,16",
    show_default=True,
    help="With --conversations: retained-checkpoint row counts to compare (0: off).",
)
@click.option(
    "--conversation-rate",
    type=float,
    default=4.0,
    show_default=True,
    callback=_finite_positive,
    help="With --conversations: conversations starting per second (Poisson).",
)
@click.option("--first-prompt", type=int, default=1024, show_default=True)
@click.option("--turn-prompt", type=int, default=128, show_default=True)
@click.option("--turn-output", type=int, default=64, show_default=True)
@click.option(
    "--think-ms",
    type=float,
    default=1000.0,
    show_default=True,
    callback=_finite_nonnegative,
    help="With --conversations: mean time between a reply and the next turn.",
)
@click.option(
    "--scheduler-first-delivery",
    type=float,
    default=None,
    callback=_finite_nonnegative,
    help="With --conversations: weight on the first-delivery credit of the chunk that "
    "finishes a prompt (PolicyConfig.first_delivery; 0: off, 1: on).",
)
@click.option(
    "--scheduler-checkpoint-payoff/--no-scheduler-checkpoint-payoff",
    default=True,
    show_default=True,
    help="With --conversations: restore and capture checkpoints only where they save more "
    "prefill time than they cost (docs/scheduling.md).",
)
def simulate_cmd(**options: Any) -> None:
    """Simulate Helios and baselines against a device model on a trace, a scenario file or
    multi-turn conversations; no model, no torch."""
    from ignition.simulate.runner import main as simulate_main

    status = simulate_main(**options)
    if status:
        sys.exit(status)


if __name__ == "__main__":
    main()
