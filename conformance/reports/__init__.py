"""Reports: the check report, diffs, expectations (xfails), tables."""
