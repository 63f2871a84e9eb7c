"""The contract as the conformance suite sees it: the law model, input shapes, codecs, repros, and the laws (one module per chapter)."""
