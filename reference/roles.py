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


def layout(default: Any = dataclasses.MISSING) -> Any:
    """A LAYOUT field (ROLE-LAYOUT-1)."""
    return dataclasses.field(default=default, metadata={ROLE_KEY: Role.LAYOUT})


def allocation(default: Any = dataclasses.MISSING) -> Any:
    """An ALLOCATION field (ROLE-ALLOCATION-1)."""
    return dataclasses.field(default=default, metadata={ROLE_KEY: Role.ALLOCATION})


def capability(default: bool = False) -> Any:
    """A CAPABILITY field (ROLE-CAPABILITY-1): always a flag, unioned by merge."""
    return dataclasses.field(default=default, metadata={ROLE_KEY: Role.CAPABILITY})


def annotation(default: Any, rule: AnnotationRule, *, advisory: bool = False) -> Any:
    """An ANNOTATION field merged by ``rule`` (ROLE-ANNOTATION-1); ``advisory`` when
    engines document it as never affecting grouping (MERGE-ANNOTATION-2)."""
    return dataclasses.field(
        default=default, metadata={ROLE_KEY: Role.ANNOTATION, RULE_KEY: rule, ADVISORY_KEY: advisory}
    )


def is_advisory(f: dataclasses.Field[Any]) -> bool:
    """Whether ``f`` is an advisory annotation (ROLE-ANNOTATION-1, MERGE-ANNOTATION-2)."""
    return bool(f.metadata.get(ADVISORY_KEY, False))


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
