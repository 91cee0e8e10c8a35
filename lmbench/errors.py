"""The one exception type for expected, user-fixable errors.

The CLI prints its message on one line and exits with code 2, without a traceback.
A message says what went wrong and what to do about it.
"""


class LMBenchError(Exception):
    """Bad input or a missing resource: the message names the cause and the fix."""
