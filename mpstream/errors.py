"""The one error type the command line turns into a clean message and a non-zero exit."""

import sys

# The exit codes of every command (docs/commands.md#exit-codes): a script tells from the code
# alone whether to read the results, fix its input, or stop.
EXIT_OK = 0  # done, and all of it good
EXIT_FAILED = 1  # done, but something failed (a trial, a figure, a check); its data is kept
EXIT_REFUSED = 2  # refused before anything ran: usage or bad input
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as a shell counts it)


class UserError(Exception):
    """A problem the user can fix: the message says what was wrong and what to do.

    Raise it for bad input and missing prerequisites; the CLI prints the message as one
    paragraph (no traceback) and exits with `exit_code`: EXIT_REFUSED, or EXIT_FAILED for
    work that was done and failed.
    """

    exit_code = EXIT_REFUSED

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


_warned: set[str] = set()


def warn(message: str) -> None:
    """Tells the user, once per process, of something that still works but should change (a
    field that moved); on stderr, so that --json output stays clean."""
    if message in _warned:
        return
    _warned.add(message)
    print(f"warning: {message}", file=sys.stderr, flush=True)
