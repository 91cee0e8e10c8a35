"""The JSON Schemas of results.json and claims.json, shipped with the package (lmbench/schemas/), and
the check every writer runs before it writes one.

A JSON number is never NaN here: Python's json writes float('nan') as `NaN`, which is no JSON at all
and which a schema's "number" would accept, so the validators' "number" leaves NaN out. (Infinity is a
number: a diverged network's perplexity.) The fields are documented in docs/results-format.md.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources

from jsonschema import Draft202012Validator, validators

from lmbench.errors import LMBenchError

SCHEMAS = {"results": "results.schema.json", "claims": "claims.schema.json"}
SCHEMA_VERSION = 2  # results.json's format, its `schema_version` (1: the files before it, which had none)
_NUMBERS = Draft202012Validator.TYPE_CHECKER.redefine(
    "number", lambda checker, value: Draft202012Validator.TYPE_CHECKER.is_type(value, "number")
    and not (isinstance(value, float) and math.isnan(value)))
_Validator = validators.extend(Draft202012Validator, type_checker=_NUMBERS)


@cache
def validator(kind: str) -> Draft202012Validator:
    """The validator of a kind of file: 'results' (results.json) or 'claims' (claims.json)."""
    if kind not in SCHEMAS:
        raise LMBenchError(f"no schema for {kind!r} files: use one of {', '.join(SCHEMAS)}")
    schema = json.loads(resources.files("lmbench").joinpath("schemas", SCHEMAS[kind]).read_text(encoding="utf-8"))
    return _Validator(schema)


def problems(kind: str, document) -> list[str]:
    """Where and how `document` departs from the schema of `kind`, one line each (none: it matches)."""
    errors = sorted(validator(kind).iter_errors(document), key=lambda error: list(error.absolute_path))
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {_message(error)}" for error in errors]


def _message(error) -> str:
    if isinstance(error.instance, float) and math.isnan(error.instance):
        return "NaN is not a number"
    return error.message


def check(kind: str, document, fix: str) -> None:
    """Raise one line naming the first problem of `document` (and how many there are), and `fix`."""
    found = problems(kind, document)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise LMBenchError(f"the {kind} do not match their schema (lmbench/schemas/{SCHEMAS[kind]}): "
                           f"{found[0]}{more}; {fix}")
