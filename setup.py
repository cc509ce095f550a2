"""Only the C extension lives here; everything else is in pyproject.toml.

protocol/_validate.c is the produce validator's record walk.  ``optional=True``: without a C
compiler the install still succeeds and protocol/validation.py walks the records in Python.

One setuptools message is silenced: an editable install of a package whose folders are mapped
(pyproject.toml, package-dir) always goes through a meta path finder, and setuptools then says
"Editable installation ... be careful with folders in your working directory with the same name
as your package".  Here those folders are the package itself, on purpose: the message has nothing
to act on.  Any other warning still shows (tests/unit/test_packaging.py builds and checks).
"""

import warnings

from setuptools import Extension, setup

warnings.filterwarnings("ignore", message=r"Editable installation\.")

setup(ext_modules=[Extension("minikafka.protocol._validate", ["protocol/_validate.c"], optional=True)])
