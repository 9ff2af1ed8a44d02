"""What gpuprofile.profile() records: the one definition of its options, shared by
gpuprofile.profile(), the Profile class, `gpuprofile run` and the IPython magic. Light on purpose
(no NumPy): `import gpuprofile` reads it to give gp.profile its signature."""

from __future__ import annotations

import dataclasses
import inspect
import textwrap

# The options, in profile()'s order, with the sentence each contributes to its help.
HELP = {
    "kernels": "record each kernel with its timing and launch details",
    "memcpy": "record each memory copy",
    "memset": "record each memory set",
    "memory": "record device allocations and frees (p.memory timeline, region peaks)",
    "regions": "attribute each kernel, copy and set to the innermost gpuprofile region open at "
               "launch",
    "stream_attribution": "also attribute work that other threads enqueue on a region's stream "
                          "while it is open (autograd's backward), by the order of CUDA calls on "
                          "that stream (docs/tracing.md); False keeps only the launching thread's "
                          "rule",
    "python_stacks": 'True or "line" notes the user\'s Python line that launched each kernel, copy '
                     'and set (p.by_line(), python_line columns), "stack" the whole Python stack '
                     "too (p.export_collapsed_stacks())",
    "region_clock": '"cupti" (default): regions entered while the profile runs record no CUDA '
                    "events; their GPU time is the span of the traced work attributed to them "
                    "(and to the regions inside them), filled in when the profile stops "
                    '(docs/tracing.md); "events" keeps the two events per region',
}


@dataclasses.dataclass(frozen=True)
class ProfileOptions:
    """profile()'s options, checked: TypeError for a flag that is not a bool, ValueError for an
    unknown python_stacks mode or when nothing would be recorded. python_stacks is normalized to
    None, "line" or "stack"."""

    kernels: bool = True
    memcpy: bool = True
    memset: bool = True
    memory: bool = True
    regions: bool = True
    stream_attribution: bool = True
    python_stacks: bool | str | None = False
    region_clock: str = "cupti"

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name not in _NOT_FLAGS and not isinstance(value, bool):
                raise TypeError(f"profile({field.name}=...) must be True or False, got {value!r}")
        object.__setattr__(self, "python_stacks", stacks_mode(self.python_stacks))
        if not isinstance(self.region_clock, str) or self.region_clock not in REGION_CLOCKS:
            raise ValueError(f"region_clock must be one of {REGION_CLOCKS}, got "
                             f"{self.region_clock!r}")
        if not (self.kernels or self.memcpy or self.memset or self.memory):
            raise ValueError("profile(): nothing to record (kernels, memcpy, memset and memory "
                             "are all False)")

    @property
    def kinds(self) -> list:
        """The flags that are on, by name (what a Profile's repr and to_dict() list)."""
        return [f.name for f in dataclasses.fields(self)
                if f.name not in _NOT_FLAGS and getattr(self, f.name)]

    @classmethod
    def of(cls, *args, **kwargs) -> ProfileOptions:
        """From profile()'s arguments, or one ProfileOptions passed through."""
        if len(args) == 1 and not kwargs and isinstance(args[0], cls):
            return args[0]
        return cls(*args, **kwargs)


_NOT_FLAGS = ("python_stacks", "region_clock")
REGION_CLOCKS = ("cupti", "events")


def stacks_mode(python_stacks) -> str | None:
    """None, "line" or "stack" from profile(python_stacks=...); ValueError naming the choices."""
    if python_stacks is None or python_stacks is False:
        return None
    if python_stacks is True or python_stacks in ("line", "stack"):
        return "stack" if python_stacks == "stack" else "line"
    raise ValueError(f"python_stacks must be False, True, 'line' or 'stack', got "
                     f"{python_stacks!r}")


# profile()'s signature and help, from the dataclass (inspect.signature(gp.profile) shows them).
SIGNATURE = inspect.Signature(
    [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default)
     for f in dataclasses.fields(ProfileOptions)], return_annotation="Profile")
OPTIONS_HELP = textwrap.fill("; ".join(f"{name}: {text}" for name, text in HELP.items()), 92,
                             subsequent_indent="    ")
