"""The compiled part of cvdiag: the fold of the tests pass (``cvdiag/read/_cfold.c``).

Optional: without a C compiler the install goes on, and the CLI reads at Python speed
and says so on big inputs. Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cvdiag.read._cfold", ["cvdiag/read/_cfold.c"], optional=True, extra_compile_args=["-O2"]),
    ]
)
