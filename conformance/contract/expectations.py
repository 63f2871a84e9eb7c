"""What an oracle expects of the engine when it finds a violation: the catalogue of
structured repros.

Each expectation is a small frozen record an oracle puts in its
:class:`~kvcontract.conformance.contract.model.Violation` (what the engine must do on the
example: reject a call, answer it, return the contract's spec, keep its inputs, group or
route as the reference does) and renders its own check lines in the snippet's vocabulary
(:mod:`kvcontract.conformance.contract.repro`): while the engine still misbehaves they end
in ``VIOLATION of <CLAUSE>: ...``, else they print a ``no violation`` line.
"""

from __future__ import annotations

import dataclasses

from kvcontract.conformance.contract.repro import (
    GROUP_SETUP,
    Call,
    Context,
    Expectation,
    MergeOf,
    Subject,
    bind,
    esc,
    label_of,
)
from kvcontract.conformance.engines.protocol import engine_ref
from kvcontract.reference import KVCacheSpec, Routing

# -- any chapter ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Accepted(Expectation):
    """The call must be rejected (raise); the engine accepted ``inputs``."""

    call: Call
    inputs: str = "its inputs"

    def lines(self, ctx: Context) -> list[str]:
        return ["try:", f"    result = {self.call.source()}", "except Exception as exc:",
                "    print('no violation: rejected with', type(exc).__name__, exc)", "else:",
                "    " + ctx.fail(f"f'{esc(self.call.label)} accepted {esc(self.inputs)}: "
                                  f"{{{self.call.show('result')}}}'")]


@dataclasses.dataclass(frozen=True)
class Raised(Expectation):
    """The call must answer (``error`` None), or raise ``error`` (a builtin exception's
    name) and nothing else; with ``error``, accepting ``inputs`` is a violation too."""

    call: Call
    error: str | None = None
    inputs: str = "its inputs"

    def lines(self, ctx: Context) -> list[str]:
        label = esc(self.call.label)
        raised = f"f'{label} raised {{type(exc).__name__}}: {{exc}}"
        if self.error is None:
            return ["try:", f"    result = {self.call.source()}", "except Exception as exc:",
                    "    " + ctx.fail(f"{raised} (the contract says {esc(self.call.promise)})'"),
                    f"print('no violation:', {self.call.show('result')})"]
        return ["try:", f"    result = {self.call.source()}", f"except {self.error} as exc:",
                "    print('no violation:', type(exc).__name__, exc)", "except Exception as exc:",
                "    " + ctx.fail(f"{raised} (contract: {self.error})'"), "else:",
                "    " + ctx.fail(f"f'{label} accepted {esc(self.inputs)}: {{{self.call.show('result')}}}'")]


@dataclasses.dataclass(frozen=True)
class Invalid(Expectation):
    """The call's result is no valid spec (SPEC-VALID-1, judged by the kit's reading of it):
    the snippet shows the result and reports ``detail``."""

    call: Call
    detail: str

    def lines(self, ctx: Context) -> list[str]:
        return [f"result = {self.call.source()}", f"print({self.call.label + ' returned'!r}, "
                f"{self.call.show('result')})",
                ctx.fail(repr(f"{self.call.label} returned an invalid spec: {self.detail}"))]


@dataclasses.dataclass(frozen=True)
class FieldsDiffer(Expectation):
    """``subject`` must equal ``expected`` (the contract's spec, or another merge's
    result) in kind and in the named ``fields``."""

    subject: Subject
    expected: KVCacheSpec | MergeOf
    fields: tuple[str, ...] = ()

    def lines(self, ctx: Context) -> list[str]:
        want = self.expected.source() if isinstance(self.expected, MergeOf) else ctx.spec(self.expected)
        label = esc(label_of(self.subject))
        names = [n for n in self.fields if n != "kind"]
        return bind(self.subject, [
            f"expected = {want}",
            "if type(got).__name__ != type(expected).__name__:",
            "    " + ctx.fail(f"f'{label} gave {{type(got).__name__}} (contract: {{type(expected).__name__}})'"),
            f"bad = [n for n in {names!r} if getattr(got, n) != getattr(expected, n)]",
            "if bad:",
            "    " + ctx.fail(f"f'{label} gave {{type(got).__name__}} with ' + ', '.join("
                              "f'{n}={getattr(got, n)!r} (contract: {getattr(expected, n)!r})' for n in bad)"),
            f"print('no violation: {label} as the contract requires')"])


