"""The suite's power: the mutant hunt and the symbolic comparison."""
