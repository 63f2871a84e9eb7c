"""Engines whose planner misbehaves the way untrusted engine code does, for the report's plan
workers (``tests/test_report_html.py``): ``plan_aborting`` kills the interpreter planning a table
with MLA layers, ``plan_hanging`` never returns planning one with Mamba layers, ``plan_exiting`` ends the
interpreter with status 0 planning one with sliding-window layers."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from kvcontract.conformance.engines.protocol import EnginePlan
from kvcontract.conformance.engines.reference import ReferenceEngine


def _has(objs_by_layer: Mapping[str, Any], kind: str) -> bool:
    return any(type(o).__name__ == kind for o in objs_by_layer.values())


class PlanAbortingEngine(ReferenceEngine):
    name = "plan-aborting"

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *, hybrid: bool = True,
                    block_outermost: bool = False) -> EnginePlan:
        if _has(objs_by_layer, "MLAAttentionSpec"):
            os.abort()
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)


class PlanHangingEngine(ReferenceEngine):
    name = "plan-hanging"

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *, hybrid: bool = True,
                    block_outermost: bool = False) -> EnginePlan:
        if _has(objs_by_layer, "MambaSpec"):
            while True:
                time.sleep(1)
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)


def plan_aborting() -> PlanAbortingEngine:
    return PlanAbortingEngine()


def plan_hanging() -> PlanHangingEngine:
    return PlanHangingEngine()


class PlanExitingEngine(ReferenceEngine):
    """Ends the interpreter with status 0 planning a table with sliding-window layers."""

    name = "plan-exiting"

    def plan_layers(self, objs_by_layer: Mapping[str, Any], memory_bytes: int, *, hybrid: bool = True,
                    block_outermost: bool = False) -> EnginePlan:
        if _has(objs_by_layer, "SlidingWindowSpec"):
            os._exit(0)
        return super().plan_layers(objs_by_layer, memory_bytes, hybrid=hybrid, block_outermost=block_outermost)


def plan_exiting() -> PlanExitingEngine:
    return PlanExitingEngine()
