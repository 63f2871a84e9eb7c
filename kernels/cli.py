"""``kvcontract kernels``: check an attention backend against the ground truth (NUM-DISPATCH-1).

Prints one line per mode (cases, rows, max absolute / relative / LSE error,
worst error-to-tolerance ratio, status); exits 0 when nothing failed, 1 on
any failure or when the backend cannot run here, 2 on a usage error. Torch
and the backends load only when the verb runs. ``--backend`` takes a
built-in name, ``module:factory`` or an installed entry point
(``kvcontract.backends``). ``--mutants`` instead runs every kernel mutant on
the default cases and prints the power table (exit 1 if one survives).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvcontract.options import add_json, add_seed, comma_list
from kvcontract.reports import text_table

__all__ = ["register", "run"]

DTYPE_CHOICES = ("float32", "bfloat16", "float16")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``kernels`` verb to the ``kvcontract`` command line (NUM-DISPATCH-1)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "kernels",
        help="check an MLA attention backend against the numerical ground truth, per mode",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument(
        "--backend", default="reference", metavar="NAME",
        help="backend to check: a name (see --list-backends), module:factory, or an installed "
        "entry point of the group kvcontract.backends; default: reference",
    )
    add_json(parser, "the report (or with --mutants the power table)")
    add_seed(parser, "the drawn cases")
    parser.add_argument(
        "--cases", type=int, default=6, metavar="N", help="cases drawn per mode (default 6)"
    )
    parser.add_argument(
        "--dtype", choices=("auto", *DTYPE_CHOICES), default="auto",
        help="storage dtype of queries, cache and output; auto: bfloat16 where the backend "
        "can run it, else float16 (Triton's interpreter), else float32",
    )
    parser.add_argument(
        "--heads", default="1,2,4,16,128", metavar="H,H,...",
        help="query head counts (default 1,2,4,16,128; drawn cases use those up to 16, the 128-head case is a production one)",
    )
    parser.add_argument("--device", default=None,
                        help="torch device (default: cuda when available, else cpu)")
    parser.add_argument("--max-seq-len", type=int, default=8192, metavar="L",
                        help="longest context of the production-shaped cases (default 8192; "
                        "drawn cases stay at most 300)")
    parser.add_argument("--no-production", action="store_true",
                        help="only the drawn small cases, not the production-shaped ones "
                        "(width 576, contexts up to --max-seq-len)")
    parser.add_argument("--mutants", action="store_true",
                        help="run every kernel mutant on the default cases and print the power "
                        "table (float32 and bfloat16 unless --dtype); --json writes it")
    parser.add_argument("--list-backends", action="store_true", help="list backends and exit")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the ``kernels`` verb; returns the exit code (NUM-DISPATCH-1)."""
    from kvcontract.usage import UsageError

    from .backends import UnknownBackendError, backend_names, get_backend

    if args.list_backends:
        rows = []
        for name in backend_names():
            try:
                description = get_backend(name).description
            except UnknownBackendError as exc:
                description = f"(broken: {exc})"
            rows.append([name, description])
        print("\n".join(text_table(["backend", "description"], rows, rule=False)))
        return 0
    if args.cases < 1:
        raise UsageError("--cases must be at least 1")
    if args.max_seq_len < 8:
        raise UsageError("--max-seq-len must be at least 8")
    try:
        head_counts = tuple(int(h) for h in comma_list(args.heads, "--heads") or ())
    except ValueError:
        raise UsageError(f"--heads takes comma-separated integers, got {args.heads!r}") from None
    if not head_counts or min(head_counts) < 1:
        raise UsageError("--heads needs positive head counts")
    if args.mutants:
        return _run_mutants(args)
    try:
        backend = get_backend(args.backend)
    except UnknownBackendError as exc:
        raise UsageError(str(exc)) from None
    dtype = args.dtype
    if dtype == "auto":
        preference = ("bfloat16", "float16", "float32")
        runnable = [d for d in preference if backend.unavailable_reason(d) is None]
        dtype = runnable[0] if runnable else preference[0]

    import torch

    from .harness import check_backend
    from .report import SuiteReport, format_table, write_json

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        report = SuiteReport(
            backend.name, backend.description, dtype, str(device), args.seed, (), (),
            error="skipped: --device cuda, but torch sees no CUDA device here "
            "(torch.cuda.is_available() is False: no GPU, or a CPU-only torch build)",
        )
    else:
        report = check_backend(
            backend,
            cases_per_mode=args.cases,
            seed=args.seed,
            dtype=dtype,
            device=device,
            max_seq_len=args.max_seq_len,
            head_counts=head_counts,
            production=not args.no_production,
        )
    print(format_table(report))
    if args.json:
        write_json(report, args.json)
    sys.stdout.flush()
    return 0 if report.passed else 1


def _run_mutants(args: argparse.Namespace) -> int:
    from .mutants import format_power_table, power_table, write_power_json

    dtypes = ("float32", "bfloat16") if args.dtype == "auto" else (args.dtype,)
    table = power_table(
        dtypes, cases_per_mode=args.cases, seed=args.seed, max_seq_len=args.max_seq_len
    )
    print(format_power_table(table))
    if args.json:
        write_power_json(table, args.json)
    sys.stdout.flush()
    return 0 if table.all_killed else 1
