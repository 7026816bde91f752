"""The ledger: SQLite by default, PostgreSQL when OPGATE_DATABASE_URL is postgresql://…"""

from bot.ledger.db import Database, now, sqlite_path
from bot.ledger.models import AcceptanceRow, BaselineRow, CachedReply, ReservationRow, UsageRow, VerdictRow
from bot.ledger.schema import MIGRATIONS
from bot.ledger.store import Ledger, open_ledger

__all__ = [
    "MIGRATIONS",
    "AcceptanceRow",
    "BaselineRow",
    "CachedReply",
    "Database",
    "Ledger",
    "ReservationRow",
    "UsageRow",
    "VerdictRow",
    "now",
    "open_ledger",
    "sqlite_path",
]
