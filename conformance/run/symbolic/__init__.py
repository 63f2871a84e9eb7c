"""The symbolic search (CrossHair) over the engine-checkable clauses."""
