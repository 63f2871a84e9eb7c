"""Field roles: what each spec field means to a KV-cache group (chapter ROLE).

Every field of every spec kind declares exactly one role in its dataclass field
metadata (ROLE-TABLE-1). The one generic :func:`kvcontract.reference.merge`
reads these roles; no spec kind has a merge of its own.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Final

ROLE_KEY: Final = "kvcontract.role"
RULE_KEY: Final = "kvcontract.rule"
ADVISORY_KEY: Final = "kvcontract.advisory"
ADVISORY_REASON_KEY: Final = "kvcontract.advisory_reason"
RELIED_KEY: Final = "kvcontract.relied_on_by"
"""Field metadata key: who relies on the field's value in a group's merged spec (or, where
the engine reads per-layer specs instead, in those), engine-neutral first, then the vLLM
0.34.0 code as ``vllm/<path>.py:<line> `<name>` in <function>`` (ROLE-TABLE-1)."""


class Role(enum.Enum):
    """The role of a spec field (ROLE-LAYOUT-1 .. ROLE-ANNOTATION-1)."""

    LAYOUT = "layout"
    """Sizes or shapes the physical cache tensor: members of a group must agree."""
    ALLOCATION = "allocation"
    """Drives block management (block tables, freeing, group identity): must agree."""
    CAPABILITY = "capability"
    """Backend or mask behaviour the group must be able to serve: unioned."""
    ANNOTATION = "annotation"
    """Bookkeeping that is not part of the cache's identity: merged by its rule."""


class AnnotationRule(enum.Enum):
    """How an ANNOTATION field is merged (ROLE-ANNOTATION-1)."""

    ANY = "any"
    """A flag: the merged value is True when any member's is."""
    COMMON = "common"
    """An optional value: members that set it (not None) must agree; the merged
    value is that common value, or None when no member sets it."""


def _metadata(role: Role, relied_on_by: str | None, advisory: bool | str,
              **extra: Any) -> dict[str, Any]:
    """The metadata of a field of ``role``: its citation and, when no engine code reads
    the field's value in a group's merged spec, ``advisory`` with the reason (a string;
    ``True`` alone is accepted, but the citation test asks for the reason)."""
    metadata: dict[str, Any] = {ROLE_KEY: role, ADVISORY_KEY: bool(advisory), **extra}
    if relied_on_by:
        metadata[RELIED_KEY] = relied_on_by
    if isinstance(advisory, str) and advisory:
        metadata[ADVISORY_REASON_KEY] = advisory
    return metadata


def layout(default: Any = dataclasses.MISSING, *, relied_on_by: str | None = None,
           advisory: bool | str = False) -> Any:
    """A LAYOUT field (ROLE-LAYOUT-1); ``advisory`` (the reason) when nothing reads the
    merged value, so a breach that involves only it is a SHOULD (MERGE-ANNOTATION-2)."""
    return dataclasses.field(default=default, metadata=_metadata(Role.LAYOUT, relied_on_by, advisory))


def allocation(default: Any = dataclasses.MISSING, *, relied_on_by: str | None = None,
               advisory: bool | str = False) -> Any:
    """An ALLOCATION field (ROLE-ALLOCATION-1); ``advisory`` as for :func:`layout`."""
    return dataclasses.field(default=default, metadata=_metadata(Role.ALLOCATION, relied_on_by, advisory))


def capability(default: bool = False, *, relied_on_by: str | None = None,
               advisory: bool | str = False) -> Any:
    """A CAPABILITY field (ROLE-CAPABILITY-1): always a flag, unioned by merge;
    ``advisory`` as for :func:`layout`."""
    return dataclasses.field(default=default, metadata=_metadata(Role.CAPABILITY, relied_on_by, advisory))


def annotation(default: Any, rule: AnnotationRule, *, relied_on_by: str | None = None,
               advisory: bool | str = False) -> Any:
    """An ANNOTATION field merged by ``rule`` (ROLE-ANNOTATION-1); ``advisory`` (the
    reason) when nothing reads the merged value (MERGE-ANNOTATION-2)."""
    return dataclasses.field(
        default=default, metadata=_metadata(Role.ANNOTATION, relied_on_by, advisory, **{RULE_KEY: rule})
    )


def is_advisory(f: dataclasses.Field[Any]) -> bool:
    """Whether ``f`` is advisory: no engine code reads its value in a group's merged
    spec, so a breach that involves only advisory fields is judged by
    MERGE-ANNOTATION-2, a SHOULD, and by no MUST clause. Any role may be advisory; the
    role still says how merge treats the field."""
    return bool(f.metadata.get(ADVISORY_KEY, False))


def advisory_reason(f: dataclasses.Field[Any]) -> str | None:
    """Why ``f`` is advisory: what reads it instead of the merged spec, if anything."""
    reason = f.metadata.get(ADVISORY_REASON_KEY)
    return reason if isinstance(reason, str) else None


def relied_on_by(f: dataclasses.Field[Any]) -> str | None:
    """The engine code that reads ``f`` in a group's merged spec (ROLE-TABLE-1)."""
    cited = f.metadata.get(RELIED_KEY)
    return cited if isinstance(cited, str) else None


def role_of(f: dataclasses.Field[Any]) -> Role:
    """The declared role of a spec field (ROLE-TABLE-1).

    Raises ``TypeError`` for a field that declares none: an undeclared field
    would silently escape the merge contract.
    """
    role = f.metadata.get(ROLE_KEY)
    if not isinstance(role, Role):
        raise TypeError(f"spec field {f.name!r} declares no kvcontract role (ROLE-TABLE-1)")
    return role


def rule_of(f: dataclasses.Field[Any]) -> AnnotationRule:
    """The merge rule of an ANNOTATION field (ROLE-ANNOTATION-1)."""
    rule = f.metadata.get(RULE_KEY)
    if not isinstance(rule, AnnotationRule):
        raise TypeError(f"annotation field {f.name!r} declares no merge rule (ROLE-ANNOTATION-1)")
    return rule
