"""The command line's shared pieces, torch-free (`--help` answers at once): the one-line-error
parser, the flags' value types, and the checks that every output can be written, made before a
command writes anything."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

SQLITE = b"SQLite format 3\0"  # the first 16 bytes of every SQLite database


def check_writable(path, flag: str = "--out"):
    """The folder `path`, checked (creating nothing) that it can be created and written;
    ValueError naming the flag where it, or its nearest existing part, is a file or read-only."""
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


def _is_json(head: bytes, f) -> bool:
    try:
        json.loads(head + f.read())
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return True


# kind -> is(first 16 bytes, the file after them): what an output file may replace
OURS = {
    "json": _is_json,
    "npz": lambda head, f: head.startswith(b"PK\x03\x04"),  # a zip, as numpy writes it
    "safetensors": lambda head, f: len(head) >= 9 and head[8:9] == b"{",  # u64 size, then JSON
}


def check_out_file(path, flag: str, kind: str | None = None):
    """ValueError naming the flag unless `path` can be written (not created here). With `kind`
    (a key of OURS) an existing non-empty file is replaced only if of that kind: never a SQLite
    database or any other file it would silently destroy."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: no such directory {folder}")
    try:
        if os.path.exists(path):
            with open(path, "r+b") as f:  # writable, and left as it is
                head = f.read(16)
                if kind is not None and head and not OURS[kind](head, f):
                    what = "a SQLite database" if head == SQLITE else f"not a {kind} file"
                    raise ValueError(f"{flag} {path} exists and is {what}: give a new "
                                     f"file, or a {kind} file to replace")  # fmt: skip
        else:
            with tempfile.TemporaryFile(dir=folder):
                pass
    except OSError as err:
        raise ValueError(f"{flag} {path} cannot be written ({err.strerror or err})") from None
    return path


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr, exit 2. A value that is empty or
    only commas and blanks (`--tasks ''` from an empty variable) is refused for every flag."""

    def _get_values(self, action, arg_strings):
        if action.option_strings and action.nargs != 0:
            for text in arg_strings:
                if not text.strip(", \t\n"):
                    flag = "/".join(action.option_strings)
                    self.error(f"argument {flag}: empty value {text!r}; give a value or leave "
                               "the flag out")  # fmt: skip
        return super()._get_values(action, arg_strings)

    def parse_args(self, args=None, namespace=None):
        # an unknown flag is named first: argparse would name a required argument left out, or
        # a default that is not valid here (--db's file), before it
        argv = list(sys.argv[1:] if args is None else args)
        argv = argv[: argv.index("--")] if "--" in argv else argv
        flags = self._option_string_actions
        unknown = [a for a in argv if a.startswith("--") and not any(
                   f.startswith(a.split("=", 1)[0]) for f in flags)]  # fmt: skip
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_args(args, namespace)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# ------------------------------------------------------------------------------ flag values
# Every value flag takes its type= from here, checked as it is parsed, and names values it refuses
# (`.bad`: tests/test_cli.py feeds them to every flag; "AFILE" stands for an existing text file).


def _value(bad: tuple[str, ...], what: str):
    """Decorator: fn(text) -> value (ValueError / TypeError for a bad one) as an argparse type."""

    def wrap(fn):
        def parse(text: str):
            try:
                return fn(text)
            except (ValueError, TypeError) as err:
                raise argparse.ArgumentTypeError(str(err) or f"not {what}: {text!r}") from None

        parse.bad, parse.__name__ = bad, what
        return parse

    return wrap


def integer(low: int | None = None, high: int | None = None, even: bool = False):
    """An int in low..high (either end open when None); only even ones where `even`."""
    rng = f">= {low}" if high is None else f"in {low}..{high}"
    kind = "an even integer" if even else "an integer"
    bad = ("abc", "1.5", "true", "1e3")
    bad += (str(low - 1),) if low is not None else ()
    bad += (str(high + 1),) if high is not None else ()
    bad += (str(low + 1),) if even else ()

    @_value(bad, f"{kind} {rng}")
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"must be an integer {rng}, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"must be an integer {rng}, got {value}")
        if even and value % 2:
            raise ValueError(f"must be {kind} {rng}, got {value}")
        return value

    return parse


def number(low: float = 0.0):
    """A finite float >= low."""

    @_value(("abc", "nan", "inf", str(low - 1)), f"a finite number >= {low:g}")
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"must be a finite number >= {low:g}, got {text!r}") from None
        if not value >= low or value == float("inf"):
            raise ValueError(f"must be a finite number >= {low:g}, got {text!r}")
        return value

    return parse


def integers(low: int = 1):
    """Comma-separated integers >= low -> sorted, unique list."""

    @_value(("abc", "1,x", str(low - 1), f"4,{low - 1}"), f"comma-separated integers >= {low}")
    def parse(text: str) -> list[int]:
        try:
            values = [int(s) for s in text.split(",") if s.strip()]
        except ValueError:
            raise ValueError(f"must be comma-separated integers, got {text!r}") from None
        if not values or min(values) < low:
            raise ValueError(f"must be comma-separated integers >= {low}, got {text!r}")
        return sorted(set(values))

    return parse


def names(allowed=None, check=None):
    """Comma-separated names -> list, duplicates dropped; each in `allowed`, or check(list)."""

    @_value(("nope_x1", "a,nope_x1"), "comma-separated names")
    def parse(text: str) -> list[str]:
        items = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
        bad = [s for s in items if allowed is not None and s not in allowed]
        if bad:
            raise ValueError(f"unknown {bad}; allowed: {', '.join(allowed)}")
        if check is not None:
            check(items)
        return items

    return parse


def checked(fn, bad: tuple[str, ...], what: str):
    """The text as given, once fn(text) (raising ValueError) has accepted it."""

    @_value(bad, what)
    def parse(text: str) -> str:
        fn(text)
        return text

    return parse


def file_suffix(path, allowed: tuple[str, ...], what: str) -> str:
    """The file name's suffix, lower case; ValueError naming `what` unless it is in `allowed`."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in allowed:
        raise ValueError(f"{what} {path}: the name must end in {', '.join(allowed)}")
    return suffix


