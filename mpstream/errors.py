"""The one error type the command line turns into a clean message and a non-zero exit."""


class UserError(Exception):
    """A problem the user can fix: the message says what was wrong and what to do.

    Raise it for bad input and missing prerequisites; the CLI prints the message as one
    paragraph (no traceback) and exits with `exit_code`.
    """

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
