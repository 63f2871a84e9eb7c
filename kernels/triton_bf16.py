"""bfloat16 arithmetic for Triton's interpreter, so vLLM's kernels run bfloat16 storage on the CPU.

Triton's interpreter stores bfloat16 as raw ``uint16`` bits and applies numpy
to those integers: elementwise products, sums, comparisons and ``tl.dot`` on
bfloat16 operands compute on bit patterns (loads, stores, ``where`` and
casts to and from float32 are bitwise-correct). :func:`bfloat16_interpreter`
patches the interpreter's builder for the duration of a call so that every
floating operation whose operand is bfloat16 widens the bits to float32
exactly, computes in float32, and rounds a bfloat16 result back to nearest
even, as a GPU does for a bfloat16 instruction:

* elementwise ``+ - * /``, ``min``/``max``, comparisons and unary math:
  computed in float32, the result rounded to bfloat16 (comparisons give
  booleans);
* ``tl.dot`` of bfloat16 operands: float32 products summed into the float32
  accumulator (tensor cores);
* float32 to bfloat16 conversions (``.to``, stores): round to nearest even
  (the interpreter truncates);
* ``tl.sum`` of a bfloat16 tensor: a pairwise tree whose partial sums are
  rounded to bfloat16 (what compiled code does; NUM-ACCUM-1), and ``tl.max``
  / ``tl.min`` on the values, not the bits.

With ``sixteen_bit_sums=True`` float16 ``tl.sum`` is also done as such a
rounded tree (numpy accumulates float16 in float32, which under-reports a
GPU's ``add.f16`` reduction). What is not emulated: fused multiply-adds the
compiler may form, and the exact order of a GPU's tree; the emulation is
an engine's arithmetic class, not its bits.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["bfloat16_interpreter", "bits_to_float32", "float32_to_bits"]

_LOCK = threading.Lock()


def bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) to float32, exactly."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def float32_to_bits(values: np.ndarray) -> np.ndarray:
    """float32 to bfloat16 bit patterns, round to nearest even; NaN stays NaN."""
    source = np.asarray(values, dtype=np.float32)
    bits = source.view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(source)
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def _rounded_tree_sum(data: np.ndarray, axis: int, keepdims: bool, to16: Any, from16: Any) -> np.ndarray:
    """Pairwise sum over ``axis`` with every partial sum rounded to 16 bits (values as float32)."""
    x = np.moveaxis(np.asarray(data, dtype=np.float32), axis, -1)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), dtype=np.float32)], axis=-1)
        x = from16(to16(x[..., 0::2] + x[..., 1::2]))
    out = x[..., 0] if x.shape[-1] == 1 else np.zeros(x.shape[:-1], dtype=np.float32)
    return np.expand_dims(out, axis) if keepdims else out


@contextlib.contextmanager
def bfloat16_interpreter(*, sixteen_bit_sums: bool = False) -> Iterator[None]:
    """Make Triton's interpreter compute bfloat16 (and optionally float16 sums) as a GPU does."""
    from triton import language as tl
    from triton.runtime import interpreter as ti

    builder_cls, reduce_cls = ti.InterpreterBuilder, ti.ReduceOps
    handle = ti.TensorHandle
    saved = {
        "binary_op": builder_cls.binary_op,
        "unary_op": builder_cls.unary_op,
        "create_dot": builder_cls.create_dot,
        "sum": reduce_cls.sum,
        "min_max": reduce_cls.min_max,
        "cast_impl": builder_cls.cast_impl,
    }

    def is_bf16(h: Any) -> bool:
        return bool(getattr(getattr(h, "dtype", None), "scalar", None) == tl.bfloat16)

    def widen(h: Any) -> np.ndarray:
        return bits_to_float32(h.data) if is_bf16(h) else h.data

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return saved["binary_op"](self, lhs, rhs, op)
        result = op(widen(lhs), widen(rhs))
        if result.dtype == np.bool_:
            return handle(result, tl.int1)
        return handle(float32_to_bits(result.astype(np.float32)), tl.bfloat16)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if not is_bf16(arg):
            return saved["unary_op"](self, arg, op)
        return handle(float32_to_bits(op(widen(arg)).astype(np.float32)), tl.bfloat16)

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_imprecise: Any) -> Any:
        if not (is_bf16(a) or is_bf16(b)):
            return saved["create_dot"](self, a, b, d, input_precision, max_imprecise)
        product = np.matmul(widen(a), widen(b), dtype=np.float32)
        if is_bf16(d):
            return handle(float32_to_bits(product + widen(d)), tl.bfloat16)
        return handle((product + d.data).astype(d.data.dtype), d.dtype.scalar)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        # The interpreter truncates float32 to bfloat16; a GPU rounds to nearest even.
        if dst_type.scalar == tl.bfloat16 and src.dtype.scalar == tl.float32:
            return handle(float32_to_bits(src.data), tl.bfloat16)
        return saved["cast_impl"](self, src, dst_type)

    def reduce_sum(self: Any, input: Any) -> Any:
        dtype = input.dtype.scalar
        if dtype == tl.bfloat16:
            total = _rounded_tree_sum(
                bits_to_float32(input.handle.data), self.axis, self.keep_dims,
                float32_to_bits, bits_to_float32,
            )
            return self.to_tensor(float32_to_bits(total), input.dtype)
        if dtype == tl.float16 and sixteen_bit_sums:
            total = _rounded_tree_sum(
                input.handle.data, self.axis, self.keep_dims,
                lambda x: x.astype(np.float16), lambda x: x.astype(np.float32),
            )
            return self.to_tensor(total.astype(np.float16), input.dtype)
        return saved["sum"](self, input)

    def min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        value = input[0] if isinstance(input, tuple) else input
        if value.dtype.scalar != tl.bfloat16:
            return saved["min_max"](self, input, val_reduce_op, idx_reduce_op)
        data = bits_to_float32(value.handle.data)
        val = idx = None
        if val_reduce_op:
            reduced = val_reduce_op(data, axis=self.axis, keepdims=self.keep_dims)
            val = self.to_tensor(float32_to_bits(np.asarray(reduced)), value.dtype)
        if idx_reduce_op:
            idx = self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    with _LOCK:
        builder_cls.binary_op = binary_op
        builder_cls.unary_op = unary_op
        builder_cls.create_dot = create_dot
        builder_cls.cast_impl = cast_impl
        reduce_cls.sum = reduce_sum
        reduce_cls.min_max = min_max
        try:
            yield
        finally:
            builder_cls.binary_op = saved["binary_op"]
            builder_cls.unary_op = saved["unary_op"]
            builder_cls.create_dot = saved["create_dot"]
            builder_cls.cast_impl = saved["cast_impl"]
            reduce_cls.sum = saved["sum"]
            reduce_cls.min_max = saved["min_max"]
