"""The JSON Schema of report.json, generated from the pydantic models (`python -m bot.models.schema`)."""

from __future__ import annotations

import json
import sys
from typing import Any

from bot.models.report import SCHEMA, Report


def report_schema() -> dict[str, Any]:
    """report.json's JSON Schema (draft 2020-12) as the models read it: what `Report` validates, findings included."""
    schema = Report.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{SCHEMA} (report.json)",
        **schema,
    }


def schema_text() -> str:
    """The schema as docs/report.schema.json holds it."""
    return json.dumps(report_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
