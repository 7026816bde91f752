"""Main's history: each main commit's figures, the first-parent line, cumulative drift."""
