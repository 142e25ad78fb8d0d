"""Exceptions of the data layer.

Every error raised for bad input or missing files is one of these, with a
one-line message meant to be shown to the user as is (no traceback needed).
"""

from __future__ import annotations


class DataError(Exception):
    """A dataset is missing, unreadable or malformed, or a request is invalid.

    The message is a single line that says what is wrong and, for missing
    data, which files to put where and how to point the toolkit at them.
    """


class PartitionError(DataError, ValueError):
    """Invalid partitioner parameters, or a partition that cannot be drawn.

    Subclasses both :class:`DataError` (so a CLI can catch all data-layer
    errors at once) and :class:`ValueError` (it is a bad-argument error).
    """
