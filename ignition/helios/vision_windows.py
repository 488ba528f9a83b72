"""Vision windows: a prompt's images grouped into whole-image windows of bounded features."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ignition.helios.types import RequestSpec, SchedulerError


@dataclass(frozen=True)
class VisionWindow:
    """Window ``index``: images ``images`` (prompt order), prefilled over [start, stop)."""

    index: int
    images: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    start: int  # prompt position prefill resumes at (0, or the previous window's stop)
    stop: int  # prefill stops here: the next window's first dependency, or the prompt end

    @property
    def num_features(self) -> int:
        return sum(end - start for start, end in self.spans)

    @property
    def feature_offsets(self) -> tuple[int, ...]:
        """Where each image's features start in the storage: compact, from zero."""
        offsets, at = [], 0
        for start, end in self.spans:
            offsets.append(at)
            at += end - start
        return tuple(offsets)


def plan_windows(
    spans: Sequence[tuple[int, int]], num_prompt_tokens: int, feature_capacity: int
) -> tuple[VisionWindow, ...]:
    """Whole-image windows of at most ``feature_capacity`` features (one image = one span);
    ``feature_capacity`` 0 means unbounded (a single window)."""
    if feature_capacity < 0:
        raise SchedulerError(f"feature_capacity = {feature_capacity}: must be >= 0")
    groups: list[list[int]] = []
    used = 0
    for i, (start, end) in enumerate(spans):
        if not 0 <= start < end <= num_prompt_tokens:
            raise SchedulerError(f"image span ({start}, {end}) outside the prompt")
        if i and start < spans[i - 1][1]:
            raise SchedulerError(f"image span ({start}, {end}) overlaps the one before it")
        size = end - start
        if feature_capacity and size > feature_capacity:
            raise SchedulerError(
                f"image {i} has {size} features; the prepared feature storage holds "
                f"{feature_capacity}"
            )
        if not groups or (feature_capacity and used + size > feature_capacity):
            groups.append([])
            used = 0
        groups[-1].append(i)
        used += size
    if not groups:
        return (VisionWindow(0, (), (), 0, num_prompt_tokens),)
    windows = []
    for k, images in enumerate(groups):
        start = 0 if k == 0 else spans[images[0]][0]
        stop = spans[groups[k + 1][0]][0] if k + 1 < len(groups) else num_prompt_tokens
        windows.append(VisionWindow(k, tuple(images), tuple(spans[i] for i in images), start, stop))
    return tuple(windows)


def window_spec(spec: RequestSpec, windows: Sequence[VisionWindow], k: int) -> RequestSpec:
    """The spec of the generation serving window ``k`` of a request admitted as ``spec``:
    it restores the previous boundary (none for the first window) and, unless it is the
    last window, captures its stop and is held there."""
    window = windows[k]
    is_last = k == len(windows) - 1
    return replace(
        spec,
        restore_tokens=window.start,
        capture_ends=() if is_last else (window.stop,),
        window_stop=0 if is_last else window.stop,
        terminal_snapshot=spec.terminal_snapshot if is_last else False,
    )
