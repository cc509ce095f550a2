"""Only the C extension lives here; everything else is in pyproject.toml.

protocol/_validate.c is the produce validator's record walk.  ``optional=True``: without a C
compiler the install still succeeds and protocol/validation.py walks the records in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("minikafka.protocol._validate", ["protocol/_validate.c"], optional=True)])
