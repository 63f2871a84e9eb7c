"""Plan every table with the reference and the installed vLLM under every setting, compare the
whole plans, and write docs/plan-agreement.md and docs/plan-agreement.json.

Usage: python scripts/plan_agreement.py [--corpus FILE] [--optimized] [--out-dir DIR] [--no-write]

Inputs: the shipped real tables of the vLLM release, the tables of its own planning tests
restated, and with --corpus the tables of a corpus file. --optimized also plans with the engine
in a python -O worker. Differences are reviewed in docs/plan-agreement-reviews.toml. Exit 0 when
every difference is a reviewed engine defect, 1 when some is not, 2 on a usage error. The work
is kvcontract.conformance.reports.plan_agreement's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    from kvcontract.conformance.engines.protocol import EngineUnavailable, load_engine
    from kvcontract.conformance.reports import plan_agreement as pa
    from kvcontract.reports import write_atomic
    from kvcontract.usage import UsageError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", default=[], metavar="FILE", help="a corpus file (repeatable)")
    parser.add_argument("--optimized", action="store_true", help="also plan with the engine under python -O")
    parser.add_argument("--out-dir", default=str(ROOT / "docs"), metavar="DIR", help="where to write (default docs/)")
    parser.add_argument("--reviews", default=str(ROOT / "docs" / "plan-agreement-reviews.toml"), metavar="FILE")
    parser.add_argument("--no-write", action="store_true", help="print the summary only")
    args = parser.parse_args(argv)
    try:
        engine = load_engine("vllm")
        inputs = [*pa.shipped_inputs(engine.version), *pa.peer_inputs()]
        for path in args.corpus:
            inputs += pa.corpus_inputs(path)
        reviews = pa.load_reviews(Path(args.reviews), "vllm", engine.version)
    except EngineUnavailable as exc:
        print(f"plan_agreement: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2

    def progress(text: str) -> None:
        print(f"plan_agreement: {text}", file=sys.stderr, flush=True)

    progress(f"{len(inputs)} tables x {len(pa.SETTINGS)} settings with vllm {engine.version}")
    cases = pa.compare_inputs(inputs, engine, reviews, progress=progress)
    if args.optimized:
        progress("the engine under python -O (one worker)")
        cases += pa.compare_inputs(inputs, None, reviews, "optimized", pa.optimized_answers("vllm", inputs), progress)
    s = pa.summary(cases)
    print(f"plan_agreement: {s['cases']} cases: {s['agree']} agree, {s['differ']} differ "
          f"({s['reviewed']} reviewed, {s['unreviewed']} unreviewed); by class: {s['by_class']}")
    if not args.no_write:
        origins = ["vLLM's shipped real tables", "its planning tests' tables restated, with variants"]
        origins += [f"the corpus {Path(p).name}" for p in args.corpus]
        out = Path(args.out_dir)
        write_atomic(out / "plan-agreement.md", pa.render_markdown(cases, "vllm", engine.version, "; ".join(origins)))
        write_atomic(out / "plan-agreement.json", pa.dump_json(pa.to_json(cases, "vllm", engine.version)))
        print(f"plan_agreement: wrote {out / 'plan-agreement.md'} and {out / 'plan-agreement.json'}")
    return 1 if s["unreviewed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
