"""The vLLM adapter: source trees, release discovery, value conversion, grouping, routing."""
