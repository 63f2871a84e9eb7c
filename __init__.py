"""kvcontract: the KV-cache spec merge contract, its reference model and conformance kit.

This file is the ``kvcontract`` package itself (package-dir maps it to the
repository root); the subpackages are the top-level folders ``spec``,
``reference``, ``conformance`` and ``kernels``.
"""

__version__ = "0.2.0"
