"""CPU speed of the reference path on the tiny hybrid config (a benchmark, not a test).

Prints prompt tokens/s for a 512-token prefill, and decode steps/s at batch 1 and 4, with the
rows packed into one program ("packed") and run one program per row ("separate"); plus one
mixed step (a 64-token prompt chunk beside three decoders) packed and separate.

    .venv/bin/python benchmarks/model_cpu.py [--threads N] [--repeats N]

On a CPU shared with other work, --threads 1 avoids thread hand-off stalls that dominate
these tiny matmuls.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from ignition.model.config import ModelConfig
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.step import run_step
from ignition.model.weights import random_model

PAGE_SIZE = 64
PREFILL_TOKENS = 512


def _state(config: ModelConfig, num_slots: int) -> ModelState:
    max_pages = 2048 // PAGE_SIZE
    state = ModelState.allocate(config, num_slots, num_slots * max_pages, PAGE_SIZE, max_pages)
    contiguous_pages(state)
    return state


def _step(model, state, rows, slots, capacity, prefill_row=-1) -> None:
    inputs = PackedInputs.build(capacity, rows, slots, prefill_row=prefill_row)
    run_step(model, state, inputs, capacity, SamplingTensors.greedy(capacity.batch_capacity))


def _per_second(work: Callable[[], None], repeats: int) -> float:
    work()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        work()
    return repeats / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"tiny Qwen3.5-MoE hybrid, reference kernels, {torch.get_num_threads()} torch threads")
    config = ModelConfig.tiny()
    model = random_model(config, seed=0)
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(config.vocab_size, (PREFILL_TOKENS,), generator=generator).tolist()

    with torch.inference_mode():
        state = _state(config, 4)
        prefill_capacity = PackedCapacity.mixed(1, 1, PREFILL_TOKENS)

        def prefill() -> None:
            state.reset_slot(0)
            _step(model, state, [prompt], [0], prefill_capacity, prefill_row=0)

        prefills = _per_second(prefill, max(2, args.repeats // 4))
        print(f"prefill {PREFILL_TOKENS} tokens: {prefills * PREFILL_TOKENS:10.0f} prompt tokens/s")

        for slot in range(4):
            state.reset_slot(slot)
            _step(model, state, [prompt[:32]], [slot], PackedCapacity.mixed(1, 1, 64), 0)
        single = PackedCapacity.mixed(1, 1, 0)
        for batch in (1, 4):
            packed_capacity = PackedCapacity.mixed(batch, 1, 0)

            def packed(batch: int = batch, capacity: PackedCapacity = packed_capacity) -> None:
                _step(model, state, [[7]] * batch, list(range(batch)), capacity)

            def separate(batch: int = batch) -> None:
                for slot in range(batch):
                    _step(model, state, [[7]], [slot], single)

            print(
                f"decode batch {batch}: packed {_per_second(packed, args.repeats):8.1f} steps/s, "
                f"separate {_per_second(separate, args.repeats):8.1f} steps/s"
            )
            for slot in range(4):  # keep contexts short and comparable across batches
                state.seq_lens[slot] = 32

        mixed_capacity = PackedCapacity.mixed(4, 1, 64)
        prompt_capacity = PackedCapacity.mixed(1, 1, 64)
        decode_capacity = PackedCapacity.mixed(3, 1, 0)

        def mixed() -> None:
            state.reset_slot(0)
            _step(model, state, [prompt[:64], [7], [7], [7]], [0, 1, 2, 3], mixed_capacity, 0)

        def mixed_separate() -> None:
            state.reset_slot(0)
            _step(model, state, [prompt[:64]], [0], prompt_capacity, 0)
            _step(model, state, [[7], [7], [7]], [1, 2, 3], decode_capacity)

        print(
            f"mixed 64-token prompt + 3 decoders: packed {_per_second(mixed, args.repeats):8.1f} "
            f"steps/s, separate {_per_second(mixed_separate, args.repeats):8.1f} steps/s"
        )


if __name__ == "__main__":
    main()
