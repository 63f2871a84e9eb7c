"""Reading a vLLM release's source for :mod:`.producible` (``ast``, nothing imported): the spec
classes of its interface module, and the calls of a module with what each function knows (its
spec-typed names, its ``dict`` literals, its ``{Kind: Kind}`` maps, ``isinstance`` narrowing)."""

from __future__ import annotations

import ast
import bisect
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

SPEC_BASE = "KVCacheSpec"


class _NotLiteral:
    def __repr__(self) -> str:
        return "<not a literal>"

    def __reduce__(self) -> str:
        return "NOT_LITERAL"  # unpickled as the one instance (a cached scan compares by identity)


NOT_LITERAL: Any = _NotLiteral()
"""The value of a keyword that is not a constant (an expression of the engine's state)."""


# -- the spec classes of the interface module ----------------------------------------------------

@dataclasses.dataclass
class _Class:
    name: str
    bases: list[str]
    kw_only: bool
    fields: list[tuple[str, bool]]  # (name, kw_only) in declaration order


def _is_kw_only_decorator(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and any(
        k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords)


def _field_kw_only(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and name_of(value.func) == "field" and _is_kw_only_decorator(value)


def read_classes(tree: ast.Module) -> dict[str, _Class]:
    out: dict[str, _Class] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields = [(s.target.id, _field_kw_only(s.value)) for s in node.body
                  if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                  and "ClassVar" not in ast.unparse(s.annotation)]
        out[node.name] = _Class(node.name, [name_of(b) or "" for b in node.bases],
                                any(_is_kw_only_decorator(d) for d in node.decorator_list), fields)
    return out


def spec_classes(classes: Mapping[str, _Class]) -> dict[str, list[str]]:
    """Spec class name -> its spec ancestors, itself first (``KVCacheSpec`` last)."""
    out: dict[str, list[str]] = {}

    def chain(name: str) -> list[str] | None:
        if name == SPEC_BASE:
            return [SPEC_BASE]
        cls = classes.get(name)
        if cls is None:
            return None
        for base in cls.bases:
            found = chain(base)
            if found is not None:
                return [name, *found]
        return None

    for name in classes:
        found = chain(name)
        if found is not None:
            out[name] = found
    return out


def positional_fields(name: str, classes: Mapping[str, _Class], mro: Mapping[str, list[str]]) -> list[str]:
    """The dataclass's positional fields, in order (bases first; kw-only ones left out)."""
    order: dict[str, bool] = {}
    for cls_name in reversed(mro[name]):
        cls = classes[cls_name]
        for field, kw in cls.fields:
            order[field] = kw or cls.kw_only
    return [f for f, kw in order.items() if not kw]


# -- reading calls --------------------------------------------------------------------------------

def name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def literal_of(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, bool | int | str)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int) and not isinstance(node.operand.value, bool):
        return -node.operand.value
    return NOT_LITERAL


def _annotation_kind(node: ast.expr | None, kinds: Mapping[str, list[str]]) -> str | None:
    """The spec class an annotation names (``AttentionSpec``, ``"MLAAttentionSpec"``)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip()
        return text.rpartition(".")[2] if text.rpartition(".")[2] in kinds else None
    name = name_of(node)
    return name if name in kinds else None


class Scope:
    """What one function (or module) knows: spec-typed names and dict-literal kwargs."""

    def __init__(self, body: list[ast.stmt], kinds: Mapping[str, list[str]], args: ast.arguments | None,
                 owner: str | None) -> None:
        self.types: dict[str, str] = {}
        self.dicts: dict[str, dict[str, ast.expr]] = {}
        self.kind_maps: dict[str, list[tuple[str, str]]] = {}
        """Names bound to a ``{Kind: Kind}`` dict literal (``promotions``)."""
        self.looked_up: dict[str, set[str]] = {}
        """Names bound to an expression that subscripts a name (``promotions[c]``): those names."""
        if owner is not None:
            self.types["self"] = owner
        if args is not None:
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                found = _annotation_kind(a.annotation, kinds)
                if found:
                    self.types[a.arg] = found
        for node in _walk_own(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found = _annotation_kind(node.annotation, kinds)
                if found:
                    self.types[node.target.id] = found
                if node.value is not None:
                    self._bind(node.target.id, node.value, kinds)
            elif isinstance(node, ast.Assign | ast.NamedExpr):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                for t in targets:
                    if not isinstance(t, ast.Name):
                        continue
                    called = name_of(value.func) if isinstance(value, ast.Call) else None
                    if called is not None and called in kinds:
                        self.types.setdefault(t.id, called)
                    kw = _dict_literal(value)
                    if kw is not None:
                        self.dicts[t.id] = kw
                    self._bind(t.id, value, kinds)

    def _bind(self, name: str, value: ast.expr, kinds: Mapping[str, list[str]]) -> None:
        if isinstance(value, ast.Dict) and value.keys and all(
                k is not None and name_of(k) in kinds and name_of(v) in kinds for k, v in zip(value.keys, value.values,
                                                                                                strict=True)):
            self.kind_maps[name] = [(str(name_of(k)), str(name_of(v)))  # type: ignore[arg-type]
                                    for k, v in zip(value.keys, value.values, strict=True)]
        subscripted = {n.value.id for n in ast.walk(value) if isinstance(n, ast.Subscript)
                       and isinstance(n.value, ast.Name)}
        if subscripted:
            self.looked_up[name] = subscripted

    def rebuilds(self, target: ast.expr, source_kind: str | None,
                 kinds: Mapping[str, list[str]]) -> list[tuple[str, str]]:
        """``(source kind, target kind)`` pairs a ``replace_as(spec, target, ...)`` may rebuild."""
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return self.kind_maps.get(target.value.id, [])
        if name_of(target) in kinds:
            return [(source_kind or SPEC_BASE, str(name_of(target)))]
        if isinstance(target, ast.Name):
            return [pair for m in sorted(self.looked_up.get(target.id, ())) for pair in self.kind_maps.get(m, [])]
        return []


def _dict_literal(node: ast.expr) -> dict[str, ast.expr] | None:
    if isinstance(node, ast.Call) and name_of(node.func) == "dict" and not node.args \
            and all(k.arg is not None for k in node.keywords):
        return {str(k.arg): k.value for k in node.keywords}
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
        return {k.value: v for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[union-attr]
    return None


def _walk_own(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of ``body`` outside nested functions and classes."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                stack.append(child)


Found = list[tuple[ast.Call, "ast.FunctionDef | ast.AsyncFunctionDef | None", "str | None", dict[str, str]]]


def _narrowed(test: ast.expr, kinds: Mapping[str, list[str]]) -> dict[str, str]:
    """``{name: kind}`` for each ``isinstance(name, Kind)`` the test requires (alone or in an ``and``),
    and ``{"!name": kind}`` for each ``not isinstance(name, Kind)`` it requires."""
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    out: dict[str, str] = {}
    for t in tests:
        prefix = ""
        if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
            prefix, t = "!", t.operand
        if isinstance(t, ast.Call) and name_of(t.func) == "isinstance" and len(t.args) == 2 \
                and isinstance(t.args[0], ast.Name) and name_of(t.args[1]) in kinds:
            out[prefix + t.args[0].id] = str(name_of(t.args[1]))
    return out


def find_calls(node: ast.AST, fn: ast.FunctionDef | ast.AsyncFunctionDef | None, owner: str | None,
           wanted: set[str], out: Found, lines: list[int], narrow: dict[str, str],
           kinds: Mapping[str, list[str]]) -> None:
    """Every call of a name in ``wanted`` under ``node``, with its enclosing function, for a method
    its class's name, and the names an enclosing ``if isinstance(...)`` narrows to a spec class
    (one walk of the tree, skipping what spans none of ``lines``)."""
    for child in ast.iter_child_nodes(node):
        low, high = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
        if low is not None and high is not None:
            at = bisect.bisect_left(lines, low)
            if at == len(lines) or lines[at] > high:
                continue
        if isinstance(child, ast.ClassDef):
            for item in child.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    find_calls(item, item, child.name, wanted, out, lines, {}, kinds)
                else:
                    find_calls(item, fn, owner, wanted, out, lines, narrow, kinds)
            continue
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            find_calls(child, child, None, wanted, out, lines, {}, kinds)
            continue
        if isinstance(child, ast.If):
            find_calls(child.test, fn, owner, wanted, out, lines, narrow, kinds)
            inner = {**narrow, **_narrowed(child.test, kinds)}
            for stmt in child.body:
                _visit_one(stmt, fn, owner, wanted, out, lines, inner, kinds)
            for stmt in child.orelse:
                _visit_one(stmt, fn, owner, wanted, out, lines, narrow, kinds)
            continue
        if isinstance(child, ast.Call) and name_of(child.func) in wanted:
            out.append((child, fn, owner, narrow))
        find_calls(child, fn, owner, wanted, out, lines, narrow, kinds)


def _visit_one(stmt: ast.stmt, fn: ast.FunctionDef | ast.AsyncFunctionDef | None, owner: str | None,
               wanted: set[str], out: Found, lines: list[int], narrow: dict[str, str],
               kinds: Mapping[str, list[str]]) -> None:
    """:func:`find_calls` on ``stmt`` itself (not only its children)."""
    holder = ast.Module(body=[stmt], type_ignores=[])
    find_calls(holder, fn, owner, wanted, out, lines, narrow, kinds)


def keywords_of(node: ast.Call, scope: Scope) -> tuple[list[tuple[str, ast.expr]], bool]:
    """``(keyword, value)`` of a call, ``**dict`` resolved; and whether some argument could not be
    read (a ``**spread`` or ``*args`` of unknown content)."""
    out: list[tuple[str, ast.expr]] = []
    opaque = any(isinstance(a, ast.Starred) for a in node.args)
    for k in node.keywords:
        if k.arg is not None:
            out.append((k.arg, k.value))
            continue
        spread = scope.dicts.get(k.value.id) if isinstance(k.value, ast.Name) else _dict_literal(k.value)
        if spread is None:
            opaque = True
            continue
        out += list(spread.items())
    return out, opaque
