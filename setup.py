"""The compiled parts of cvdiag: the fold of the tests pass (``cvdiag/read/_cfold.c``)
and the envelope of the emit path (``cvdiag/write/_cemit.c``).

Optional: without a C compiler the install goes on, the CLI reads at Python speed
and says so on big inputs, and the middleware writes the same lines in Python.
Everything else is in pyproject.toml.
"""

import hashlib
import os
import shlex

from setuptools import Extension, setup

# CI's sanitizer and no-SSE2 builds add their flags here (tools/ci_compiled.sh).
_EXTRA = shlex.split(os.environ.get("CVDIAG_CFLAGS", ""))


def _extension(name: str, source: str) -> Extension:
    """A compiled part, its source's hash built in: ``cvdiag.contract.compiled`` refuses a
    module whose ``.c`` has changed since (``SOURCE_HASH``, the same digest as ``source_hash``)."""
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return Extension(
        name,
        [source],
        optional=True,
        extra_compile_args=["-O2", *_EXTRA],
        extra_link_args=_EXTRA,
        define_macros=[("CVDIAG_SOURCE_HASH", f'"{digest}"')],
    )


setup(
    ext_modules=[
        _extension("cvdiag.read._cfold", "cvdiag/read/_cfold.c"),
        _extension("cvdiag.write._cemit", "cvdiag/write/_cemit.c"),
    ]
)
