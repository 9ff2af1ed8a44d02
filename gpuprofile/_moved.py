"""Old module paths of moved modules, kept importable: `import gpuprofile.profiling` (documented
in older docs and used by existing scripts) gives the module that now lives at
gpuprofile.tracing.profile, the same object, so patching one patches the other.

A finder instead of stub files at the old paths: a stub would be a second module (patches miss),
and deleting the old files keeps git's rename detection for branches that still edit them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# old path -> new path (both under gpuprofile)
MOVED = {
    "_records": "regions",
    "_bench_result": "bench.result",
    "_bench_cupti": "bench.cupti",
    "streams": "bench.streams",
    "profiling": "tracing.profile",
    "_activity": "tracing.activity",
    "_attribution": "tracing.attribution",
    "memory": "tracing.memory",
    "_profile_summary": "tracing.summary",
    "trace": "tracing.chrome_trace",
    "occupancy": "tracing.occupancy",
    "_metrics_result": "counters.result",
    "_catalog": "counters.catalog",
    "metric_sets": "counters.metric_sets",
    "pcsampling": "counters.stalls",
    "pmsampling": "counters.sample",
    "roofline": "counters.roofline",
    "_verdicts": "counters.verdicts",
    "_attention_ref": "kernels.reference",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, package: str):
        self.package = package
        self._specs = {}  # alias name -> the target's own spec, between create and exec

    def find_spec(self, fullname, path=None, target=None):
        head, _, old = fullname.rpartition(".")
        if head != self.package or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        old = spec.name.rpartition(".")[2]
        module = importlib.import_module(f"{self.package}.{MOVED[old]}")
        self._specs[spec.name] = module.__spec__  # the import system sets the alias spec next
        return module

    def exec_module(self, module):
        # The module already ran under its own name; keep its own spec (reload, pickling).
        module.__spec__ = self._specs.pop(module.__spec__.name)


def install(package: str) -> None:
    if not any(isinstance(f, _Alias) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(_Alias(package))
