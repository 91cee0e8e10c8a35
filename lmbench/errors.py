"""The one exception type for expected, user-fixable errors.

The CLI prints its message on one line and exits with code 2, without a traceback.
A message says what went wrong and what to do about it.
"""


class LMBenchError(Exception):
    """Bad input or a missing resource: the message names the cause and the fix."""


# What to do when the system refuses a file operation, by errno name: the last resort of the command line
# for an OSError no stage turned into its own message (lmbench_cli).
SYSTEM_ADVICE = {
    "EIO": "the disk or file system failed to read or write it: check the device (dmesg), or copy the file elsewhere",
    "ENAMETOOLONG": "a part of the name is over 255 bytes or the whole over 4096: give a shorter path (the corpus "
                    "cache's is LMBENCH_CACHE's, else ~/.cache/lmbench)",
    "ENOSPC": "the disk is full: free space there, or give a folder on another disk",
    "EDQUOT": "your disk quota is spent: free space there, or give a folder on another disk",
    "EROFS": "the file system is read-only: give a folder you may write",
    "EACCES": "permission denied: give a path you may read (or write), or change its permissions",
    "EPERM": "the operation is not permitted there: give another path",
    "ELOOP": "the path's links go round in a loop: give the file itself",
    "EMFILE": "too many files open: raise the limit (ulimit -n)",
}


def system_refusal(err: OSError) -> str:
    """One line for an OSError: the path(s), the system's words for the cause, and what to do."""
    import errno
    name = errno.errorcode.get(err.errno or 0, "")
    paths = " -> ".join(str(path) for path in (err.filename, err.filename2) if path is not None)
    cause = err.strerror or str(err) or type(err).__name__
    advice = SYSTEM_ADVICE.get(name, "check the path and the file system")
    return f"{paths + ': ' if paths else ''}{cause}{f' ({name})' if name else ''}: {advice}"
