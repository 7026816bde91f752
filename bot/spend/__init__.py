"""Token spend: weekly budgets per domain enforced before a request, the weekly summary and its anomalies."""
