"""Peak memory of loading a qwen4_exp checkpoint with and without its n-gram table (issue 23).

Serving at host or disk residency loads with ``without_ple_tables=True``: the table's
tensors are checked from their headers and never read, and the store maps the shards. This
writes a transformers checkpoint whose two PLE tables take about ``--table-mib`` MiB (fp32),
then loads it in fresh processes, one way after the other (``--repeats`` times,
interleaved), and prints each load's peak resident-memory growth (Linux: VmHWM reset
through /proc/self/clear_refs, minus VmRSS before loading), the difference and the ratio:

    PYTHONPATH=. .venv/bin/python benchmarks/ple_load_memory.py --table-mib 256

``--build`` measures ``ignition build`` instead (small catalog, CPU): at device residency
it validates with the whole model, table included; at disk residency it loads without the
table and validates through the serving store (``runtime.ple.validation.BuildRows``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def _child(imports: str, setup: str, work: str) -> str:
    """A child process's script: ``setup``, then ``work`` measured as the growth of peak RSS
    (VmHWM restarted just before it) over the RSS when it starts; prints one JSON line."""
    return f"""
import json, sys
import torch
{imports}

def status_kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])

torch.set_num_threads(1)
path, skip = sys.argv[1], sys.argv[2] == "1"
layout = find_layout(path)
{setup}
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) restarts from now
before = status_kib("VmRSS")
{work}
peak = status_kib("VmHWM")
print(json.dumps({{"peak_growth_kib": peak - before, "table_bytes": layout.table_bytes}}))
"""


CHILD = _child(
    "from ignition.model.weights import load_model\n"
    "from ignition.runtime.ple.table import find_layout",
    "",
    "model = load_model(path, without_ple_tables=skip)",
)

BUILD_CHILD = _child(
    """import tempfile
from ignition.compiler.build import build_bundle
from ignition.recipes import LoadOptions
from ignition.runtime.ple.delivery import PleOptions, describe_table
from ignition.runtime.ple.table import find_layout
from ignition.runtime.ple.validation import BuildRows""",
    """residency = sys.argv[3] if skip else "device"
entry = describe_table(PleOptions(residency), layout, residency)
options = LoadOptions(max_prefill_chunk=128, concurrency=2, speculation="off")""",
    """with tempfile.TemporaryDirectory() as out:
    build_bundle(None, options, weights=path, out_dir=out, device="cpu", ple=entry,
                 ple_rows=BuildRows.of(path, entry))""",
)


def write_checkpoint(path: Path, table_mib: int) -> None:
    import torch
    import transformers as tf

    from tests.model.hf_checkpoints import _copy_tokenizer, qwen4_exp_text_config

    text = qwen4_exp_text_config()
    row_bytes = text["ple_embed_dim"] // ((text["ngram_size"] - 1) * text["heads_per_ngram"]) * 4
    heads = 2 * (text["ngram_size"] - 1) * text["heads_per_ngram"]  # two PLE layers
    text["ngram_vocab_size_base"] = table_mib * (1 << 20) // row_bytes // heads
    torch.manual_seed(0)
    model = tf.Qwen4ExpForCausalLM(tf.Qwen4ExpTextConfig(**text)).eval()
    model.save_pretrained(path)
    _copy_tokenizer(path)


def load_once(path: Path, skip: bool, child: str = CHILD, residency: str = "disk") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", child, str(path), "1" if skip else "0", residency],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table-mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--build", action="store_true", help="measure ignition build")
    parser.add_argument("--build-residency", choices=("host", "disk"), default="host")
    args = parser.parse_args()
    child = BUILD_CHILD if args.build else CHILD
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        write_checkpoint(path, args.table_mib)
        runs: dict[bool, list[int]] = {False: [], True: []}
        for _ in range(args.repeats):
            for skip in (False, True):
                result = load_once(path, skip, child, args.build_residency)
                runs[skip].append(result["peak_growth_kib"])
        table_mib = result["table_bytes"] / (1 << 20)
    whole, without = min(runs[False]) / 1024, min(runs[True]) / 1024
    what = "building (load + validation)" if args.build else "loading"
    print(f"table: {table_mib:.1f} MiB; peak RSS growth while {what}, best of {args.repeats}:")
    print(f"  with the table (device residency):      {whole:8.1f} MiB")
    off = args.build_residency if args.build else "host / disk"
    print(f"  without it ({off} residency):{' ' * (16 - len(off))}{without:8.1f} MiB")
    print(f"  with minus without:                     {whole - without:8.1f} MiB")
    print(f"  ratio with / without:                   {whole / max(without, 1e-9):8.2f}")


if __name__ == "__main__":
    main()
