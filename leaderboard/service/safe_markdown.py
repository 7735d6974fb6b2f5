"""A small, safe subset of Markdown for the text a board's owner writes (a track's
description): paragraphs, `inline code`, *emphasis*, _emphasis_, **strong** and
[links](https://...) to http and https addresses only.

The whole text is HTML-escaped first and the markup is made from the escaped text, so nothing
the owner writes ever becomes HTML of its own: `<script>` shows as text, a link to any other
scheme (`javascript:`, `data:`) stays literal, and a quote cannot leave the `href`. An
underscore inside a word (`factuality_classification`) is no emphasis.
"""
from __future__ import annotations

import re

from markupsafe import Markup, escape

#: one inline construct, tried left to right: a code span (its content is never marked up),
#: a link, strong, emphasis (a marker not inside a word)
INLINE = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|\[(?P<label>[^\[\]]+)\]\((?P<url>[^\s()]+)\)"
    r"|\*\*(?=\S)(?P<strong>.+?)(?<=\S)\*\*"
    r"|(?<![\w*])(?P<mark>[*_])(?=[^\s*_])(?P<em>.+?)(?<=[^\s*_])(?P=mark)(?![\w*])",
    re.DOTALL)
#: the schemes a link may have
LINK_SCHEME = re.compile(r"https?://[^/\s]", re.IGNORECASE)
PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


def markdown_html(text: str | None) -> Markup:
    """`text` as HTML paragraphs (see the module's docstring); empty for None or blanks."""
    escaped = str(escape(text or "")).replace("\r\n", "\n").strip()
    paragraphs = [part.strip() for part in PARAGRAPH_BREAK.split(escaped) if part.strip()]
    return Markup("\n".join(f"<p>{inline_html(part)}</p>" for part in paragraphs))


def inline_html(escaped: str) -> str:
    """The inline markup of already escaped text."""
    return INLINE.sub(_replace, escaped)


def _replace(match: re.Match) -> str:
    if match.group("tick"):
        return f"<code>{match.group('code')}</code>"
    if match.group("label") is not None:
        url = match.group("url")
        if not LINK_SCHEME.match(url):
            return match.group(0)  # another scheme: shown as written
        return f'<a href="{url}" rel="nofollow noopener">{inline_html(match.group("label"))}</a>'
    if match.group("strong") is not None:
        return f"<strong>{inline_html(match.group('strong'))}</strong>"
    return f"<em>{inline_html(match.group('em'))}</em>"
