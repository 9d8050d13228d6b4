"""Example downstream package: sums of any array-like object through dlpackarray's C API."""

from dlpa_sum._sum import describe, total

__all__ = ["describe", "total"]
