"""Mutants of grouping (``group_layers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _register
from kvcontract.conformance.engines.protocol import EngineGroup


@_register
class MixesKinds(Mutant):
    """GROUP-COMPAT-1, GROUP-MERGED-1: groups are buckets of one kind, not of mergeable specs."""

    key = "groups-by-kind"
    description = ("grouping puts all layers of one kind in one group, with the first "
                   "group's spec, even when their specs do not merge")
    imitates = ""
    expected_clauses = ("GROUP-COMPAT-1", "GROUP-MERGED-1", "GROUP-UNION-1")

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        buckets: dict[type, list[EngineGroup]] = {}
        for g in super().group_layers(objs_by_layer):
            buckets.setdefault(type(g.spec), []).append(g)
        return [EngineGroup(tuple(n for g in gs for n in g.layer_names), gs[0].spec)
                for gs in buckets.values()]


@_register
class InvertedTable(Mutant):
    """GROUP-PARTITION-1: grouping inverts the layer table and loses layers."""

    key = "inverted-table"
    description = ("grouping indexes layers by spec ({spec: name}), so of layers with "
                   "identical specs only the last one gets a group")
    imitates = ""
    expected_clauses = ("GROUP-PARTITION-1",)

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        by_spec = {spec: name for name, spec in objs_by_layer.items()}
        return super().group_layers({name: spec for spec, name in by_spec.items()})


@_register
class FirstLayerSpec(Mutant):
    """GROUP-UNION-1, GROUP-MERGED-1: a group's spec is its first layer's, not the merge."""

    key = "first-layer-spec"
    description = "a group's spec is its first layer's (page-unified) spec instead of the merge"
    imitates = ""
    expected_clauses = ("GROUP-UNION-1", "GROUP-MERGED-1")

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        groups = super().group_layers(objs_by_layer)
        unified = reference.unify_page_sizes(objs_by_layer) if len(groups) > 1 else objs_by_layer
        return [EngineGroup(g.layer_names, unified[g.layer_names[0]]) for g in groups]


@_register
class BucketWithoutBreak(Mutant):
    """GROUP-PARTITION-1: the bucketing loop has no ``break``: a layer joins every group it merges with."""

    key = "bucket-without-break"
    description = ("grouping's first-fit loop lacks its break, so a layer whose spec merges with two groups "
                   "(no window, beside two windows) is put in both")
    imitates = ""
    expected_clauses = ("GROUP-PARTITION-1",)

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        if reference.is_uniform(objs_by_layer):
            return super().group_layers(objs_by_layer)
        buckets: list[tuple[list[str], list[Any]]] = []
        for name, spec in reference.unify_page_sizes(objs_by_layer).items():
            placed = False
            for names, members in buckets:
                try:
                    reference.merge([*members, spec])
                except reference.IncompatibleSpecs:
                    continue
                names.append(name)
                members.append(spec)
                placed = True  # the defect: no break
            if not placed:
                buckets.append(([name], [spec]))
        return [EngineGroup(tuple(names), reference.merge(members)) for names, members in buckets]
