"""The wording: every finding's English text by message id, rendered in English or in the locale people read."""
