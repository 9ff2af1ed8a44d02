# SPDX-License-Identifier: Apache-2.0
# The one place the version is written: pyproject.toml reads it (setuptools' dynamic version).
__version__ = "0.1.0"
