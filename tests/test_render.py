"""Rendering untrusted text into a comment (bot/present/render.py): no images, links, HTML or mentions; function names
as literal code."""

from __future__ import annotations

from bot.present.render import untrusted


def test_untrusted_text_cannot_post_images_links_or_html():
    text = "ok ![x](https://t.example/p.gif) [click](https://t.example/?utm_source=a) <img src=x> | cell"
    out = untrusted(text)
    assert "![" not in out and "<img" not in out and "](" not in out and "https://" not in out
    assert "\\| cell" in out


def test_untrusted_text_cannot_mention_people():
    assert "@\u200bkernel-team" in untrusted("cc @kernel-team please")


def test_function_names_render_as_literal_code():
    from bot.present.render import code

    assert code("k<1, 2>(int) | `x`") == "k<1, 2>(int) \\| 'x'"
