"""Text that must show literally in a report page, whatever it holds.

Reports are Markdown rendered to HTML, and Markdown passes raw HTML through: a parameter
value, label, platform name, store path or error text holding ``<script>``, a backtick
or ``[x](javascript:...)`` would otherwise become markup. :func:`literal` turns every
character that starts HTML or Markdown markup (``& < > " ' ` * _ [ ] \\ | ~ # ! { }``)
into an HTML character reference, so neither Markdown nor HTML sees anything to
interpret, and the browser shows the text as typed. Dashes, dots, colons, percent
signs and parentheses stay as they are (without a ``[`` they make no link).
"""

from __future__ import annotations

_ESCAPED = {ord(c): f"&#{ord(c)};" for c in "&<>\"'`*_[]\\|~#!{}"}


def literal(text: object) -> str:
    """``text`` as Markdown/HTML that renders exactly as the characters it holds."""
    return str(text).translate(_ESCAPED).replace("\n", " ")
