"""The qwen4_exp parity table of issue 31: the max abs fp32 logit difference against
transformers for each case of tests/model/test_qwen4_exp_parity.py, on a tiny random
Qwen4ExpForCausalLM (with an MTP head) and Qwen4ExpForConditionalGeneration (with a tower).

    python scripts/qwen4_exp_parity_table.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ignition.kernels import use_backend
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import write_qwen4_exp
from tests.model.test_qwen4_exp_parity import (
    CONTINUATION,
    PROMPT,
    prompt_logits,
    reference_logits,
)


def diff(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours.detach() - theirs).abs().max())


def cases(model, reference) -> list[tuple[str, float]]:
    def ref(tokens: list[int]) -> torch.Tensor:
        return reference_logits(reference, tokens)

    whole = prompt_logits(model, new_state(model.config), 0, PROMPT)
    out = [("prefill 40 tokens (budget 8, blocks of 4)", diff(whole, ref(PROMPT)))]
    for chunk in (13, 6):
        got = prompt_logits(model, new_state(model.config), 0, PROMPT, chunk=chunk)
        out.append((f"prefill in chunks of {chunk}", diff(got, ref(PROMPT))))
    state = new_state(model.config)
    prompt_logits(model, state, 0, PROMPT)
    full = ref(PROMPT + CONTINUATION)[len(PROMPT) :]
    worst = 0.0
    for i, token in enumerate(CONTINUATION):
        got = decode_rows(model, state, [[token]], [0], width=1).target.logits[0]
        worst = max(worst, diff(got, full[i]))
    out.append((f"decode {len(CONTINUATION)} tokens one by one", worst))
    state = new_state(model.config)
    prompt_logits(model, state, 0, PROMPT)
    prompt_logits(model, state, 2, PROMPT[:21])
    rows = [CONTINUATION[:1], PROMPT[::-1], CONTINUATION[3:4]]
    capacity = PackedCapacity.mixed(3, 1, 64)
    inputs = PackedInputs.build(capacity, rows, [0, 1, 2], prefill_row=1)
    target = run_step(model, state, inputs, capacity, SamplingTensors.greedy(3)).target
    starts, logits = target.meta.cu_query_lens.tolist(), target.logits
    worst = max(
        diff(logits[starts[0]], ref(PROMPT + rows[0])[-1]),
        diff(logits[starts[1] : starts[2]], ref(rows[1])),
        diff(logits[starts[2]], ref(PROMPT[:21] + rows[2])[-1]),
    )
    out.append(("mixed: a 40-token prompt row + 2 decode rows", worst))
    state = new_state(model.config)
    prompt_logits(model, state, 0, PROMPT)
    prompt_logits(model, state, 1, PROMPT[:15])
    rows = [CONTINUATION[:4], CONTINUATION[5:9]]
    got = decode_rows(model, state, rows, [0, 1], width=4).target.logits
    worst = 0.0
    for r, (context, row) in enumerate(zip([PROMPT, PROMPT[:15]], rows, strict=True)):
        worst = max(worst, diff(got[4 * r : 4 * r + 4], ref(context + row)[len(context) :]))
    out.append(("2 verification rows, 4 wide", worst))
    return out


def main() -> None:
    print("| checkpoint | case | max abs logit diff |\n|---|---|---|")
    for name, multimodal in (("Qwen4ExpForCausalLM", False), ("ForConditionalGeneration", True)):
        path = Path(tempfile.mkdtemp()) / name
        reference = write_qwen4_exp(path, seed=int(multimodal), multimodal=multimodal)
        model = load_checkpoint(path).model
        with use_backend("reference"):
            for case, value in cases(model, reference):
                print(f"| {name} | {case} | {value:.1e} |")


if __name__ == "__main__":
    main()
