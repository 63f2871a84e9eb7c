"""The worker's progress channel: the example being run reaches the supervisor through a shared
slot, while the pipe carries a throttled heartbeat. A crash or hang after many quick examples
still names the very example it interrupted, and a busy task still sends a heartbeat."""

from __future__ import annotations

import json

from kvcontract.conformance.run import tasks
from kvcontract.conformance.run.worker import HEARTBEAT_EVERY_S, TaskEmitter, Worker, begin

FULL = {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"}
MLA = {"kind": "MLAAttentionSpec", "block_size": 16, "num_kv_heads": 1, "head_size": 576, "dtype": "bfloat16"}


def _witness(block_size: int, spec: dict[str, object] = FULL) -> dict[str, object]:
    return {"specs": [{**spec, "block_size": block_size}, {**spec, "block_size": block_size}]}


def test_a_crash_names_the_example_it_interrupted_not_the_last_heartbeat() -> None:
    """300 quick replays (a few heartbeats among them), then one that aborts the interpreter:
    the task's result names that one."""
    items = [["MERGE-ORDER-1", _witness(16 * (1 + i % 4))] for i in range(300)]
    items.append(["MERGE-ORDER-1", _witness(48, MLA)])
    events: list[object] = []
    with Worker() as worker:
        result = worker.run(tasks.REPLAY_ALL_TASK, {"engine": "tests.engines.misbehaving:aborting", "items": items},
                            timeout=120, heartbeat=60, on_event=events.append)
    assert result.status == "crashed" and "SIGABRT" in result.error
    assert result.last_event is not None and result.last_event["phase"] == "replay"
    assert result.last_event["example"] == items[-1][1]
    assert 1 <= len(events) < len(items)  # throttled: not one event per example


def test_a_task_emitter_sends_a_heartbeat_at_most_every_interval() -> None:
    sent: list[str] = []
    emit = TaskEmitter(7, sent.append, None)
    begin(emit, {"clause": "C-1", "phase": "systematic"}, {"specs": []})
    assert len(sent) == 1 and json.loads(sent[0]) == {"id": 7, "event": {"clause": "C-1", "phase": "systematic",
                                                                          "example": {"specs": []}}}
    emit({"finding": 1})  # a plain event is never held back
    assert json.loads(sent[-1]) == {"id": 7, "event": {"finding": 1}}
    # without a slot, every example is sent: the pipe is then the only record of it
    begin(emit, {"clause": "C-1", "phase": "systematic"}, {"specs": [1]}, json.dumps({"specs": [1]}))
    assert len(sent) == 3
    assert HEARTBEAT_EVERY_S < 1  # far below any per-example limit (3 s at the least)


def test_begin_outside_a_worker_hands_the_whole_event_to_a_plain_callable() -> None:
    seen: list[object] = []
    begin(seen.append, {"clause": "C-1", "phase": "replay"}, {"specs": []})
    begin(None, {"clause": "C-1"}, {"specs": []})  # nothing to tell
    assert seen == [{"clause": "C-1", "phase": "replay", "example": {"specs": []}}]
