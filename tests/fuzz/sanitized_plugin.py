"""A pytest plugin (`-p tests.fuzz.sanitized_plugin`, given by sanitized.run_pytest): the
sanitized core in place of the package's, before any test imports it."""

from __future__ import annotations

import importlib.util
import os
import sys

from tests.fuzz.sanitized import ENV_MODULE

if os.environ.get(ENV_MODULE):
    spec = importlib.util.spec_from_file_location("ioobserve._core", os.environ[ENV_MODULE])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["ioobserve._core"] = module
    import ioobserve

    ioobserve._core = module
