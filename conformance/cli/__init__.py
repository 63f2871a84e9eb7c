"""The command-line verbs of kvcontract's conformance part, one module per verb."""
