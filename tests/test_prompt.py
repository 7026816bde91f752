"""What the agent is sent (bot/agent/prompt.py): the kernel's sources first, then its configs, and what was left out."""

from __future__ import annotations

from bot.agent import estimate, prompt
from tests.agent_world import CONFIG_DIFF, KERNEL, change


def test_the_prompt_keeps_kernel_sources_then_configs_and_lists_what_it_left_out():
    big_py = change("kernels/deepgemm_tile/reference.py", "+# x\n" * 3000)
    source = change("kernels/deepgemm_tile/gemm_cpu.cpp", "+int tile = 256;\n" * 40)
    config = change("kernels/deepgemm_tile/tile_config.json", CONFIG_DIFF)
    readme = change("kernels/deepgemm_tile/NOTES.md", "+a note\n")
    changes = [big_py, readme, config, source]
    assert [c.path for c in prompt.order(changes, KERNEL)] == [source.path, config.path, big_py.path, readme.path]
    frame = estimate.count_messages(prompt.messages(KERNEL, [], [c.path for c in changes]))
    trimmed = prompt.trim(KERNEL, changes, frame + 600, estimate.count_messages)
    assert [c.path for c in trimmed.included] == [source.path, config.path, readme.path]
    assert trimmed.left_out == [big_py.path] and trimmed.prompt_tokens <= frame + 600
    user = prompt.messages(KERNEL, trimmed.included, trimmed.left_out)[1]["content"]
    assert "left out of this prompt for size" in user and "reference.py" in user
    assert user.index("int tile = 256") < user.index('"tile_m": 256')
