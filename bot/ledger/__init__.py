"""The ledger: SQLite by default, PostgreSQL when OPGATE_DATABASE_URL is postgresql://… (rows: bot.models.ledger)."""

from bot.ledger.db import Database, now, sqlite_path
from bot.ledger.schema import MIGRATIONS
from bot.ledger.store import Ledger, open_ledger

__all__ = ["MIGRATIONS", "Database", "Ledger", "now", "open_ledger", "sqlite_path"]