@dataclasses.dataclass(frozen=True)
class Page(Expectation):
    """``subject``'s page size (by the engine's own rule) must be ``page``, reached with
    ``block_size`` where given."""

    subject: Subject
    page: int
    block_size: int | None = None

    def lines(self, ctx: Context) -> list[str]:
        if self.block_size is None:
            test = f"page != {self.page}"
            say = f"f'page {{page}} != {self.page}'"
        else:
            test = f"(got.block_size, page) != ({self.block_size}, {self.page})"
            say = (f"f'block_size {{got.block_size}}, page {{page}} "
                   f"(contract: {self.block_size}, {self.page})'")
        return bind(self.subject, [f"page = {ctx.page('got')}", f"if {test}:", "    " + ctx.fail(say),
                                    "print('no violation: page', page)"])


@dataclasses.dataclass(frozen=True)
class Mutated(Expectation):
    """``merge`` must leave its inputs as they were."""

    def lines(self, ctx: Context) -> list[str]:
        return ["import copy", "before = copy.deepcopy([vars(s) for s in specs])", "merged = _merge(specs)",
                "if [vars(s) for s in specs] != before:", "    " + ctx.fail("'merge changed its inputs'"),
                "print('no violation')"]


@dataclasses.dataclass(frozen=True)
class Aliased(Expectation):
    """``merge`` must return a new object, none of its inputs."""

    def lines(self, ctx: Context) -> list[str]:
        return ["merged = _merge(specs)", "if any(merged is s for s in specs):",
                "    " + ctx.fail("'merge returned an input object'"), "print('no violation')"]


@dataclasses.dataclass(frozen=True)
class Message(Expectation):
    """The call's error message must name each wanted item: ``(name, forms)``, one of
    whose spellings must appear. A call that does not raise is not this finding."""

    call: Call
    wanted: tuple[tuple[str, tuple[str, ...]], ...]

    def lines(self, ctx: Context) -> list[str]:
        return ["try:", f"    {self.call.source()}", "except Exception as exc:",
                f"    missing = [w for w, forms in {self.wanted!r} if not any(f in str(exc) for f in forms)]",
                "    if missing:", "        " + ctx.fail("f'message omits {missing}: {exc}'"),
                "    print('no violation:', exc)", "else:",
                f"    print('no violation: {esc(self.call.label)} raised nothing')"]


@dataclasses.dataclass(frozen=True)
class Answer(Expectation):
    """The call must answer ``want`` (the very object with ``identical``)."""

    call: Call
    want: bool
    identical: bool = False

    def lines(self, ctx: Context) -> list[str]:
        test = f"got is not {self.want!r}" if self.identical else f"got != {self.want!r}"
        return [f"got = {self.call.source()}", f"if {test}:",
                "    " + ctx.fail(f"f'{esc(self.call.label)} answered {{got!r}}, contract: {self.want!r}'"),
                "print('no violation:', got)"]


# -- grouping --------------------------------------------------------------------------


class _Grouped(Expectation):
    """An expectation over the engine's groups (``pairs``: ``[(layer_names, spec), ...]``)."""

    @property
    def uses_table(self) -> bool:
        return True

    def lines(self, ctx: Context) -> list[str]:
        return [*GROUP_SETUP, *self.body(ctx), "print('no violation')"]

    def body(self, ctx: Context) -> list[str]:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class LayerPartition(_Grouped):
    """Every layer in exactly one group."""

    def body(self, ctx: Context) -> list[str]:
        return ["names = sorted(n for names, _ in pairs for n in names)", "if names != sorted(table):",
                "    " + ctx.fail("f'{names} vs {sorted(table)}'")]


@dataclasses.dataclass(frozen=True)
class GroupUnion(_Grouped):
    """Each group's spec sets the capability ``field`` when any member does."""

    field: str

    def body(self, ctx: Context) -> list[str]:
        f = self.field
        return ["for names, spec in pairs:",
                "    if spec is None or hasattr(spec, 'kv_cache_specs'):",
                "        continue  # per-member specs carry each member's own flag",
                f"    need = any(getattr(table[n], {f!r}, False) for n in names)",
                f"    have = getattr(spec, {f!r})", "    if have != need:",
                "        " + ctx.fail(f"f'group {{names}} has {f}={{have}}, members need {{need}}'")]


