"""What the API refuses in a request before its route runs: a query parameter the route does
not take (or gives twice), a submission form's unknown, repeated or empty fields, and a card
field that is not JSON one can read one way."""
from __future__ import annotations

import json
import typing
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from tasks.plumbing.errors import DataError, did_you_mean, json_type
from tasks.plumbing.io import DuplicateKey, strict_loads


def parse_card(text: str) -> dict:
    """The card form field: JSON (a name given twice, nesting too deep or a number too long to
    read is refused like malformed JSON), as `card_object` takes it."""
    try:
        parsed = strict_loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"card is not JSON ({error.msg})", field="card") from None
    except DuplicateKey as error:
        raise DataError(f"card is not JSON one can read one way: {error.key!r} is given twice "
                        f"in one object", field="card") from None
    except RecursionError:
        raise DataError("card is not JSON one can read: nested too deeply",
                        field="card") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise DataError(f"card is not JSON one can read: {error}", field="card") from None
    return card_object(parsed)


def card_object(card: Any) -> dict:
    """The card form field's JSON: an object of card fields, or a plain string or number
    taken as its notes."""
    if isinstance(card, dict):
        return card
    if isinstance(card, (str, int, float)) and not isinstance(card, bool):
        return {"notes": card}
    raise DataError(f"expected a JSON object of model card fields, got {json_type(card)}",
                    field="card")


def known_query_parameters(request: Request) -> None:
    """Refuse a query parameter the API route does not take: a mistyped `?varaint=` (or a
    `variant` put in a submission's query instead of its form) would otherwise be passed over
    and the default board answered. Pages keep the web's habit of ignoring them."""
    route = request.scope.get("route")
    if route is None:
        return
    known, lists, dependants = set(), set(), [route.dependant]
    while dependants:  # the route's own parameters and those of its dependencies
        dependant = dependants.pop()
        known.update(param.alias for param in dependant.query_params)
        lists.update(param.alias for param in dependant.query_params
                     if typing.get_origin(param.field_info.annotation) in (list, tuple, set))
        dependants.extend(dependant.dependencies)
    known = sorted(known)
    unknown = sorted(set(request.query_params) - set(known))
    if unknown:
        takes = f"it takes {', '.join(known)}" if known else "it takes none"
        raise RequestValidationError([
            {"loc": ("query", key), "type": "extra_forbidden",
             "msg": f"not a query parameter of this endpoint ({takes})"
                    f"{did_you_mean(key, known)}"} for key in unknown])
    repeated = sorted(key for key in set(request.query_params) - lists
                      if len(request.query_params.getlist(key)) > 1)
    if repeated:  # the binding would keep the last value, as a form's would
        raise RequestValidationError([
            {"loc": ("query", key), "type": "value_error",
             "msg": "given more than once in the query: which value is meant is ambiguous"}
            for key in repeated])


#: the submission form's fields (`files` repeated, one file each; the others once);
#: `evaluate` (with `revision`, `profile`) names a model to evaluate instead of files
FORM_FIELDS = ("files", "model", "track", "variant", "card", "evaluate", "revision",
               "profile")


async def form_problems(request: Request) -> list[DataError]:
    """What the form binding would pass over silently: a field it does not know (a typo of
    `variant` would leave the submission on the default board), a field given more than
    once (it keeps the last), a field with a default given empty (it takes the default).
    Starlette parses the form once per request and keeps it."""
    form = await request.form()
    problems = []
    for key in sorted(set(form.keys()) - set(FORM_FIELDS)):
        problems.append(DataError(
            f"not a field of the submission form (it takes {', '.join(FORM_FIELDS)})"
            f"{did_you_mean(key, FORM_FIELDS)}", field=key))
    repeated = sorted(key for key in set(form.keys()) & set(FORM_FIELDS)
                      if key != "files" and len(form.getlist(key)) > 1)
    if repeated:
        problems.append(DataError(
            f"given more than once in the form ({', '.join(repeated)}): which value is meant "
            f"is ambiguous", field=repeated[0]))
    for key in ("track", "variant", "card", "evaluate", "revision", "profile"):
        if key not in repeated and form.get(key) == "":  # (an empty model: Field required)
            problems.append(DataError("given empty: leave the field out for its default",
                                      field=key))
    files, evaluate = bool(form.getlist("files")), "evaluate" in form
    if files == evaluate:
        problems.append(DataError("send prediction files (`files`) or name a model to "
                                  "evaluate (`evaluate`), one of the two",
                                  field="evaluate" if evaluate else "files"))
    elif not evaluate and ({"revision", "profile"} & set(form.keys())):
        problems.append(DataError("`revision` and `profile` go with `evaluate`",
                                  field=sorted({"revision", "profile"} & set(form.keys()))[0]))
    return problems
