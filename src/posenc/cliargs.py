"""The command line's shared pieces, torch-free so that `posenc ... --help` answers at once:
the one-line-error parser and the checks that every output path can be written, made before a
command writes anything.
"""

from __future__ import annotations

import argparse
import os
import tempfile


def check_writable(path, flag: str = "--out"):
    """Check that the directory `path` could be created and written, creating nothing (the
    command writes only after all its input is checked): ValueError naming the flag if it, or
    the nearest part of it that exists, is a file or cannot be written."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a file, not a directory")
    there = path
    while not os.path.exists(there):
        there = os.path.dirname(there)
    if not os.path.isdir(there):
        raise ValueError(f"{flag} {path} cannot be created: {there} is a file")
    if not os.access(there, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path} cannot be written (permission denied at {there})")
    return path


def check_out_file(path, flag: str):
    """ValueError naming the flag unless `path` can be written (a file in an existing,
    writable directory), before any work; the file itself is not created here."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: no such directory {folder}")
    try:
        if os.path.exists(path):
            open(path, "r+b").close()  # writable, and left as it is
        else:
            with tempfile.TemporaryFile(dir=folder):
                pass
    except OSError as err:
        raise ValueError(f"{flag} {path} cannot be written ({err.strerror or err})") from None
    return path


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr and exit status 2 (no usage dump).

    Every value given on the command line must say something: an empty one, or one of commas
    and blanks only (`--tasks ''` from an empty shell variable), is refused here for every flag
    of every command, instead of reading as "not given" and running the defaults.
    """

    def _get_values(self, action, arg_strings):
        if action.option_strings and action.nargs != 0:
            for text in arg_strings:
                if not text.strip(", \t\n"):
                    flag = "/".join(action.option_strings)
                    self.error(f"argument {flag}: empty value {text!r}; give a value or leave "
                               "the flag out")  # fmt: skip
        return super()._get_values(action, arg_strings)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
