"""One exception type for every user-facing mistake, so messages stay actionable."""


class ReplicateError(Exception):
    """Bad input or missing data; the message says what to do about it."""
