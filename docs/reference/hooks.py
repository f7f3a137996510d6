"""A MkDocs hook (mkdocs.yml ``hooks:``): the package's docstrings are reST, so after
mkdocstrings renders them a cross-reference reads ``:meth:`IGLens.attribute```; this shows
it as the code it names (a leading ``~``, reST's "last part only", applied)."""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):(<code>)(~?)([^<]*)(</code>)")


def _name(match: re.Match[str]) -> str:
    opening, tilde, name, closing = match.groups()
    return f"{opening}{name.rsplit('.', 1)[-1] if tilde else name}{closing}"


def on_page_content(html: str, **_: object) -> str:
    return _ROLE.sub(_name, html)
