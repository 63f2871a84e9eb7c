"""PLAN-SIZE-2 counts a padded block stride as part of the block (found by the symbolic mode's
control run: the reference itself 'left a block unused')."""

from __future__ import annotations

from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.model import Example
from kvcontract.conformance.engines.reference import ReferenceEngine

SWA_MLA = {"kind": "SlidingWindowMLASpec", "block_size": 16, "num_kv_heads": 1, "head_size": 576, "dtype": "bfloat16",
           "kv_quant_mode": "turboquant_k8v4", "sliding_window": 128, "cache_dtype_str": "fp8_ds_mla"}
PADDED = Example.from_json({"table": {"layers.0": SWA_MLA,
                                      "layers.1": {**SWA_MLA, "block_stride_alignment": 4096}}})


def test_a_padded_last_slot_is_not_a_block_left_unused():
    """26 blocks of 18,432 + 20,480 bytes (the second layer's pages padded to 4 KiB) fill 1,011,712
    of 1,048,589 bytes: the 36,877 left are less than a block. Counting to the last page's end
    (1,009,664 bytes) made it look as if 38,925 bytes, more than a block, were left. (The clause
    still finds a block left unused: tests/test_repro.py's bytes-per-block-summed case.)"""
    law("PLAN-SIZE-2").check(ReferenceEngine(), PADDED)
