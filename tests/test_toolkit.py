"""gpuprofile.toolkit: the public building blocks benchmark scripts use (exact values)."""

import gpuprofile.toolkit as toolkit
from gpuprofile import _format, _stats


def test_the_toolkit_is_the_functions_the_reports_use():
    assert toolkit.text_table is _format.text_table
    assert toolkit.median_ci is _stats.median_ci and toolkit.rel_half_width is _stats.rel_half_width
    assert sorted(toolkit.__all__) == ["median_ci", "rel_half_width", "text_table"]
    assert toolkit.rel_half_width(9.0, 11.0, 10.0) == 0.1