@dataclasses.dataclass(frozen=True)
class MemberSpecs(_Grouped):
    """A group's per-member specs are the layers' own: ``changed`` lists, per layer,
    the fields the engine changed."""

    changed: tuple[tuple[str, tuple[str, ...]], ...]

    def body(self, ctx: Context) -> list[str]:
        return [f"changed_fields = {dict(self.changed)!r}  # layer -> fields changed",
                "for layer, names in changed_fields.items():",
                "    member = next((s.kv_cache_specs[layer] for _, s in pairs",
                "                   if layer in (getattr(s, 'kv_cache_specs', None) or {})), None)",
                "    if member is None:",
                "        continue  # no per-member spec of that layer any more",
                "    changed = [f for f in names if (type(member) is not type(table[layer]) if f == 'kind'",
                "                                    else getattr(member, f) != getattr(table[layer], f))]",
                "    if changed:",
                "        " + ctx.fail("f'the per-member spec of {layer} changed {changed}'")]


@dataclasses.dataclass(frozen=True)
class SharedGroup(_Grouped):
    """The incompatible layers ``names`` must not share one merged spec (a per-member
    container is allowed)."""

    names: tuple[str, ...]
    detail: str

    def body(self, ctx: Context) -> list[str]:
        return ["# one merged spec for the layers (a per-member container is allowed)",
                f"if any(set(n) == set({self.names!r}) and not hasattr(s, 'kv_cache_specs') for n, s in pairs):",
                "    " + ctx.fail(repr(self.detail))]


@dataclasses.dataclass(frozen=True)
class MixedBlockSizes(_Grouped):
    """Every member of a group has one block size."""

    def body(self, ctx: Context) -> list[str]:
        return ["for names, spec in pairs:",
                "    members = getattr(spec, 'kv_cache_specs', None) or {}",
                "    sizes = sorted({getattr(members.get(n, spec), 'block_size', None) for n in names})",
                "    if len(sizes) > 1:",
                "        " + ctx.fail("f'group {list(names)} mixes block sizes {sizes}'")]


@dataclasses.dataclass(frozen=True)
class MixedAllocation(_Grouped):
    """The members of a group agree in the allocation ``field``."""

    field: str

    def body(self, ctx: Context) -> list[str]:
        return ["for names, spec in pairs:", f"    vals = {{repr(getattr(table[n], {self.field!r})) for n in names}}",
                "    if len(vals) > 1:",
                "        " + ctx.fail(f"f'group {{names}} mixes {self.field} {{vals}}'")]


@dataclasses.dataclass(frozen=True)
class UnequalPages(_Grouped):
    """Every group has one page size (by the engine's own rule)."""

    def body(self, ctx: Context) -> list[str]:
        return [f"pages = {{{ctx.page('spec')} for _, spec in pairs if spec is not None}}",
                "if len(pages) > 1:", "    " + ctx.fail("f'{pages}'")]


@dataclasses.dataclass(frozen=True)
class OneGroup(_Grouped):
    """Layers whose specs all merge share one group."""

    def body(self, ctx: Context) -> list[str]:
        return ["if len(pairs) != 1:", "    " + ctx.fail("f'{len(pairs)} groups'")]


# -- dispatch --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Routed(Expectation):
    """``request`` must route as ``want`` (decodes, prefills, decode tokens, prefill tokens)."""

    want: Routing
    what: str = "routing"

    def lines(self, ctx: Context) -> list[str]:
        want = self.want.as_tuple()
        return ["routing = ROUTE(request)", f"if routing.as_tuple() != {want!r}:",
                "    " + ctx.fail(f"f'{esc(self.what)} got {{routing.as_tuple()}} (decodes, prefills, decode "
                                  f"tokens, prefill tokens), contract: {want}'"),
                "print('no violation:', routing.as_tuple())"]


@dataclasses.dataclass(frozen=True)
class CapabilityNeutral(Expectation):
    """A causal ``request`` routes the same with and without the capability."""

    def lines(self, ctx: Context) -> list[str]:
        return ["import dataclasses", "def _outcome(r):", "    try:", "        return ROUTE(r).as_tuple()",
                "    except Exception as exc:", "        return f'{type(exc).__name__}: {exc}'",
                "plain = _outcome(dataclasses.replace(request, capability=False, backend_non_causal=False))",
                "marked = _outcome(dataclasses.replace(request, capability=True, backend_non_causal=True))",
                "if plain != marked:",
                "    " + ctx.fail("f'causal routing {plain} without the capability, {marked} with it'"),
                "print('no violation:', plain)"]


