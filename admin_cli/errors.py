"""The one error kadmin's operations raise: its message is shown to the user as is (exit status 1)."""


class AdminError(Exception):
    """An admin operation was refused or failed; the message is fit for a user."""
