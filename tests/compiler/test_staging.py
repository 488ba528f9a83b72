"""Host staging: frames are filled on the host and uploaded once per bound buffer."""

from __future__ import annotations

import torch

from ignition.compiler.buffers import WorkspaceExtents
from ignition.compiler.staging import HostStaging
from ignition.compiler.workspace import Workspace
from ignition.model.packing import PackedCapacity


def _staging() -> tuple[Workspace, HostStaging]:
    workspace = Workspace(WorkspaceExtents(4, 16, 8), hidden_size=8, device=torch.device("cpu"))
    page_table = torch.full((3, 2), -1, dtype=torch.int32)
    return workspace, HostStaging(workspace, mirrors={"page_table": page_table})


def test_a_frame_starts_as_all_padding_over_the_bound_prefixes():
    workspace, staging = _staging()
    _, uploads = workspace.step_inputs(PackedCapacity.mixed(2, 8, 0))
    frame = staging.begin(uploads)
    frame["slot_ids"][:2] = [3, 1]
    staging.upload(frame)
    staging.begin(uploads)
    again = staging.begin(uploads)  # the first set again, two frames later
    assert again["slot_ids"][:2].tolist() == [-1, -1]
    assert again["top_p"][:2].tolist() == [1.0, 1.0]


def test_upload_copies_only_the_prefixes_a_program_binds():
    workspace, staging = _staging()
    workspace.buffers["token_ids"].fill_(7)
    _, uploads = workspace.step_inputs(PackedCapacity.mixed(2, 3, 0))
    bound = dict(uploads)["token_ids"]
    assert bound < 16
    frame = staging.begin(uploads)
    frame["token_ids"][:3] = [11, 12, 13]
    staging.upload(frame)
    expected = [11, 12, 13] + [0] * (bound - 3) + [7] * (16 - bound)
    assert workspace.buffers["token_ids"].tolist() == expected
    assert staging.num_uploads == len(uploads)


def test_two_frames_in_flight_use_different_staging_sets():
    workspace, staging = _staging()
    _, uploads = workspace.step_inputs(PackedCapacity.mixed(2, 8, 0))
    first, second = staging.begin(uploads), staging.begin(uploads)
    assert first.set_index != second.set_index
    first["seed"][0], second["seed"][0] = 5, 9
    assert first["seed"][0] == 5  # the queued frame's inputs are not overwritten


def test_a_changed_mirror_is_uploaded_with_the_next_frame_only():
    workspace, staging = _staging()
    mirror = staging.mirrors["page_table"]
    mirror.array[1] = [4, 5]
    mirror.mark_dirty()
    _, uploads = workspace.step_inputs(PackedCapacity.mixed(2, 8, 0))
    staging.upload(staging.begin(uploads))
    assert mirror.device_tensor.tolist() == [[-1, -1], [4, 5], [-1, -1]]
    assert staging.num_uploads == len(uploads) + 1
    staging.upload(staging.begin(uploads))
    assert staging.num_uploads == 2 * len(uploads) + 1
