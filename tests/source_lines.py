"""Where a test file's own lines are: the GPU tests of Python-line attribution compare what
gpuprofile reports with 'file:line' of lines marked by a trailing comment."""


def line_of(path: str, marker: str) -> str:
    """'path:line' of the line of `path` that ends with the comment `# marker`."""
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return f"{path}:{n}"
    raise AssertionError(f"no line of {path} ends with '# {marker}'")
