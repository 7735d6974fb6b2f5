"""Errors that point at the exact place of bad input (file, line, field)."""
from __future__ import annotations


class SumbenchError(Exception):
    """Base class of every error sumbench raises on purpose."""


#: JSON's names of the Python types json.loads returns (error messages speak JSON)
JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
              (list, "array"), (dict, "object"), (type(None), "null"))


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type ("null", "array", ...), else its Python name."""
    return next((name for kind, name in JSON_TYPES if isinstance(value, kind)),
                type(value).__name__)


class DataError(SumbenchError, ValueError):
    """Bad input data. The message names the file, the 1-based line and the field at fault."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = []
        if path is not None:
            where.append(str(path) + (f":{line}" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)

    def located(self, path: str | None, line: int | None) -> DataError:
        """This error at `path`:`line`, keeping a file and line it already names."""
        return DataError(self.reason, path=self.path or path,
                         line=self.line if self.line is not None else line, field=self.field)


class UnknownNameError(SumbenchError, KeyError):
    """An unknown registry name; the message suggests close matches."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def check_choice(value, known, what: str, *, cutoff: float = 0.6):
    """`value` when it is one of `known`; otherwise the one error sumbench gives for an
    unknown choice: UnknownNameError "unknown WHAT 'x'; did you mean 'y'? (known: ...)"
    (`cutoff`: how close a suggested name must be, as in `did_you_mean`)."""
    known = list(known)
    if value in known:
        return value
    hint = did_you_mean(str(value), known, cutoff=cutoff)
    raise UnknownNameError(f"unknown {what} {value!r}{hint} (known: {', '.join(map(str, known))})")


def check_choices(values, known, what: str, *, cutoff: float = 0.6) -> list:
    """`values` when each is one of `known`; otherwise `check_choice`'s error for the first
    that is not."""
    values, known = list(values), list(known)
    for value in values:
        check_choice(value, known, what, cutoff=cutoff)
    return values


def unknown_names(given, known) -> str:
    """"a, b; did you mean 'c' (for 'b')?" for the names in `given` that are not in `known`
    (sorted, with the close known names); "" when every name is known."""
    known = set(known)
    unknown = sorted(set(given) - known)
    return f"{', '.join(unknown)}{did_you_mean(unknown, known)}" if unknown else ""


def did_you_mean(names, candidates, cutoff: float = 0.6) -> str:
    """"; did you mean 'a' or 'b'?" for the candidates close to a mistyped name ("" if none
    is; `cutoff`: difflib's similarity bound); for several names, the first that has close
    candidates, named ("... (for 'x')?")."""
    import difflib

    several = not isinstance(names, str)
    for name in (names if several else [names]):
        close = difflib.get_close_matches(str(name), sorted(map(str, candidates)), n=3,
                                          cutoff=cutoff)
        if close:
            which = f" (for {name!r})" if several else ""
            return f"; did you mean {' or '.join(map(repr, close))}{which}?"
    return ""
