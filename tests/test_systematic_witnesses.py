"""Every input the systematic phase builds loads back from its witness JSON: a finding's
pinned witness must be replayable (a value of the wrong type, e.g. ``True`` in an
``int | None`` field, would make its replay a kit error)."""

from __future__ import annotations

import dataclasses

import pytest

from kvcontract.conformance.contract import systematic
from kvcontract.conformance.contract.codec import spec_from_json, spec_to_json
from kvcontract.conformance.contract.strategies import FULL_DOMAIN
from kvcontract.reference import SPEC_KINDS, MambaSpec


@pytest.mark.parametrize("kind", SPEC_KINDS, ids=lambda k: k.__name__)
def test_every_variant_round_trips_through_its_witness(kind):
    for f in dataclasses.fields(kind):
        for spec in systematic.variants(kind, f.name, FULL_DOMAIN):
            assert spec_from_json(spec_to_json(spec)) == spec, (kind.__name__, f.name, getattr(spec, f.name))


def test_no_bool_is_offered_for_an_int_field():
    values = [v.prefill_checkpoint_alignment
              for v in systematic.variants(MambaSpec, "prefill_checkpoint_alignment", FULL_DOMAIN)]
    assert values and not any(isinstance(v, bool) for v in values)