@dataclasses.dataclass(frozen=True)
class RoutingPartition(Expectation):
    """The routing splits the requests and their tokens, decode requests first."""

    def lines(self, ctx: Context) -> list[str]:
        return ["routing = ROUTE(request)", "lens = request.query_lens", "d = routing.num_decodes",
                "if d + routing.num_prefills != len(lens) or routing.num_decode_tokens + "
                "routing.num_prefill_tokens != sum(lens) or routing.num_decode_tokens != sum(lens[:d]):",
                "    " + ctx.fail("f'{routing.as_tuple()} for query lengths {list(lens)}'"),
                "print('no violation:', routing.as_tuple())"]


@dataclasses.dataclass(frozen=True)
class DecodeRows(Expectation):
    """The decode requests have at most ``limit`` rows and at most ``lengths`` distinct lengths."""

    limit: int
    lengths: int

    def lines(self, ctx: Context) -> list[str]:
        return ["routing = ROUTE(request)", "decoded = request.query_lens[:max(0, routing.num_decodes)]",
                f"if [n for n in decoded if n > {self.limit}] or len({{n for n in decoded if n}}) > {self.lengths}:",
                "    " + ctx.fail(f"f'decode requests of lengths {{list(decoded)}} (threshold {self.limit})'"),
                "print('no violation:', routing.as_tuple())"]


# -- the engine's surface (ROLE-COVER-1) -----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Unclassified(Expectation):
    """The engine's kind or field ``name`` must be classified by the contract."""

    name: str

    def lines(self, ctx: Context) -> list[str]:
        return ["from kvcontract.conformance.engines.registry import resolve_engine",
                "from kvcontract.conformance.contract.surface import unclassified",
                f"names = [u.name for u in unclassified(resolve_engine({engine_ref(ctx.engine)!r}))]",
                f"if {self.name!r} in names:", "    " + ctx.fail(repr(f"{self.name} is not classified")),
                "print('no violation')"]


@dataclasses.dataclass(frozen=True)
class RoleFree(Expectation):
    """The unclassified class ``class_name`` keeps every field through merge; judged
    again by ``oracle`` (``module:function``, the law's own check)."""

    class_name: str
    oracle: str

    def lines(self, ctx: Context) -> list[str]:
        module, _, function = self.oracle.partition(":")
        return [f"from {module} import {function} as _oracle",
                "from kvcontract.conformance.contract.model import Example, Violation",
                "from kvcontract.conformance.engines.registry import resolve_engine", "try:",
                f"    _oracle(resolve_engine({engine_ref(ctx.engine)!r}), Example(field={self.class_name!r}, cut=1))",
                "except Violation as v:", "    " + ctx.fail("f'{v}'"), "print('no violation')"]


@dataclasses.dataclass(frozen=True)
class DeclaredRule(Expectation):
    """A field the adapter declares (``FieldRole``) must be merged by its role: ``rule`` ``keep``
    (merge of one member keeps each of ``values``), ``agree`` (members differing only in it are
    refused: layout, allocation) or ``union`` (their merge holds the truthy value: capability,
    any-annotation). The members are ``specs[0]`` in the engine's own class with the field set."""

    field: str
    values: tuple[object, ...]
    rule: str

    def lines(self, ctx: Context) -> list[str]:
        head = ["import dataclasses", f"values = {self.values!r}",
                f"members = [dataclasses.replace(specs[0], **{{{self.field!r}: v}}) for v in values]"]
        if self.rule == "keep":
            return [*head, "for m, v in zip(members, values):", f"    kept = getattr(_merge([m]), {self.field!r})",
                    "    if kept != v:", "        " + ctx.fail(f"f'merge of one member with {self.field}={{v!r}} "
                                                                f"returned {self.field}={{kept!r}}'"),
                    "print('no violation')"]
        if self.rule == "agree":
            return [*head, "try:", "    merged = _merge(members)", "except Exception as exc:",
                    "    print('no violation: rejected with', type(exc).__name__, exc)", "else:",
                    "    " + ctx.fail(f"f'members differing only in {self.field} ({{values}}) were merged into "
                                      f"{self.field}={{merged.{self.field}!r}}'")]
        return [*head, f"merged = getattr(_merge(members), {self.field!r})", "if merged != any(values):",
                "    " + ctx.fail(f"f'merge of {self.field}={{values}} gave {{merged!r}}, not their union'"),
                "print('no violation')"]
