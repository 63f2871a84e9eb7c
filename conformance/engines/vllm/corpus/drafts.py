"""Speculative-decoding pairs: a target served with its draft, built as vLLM loads a draft.

The target's ``VllmConfig`` carries a ``SpeculativeConfig`` made as ``EngineArgs`` makes it
(``method``, ``model``: the draft's checkpoint folder, or the target's own where the draft
lives in the target checkpoint: MTP, DeepSeek-V4's DSpark; ``num_speculative_tokens``).
After the target model is created, the model runner's speculator (``init_speculator``) loads
the draft under the same config (``DraftModelSpeculator.load_model``): the draft's layers
join the static forward context and are marked ``is_draft_layer``, and the runner's spec
loop marks their specs draft. Each pair is a corpus table ``<Target>+<method>``.

A draft's own configuration (EAGLE heads ship their own ``config.json``) is written as its
checkpoint folder from :data:`PAIRS`' published values, each with its source.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_EAGLE3_LLAMA31 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json"
_EAGLE_LLAMA3 = "yuhuili/EAGLE-LLaMA3-Instruct-8B config.json"


@dataclass(frozen=True)
class Pair:
    """One target architecture and the draft vLLM serves it with."""

    target: str
    method: str
    """``SpeculativeConfig.method``."""
    draft_config: Mapping[str, Any] | None = None
    """The draft checkpoint's ``config.json`` (None: the draft is in the target's checkpoint,
    or the method has no draft checkpoint)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Draft value name -> where it is published."""
    speculative: Mapping[str, Any] = field(default_factory=dict)
    """More ``--speculative-config`` values (with their sources in ``sources``)."""
    num_speculative_tokens: int = 1
    """As vLLM's own initialisation test serves every draft (``tests/models/test_initialization.py``)."""
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.target}+{self.method}"

    def speculative_config(self, target_folder: str, stack: contextlib.ExitStack) -> dict[str, Any]:
        """The ``--speculative-config`` values (the draft's folder made in ``stack``)."""
        config: dict[str, Any] = {"method": self.method}
        config["num_speculative_tokens"] = self.num_speculative_tokens
        config.update(self.speculative)
        if self.draft_config is not None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="kvcontract-draft-"))
            Path(folder, "config.json").write_text(json.dumps(dict(self.draft_config)), encoding="utf-8")
            config["model"] = folder
        elif self.method in _DRAFT_IN_TARGET:
            config["model"] = target_folder
        return config

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "draft_config": dict(self.draft_config or {}),
                "speculative": json.loads(json.dumps(dict(self.speculative))),
                "sources": dict(self.sources), "num_speculative_tokens": self.num_speculative_tokens,
                "note": self.note}


_DRAFT_IN_TARGET = frozenset({"mtp", "deepseek_mtp", "dspark"})

_LLAMA_DRAFT = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
                "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
                "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "model_type": "llama",
                "torch_dtype": "bfloat16"}

PAIRS: tuple[Pair, ...] = (
    Pair("LlamaForCausalLM", "eagle3",
         {**_LLAMA_DRAFT, "architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000,
          "max_position_embeddings": 2048},
         {k: _EAGLE3_LLAMA31 for k in (*_LLAMA_DRAFT, "architectures", "draft_vocab_size",
                                       "max_position_embeddings")}),
    Pair("LlamaForCausalLM", "eagle",
         {**_LLAMA_DRAFT, "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 8192},
         {k: _EAGLE_LLAMA3 for k in (*_LLAMA_DRAFT, "architectures", "max_position_embeddings")}),
    Pair("LlamaForCausalLM", "extract_hidden_states",
         speculative={"draft_model_config": {"hf_config": {
             "eagle_aux_hidden_state_layer_ids": [2, 16, 29]}}},
         sources={"eagle_aux_hidden_state_layer_ids":
                  "SupportsEagle3.get_eagle3_default_aux_hidden_state_layers "
                  "(model_executor/models/interfaces.py) for the target's 32 layers: "
                  "(2, num_layers // 2, num_layers - 3)"},
         note="no draft checkpoint: ExtractHiddenStatesModel is made from the target's config"),
    Pair("DeepseekV3ForCausalLM", "mtp",
         note="the draft is the target checkpoint's next-n layer (num_nextn_predict_layers)"),
    Pair("DeepseekV4ForCausalLM", "dspark",
         note="the draft is in the target checkpoint (DSparkDraftModel)"),
)
"""The pairs the corpus builds (the targets' configurations come from :mod:`.configs`)."""

NOT_BUILT: Mapping[str, str] = {
    "KimiK3ForConditionalGeneration+dspark":
        "the target cannot be built here (see its own entry): Kimi-K3's published configuration "
        "values are not available offline",
}
"""Pairs the release supports that the corpus lists with the reason it does not build them."""


def pair_named(name: str) -> Pair:
    """The pair called ``name`` (``<Target>+<method>``)."""
    for pair in PAIRS:
        if pair.name == name:
            return pair
    raise KeyError(f"no speculative-decoding pair {name!r} (known: {', '.join(p.name for p in PAIRS)})")
