"""A finding's and a phrase's line in the locale the command speaks (`bot.text.i18n.speaking`): what people read."""

from __future__ import annotations

from bot.text import i18n
from bot.wording.messages import Wording

SPOKEN = Wording(i18n.translated)  # each message looked up in the locale spoken when it is rendered
render, text, label, phrase = SPOKEN.render, SPOKEN.text, SPOKEN.label, SPOKEN.phrase
