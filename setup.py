"""The compiled parts of cvdiag: the fold of the tests pass (``cvdiag/read/_cfold.c``)
and the envelope of the emit path (``cvdiag/write/_cemit.c``).

Optional: without a C compiler the install goes on, the CLI reads at Python speed
and says so on big inputs, and the middleware writes the same lines in Python.
Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cvdiag.read._cfold", ["cvdiag/read/_cfold.c"], optional=True, extra_compile_args=["-O2"]),
        Extension("cvdiag.write._cemit", ["cvdiag/write/_cemit.c"], optional=True, extra_compile_args=["-O2"]),
    ]
)
