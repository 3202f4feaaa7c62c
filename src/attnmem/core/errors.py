"""The error type for user mistakes, which the command line prints as one line."""


class UserError(Exception):
    """A problem with the user's input or config, printed as one line without a traceback."""
