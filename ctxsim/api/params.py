"""The API's query parameters as the schema states them, and one line per bad parameter.

What the schema says a filter or profile may be is what the handlers accept (schemathesis checks
both ways): the fixed sets as enums, a profile as a preset or `saved:<id>`, a day as YYYY-MM-DD,
text without NUL (PostgreSQL refuses it, and no stored text holds one).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal

from ninja import Field
from pydantic import BeforeValidator

from ctxsim.api import adapters

MAX_ID = 2**63 - 1  # beyond this no row exists, and some databases refuse the number

# What the schema says a filter or profile may be, so a schema-valid request is a valid one
# (schemathesis checks both ways): the fixed sets as enums, a profile as a preset or `saved:<id>`.
FormatFilter = Literal[("", *adapters.FORMATS)]  # type: ignore[valid-type]
StatusFilter = Literal[("", *adapters.STATUSES)]  # type: ignore[valid-type]
ModelName = Literal[("", *adapters.CACHE_MODELS)]  # type: ignore[valid-type]
Lifetime = Literal[("", *adapters.CACHE_LIFETIMES)]  # type: ignore[valid-type]
# Preset names are [a-z0-9-] (checked in the tests), so they go into the pattern as they are.
PROFILE_PATTERN = "^(" + "|".join(adapters.PROFILE_NAMES) + r"|saved:[1-9][0-9]{0,17})$"
ProfileRef = Annotated[str, Field(pattern=PROFILE_PATTERN)]


def _iso_date(value: object) -> object:
    """Only YYYY-MM-DD (pydantic alone would take `0` as 1970-01-01)."""
    if isinstance(value, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("write the day as YYYY-MM-DD")
    return value


IsoDate = Annotated[date | None, BeforeValidator(_iso_date)]
# Text parameters: anything but NUL (PostgreSQL refuses it, and no stored text holds one).
NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, Field(pattern=NO_NUL)]


QUERY_SCHEMAS = ("query", "path", "body", "params", "filters")  # not the parameter's name


def problem(error: dict) -> str:
    """One line for one validation error: what was wrong, and with which parameter."""
    loc = [str(p) for p in error.get("loc", ()) if p not in QUERY_SCHEMAS]
    field = loc[0] if loc else ""
    where = ".".join(loc)
    kind, value = error.get("type", ""), error.get("input")
    noun = "profile" if field in ("profile", "profiles") else field
    if kind == "literal_error":
        message = f"unknown {noun} {value!r}; use one of: {error['ctx']['expected']}"
    elif kind == "string_pattern_mismatch" and error.get("ctx", {}).get("pattern") == NO_NUL:
        message = "contains a NUL character"
    elif kind == "string_pattern_mismatch":
        message = f"unknown {noun} {value!r}"
    elif kind == "too_long" and field == "profiles":
        message = f"at most {error['ctx']['max_length']} profiles at once"
    else:
        message = error.get("msg", "invalid request")
    return f"{where}: {message}" if where else message
