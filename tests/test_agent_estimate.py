"""Offline token estimates (bot/agent/estimate.py): counts from the bundled BPE file, which is checked by its hash."""

from __future__ import annotations

import pytest

from bot.agent import estimate


def test_token_estimates_come_from_the_bundled_bpe_file_checked_by_hash(tmp_path):
    assert estimate.count("hello world") == 2
    assert estimate.count_messages([{"role": "user", "content": "hello world"}]) == 3 + 1 + 2 + 3
    tampered = tmp_path / "cl100k_base.tiktoken"
    tampered.write_bytes(estimate.bpe_path().read_bytes()[:-10])
    with pytest.raises(estimate.TokenizerUnavailable, match="sha256"):
        estimate.load_ranks(tampered)
