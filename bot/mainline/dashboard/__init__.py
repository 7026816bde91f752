"""The static dashboard: main's history, token spend and tuning as charts in one folder of HTML."""
