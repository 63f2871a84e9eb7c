"""Running the laws: execution, verdicts, worker tasks, the session, the supervised worker, and the symbolic search."""