def _existing(text: str, kind: str = "file") -> str:
    if kind == "file" and not os.path.isfile(text):
        raise ValueError(f"not found: {text}" if not os.path.isdir(text) else
                         f"{text} is a folder; give a file")  # fmt: skip
    if kind == "path" and not os.path.exists(text):
        raise ValueError(f"no such file or directory: {text}")
    return text


in_file = checked(_existing, ("missing_x1.sqlite", "."), "an existing file")
in_path = checked(lambda t: _existing(t, "path"), ("missing_x1",), "an existing file or folder")
in_files = checked(lambda t: [_existing(s.strip()) for s in t.split(",") if s.strip()],
                   ("missing_x1.sqlite", "AFILE,missing_x1.sqlite"), "existing files")  # fmt: skip
out_dir = checked(lambda t: check_writable(t, "folder"), ("AFILE", "AFILE/sub"), "a folder")
json_file = checked(lambda t: check_out_file(t, "file", "json"),
                    (".", "AFILE", "AFILE/x", "missing_x1/x"), "a JSON file")  # fmt: skip


def _db(text: str) -> str:
    if os.path.isdir(text):
        raise ValueError(f"{text} is a directory; give a file name")
    return check_writable(os.path.dirname(os.path.abspath(text)), "its folder")


db_file = checked(_db, (".", "AFILE/x.sqlite"), "a database file")


def _address(text: str) -> str:
    host, sep, port = text.strip().removeprefix("ray://").rpartition(":")
    if text.strip() in ("auto", "local"):
        return text
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be auto or HOST:PORT (port 1..65535), got {text!r}")
    return text


ray_address = checked(_address, ("nohost", "h:abc", "h:0", "h:70000"), "auto or HOST:PORT")


def split_items(text: str, flag: str) -> list[str]:
    """'a, b,,a' -> ['a', 'b']; ValueError naming the flag when there is none."""
    out = [s.strip() for s in text.split(",") if s.strip()]
    if not out:
        raise ValueError(f"{flag}: give at least one value")
    return list(dict.fromkeys(out))


def parse_value(text: str):
    """A label keyword's value: int, float, true / false, else the word itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def split_call(label: str, where: str, example: str) -> tuple[str, dict]:
    """'name(key=value,...)' -> ('name', {key: parse_value(value)}), the label grammar of arena
    --encodings and stretch --scalings; ValueError starting with `where` for a bad keyword."""
    head, kwargs = label.strip(), {}
    if head.endswith(")") and "(" in head:
        head, _, inside = head[:-1].partition("(")
        for item in filter(None, (p.strip() for p in inside.split(","))):
            key, eq, value = (s.strip() for s in item.partition("="))
            if not eq or not key.isidentifier() or not value:
                raise ValueError(f"{where}: keyword {item!r}: write key=value, e.g. {example}")
            if key in kwargs:
                raise ValueError(f"{where}: keyword {key!r} is given twice")
            kwargs[key] = parse_value(value)
    if "(" in head or ")" in head:
        raise ValueError(f"{where}: unbalanced parentheses; write name(key=value), e.g. {example}")
    return head.strip(), kwargs


def check_device(device: str, local: bool = True, flag: str = "--device") -> str:
    """ValueError naming the flag unless `device` is cpu or cuda[:N] (local: and CUDA is here)."""
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and not (index.isdigit() and kind == "cuda")):
        raise ValueError(f"{flag} must be cpu or cuda[:N], got {device!r}".lstrip())
    if local and kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"{flag} {device}: no CUDA device is available here; use cpu")
    return device


device = checked(lambda t: check_device(t, local=False, flag=""),
                 ("gpu", "cuda:x", "cuda:-1", "cpu:0"), "a device")  # fmt: skip


def check_distinct(**paths) -> None:
    """ValueError unless the output paths ({flag: path or None}) are distinct files."""
    seen: dict[str, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise ValueError(f"{flag} {path} is the same file as {seen[real]}; give another")
        seen[real] = f"{flag} {path}"


def dispatch(prog: str, unit: str, run, report, argv: list[str] | None) -> int:
    """`prog report ...` -> report(argv), else run(argv); errors as one line: bad input 2, a
    failed `unit` 1 (the others saved), interrupted 130. POSENC_DEBUG=1 re-raises."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return report(argv[1:]) if argv[:1] == ["report"] else run(argv)
    except SystemExit as exit_:  # argparse: --help (0), a flag refused as it was parsed (2)
        return int(exit_.code or 0)
    except (ValueError, TypeError, OSError) as err:
        if os.environ.get("POSENC_DEBUG"):
            raise
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # failed jobs: the others are saved
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (finished {unit} are saved; rerun to resume)", file=sys.stderr)
        return 130
