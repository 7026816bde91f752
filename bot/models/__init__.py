"""Data that crosses stages (report.json, the judge's job and results, ledger rows, GitHub objects): pydantic only."""
