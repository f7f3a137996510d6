"""Readable token text: visible whitespace, escaped control characters, truncation.

Tokens are untrusted strings: they may be empty, pure whitespace, contain newlines, control
characters or bidirectional overrides. :func:`format_token` turns one into a short label that
shows what the token really is, for plots, the CLI table and the JS widget alike:

=============================  ==========================================================
input                          shown as
=============================  ==========================================================
leading / trailing ``" "``     ``"␣"`` each (``space=`` picks another mark, e.g. ``"·"``)
spaces inside the token        kept as spaces (``all_spaces=True`` marks them too)
a token of spaces only         ``"␣"`` per space
``"\\n"``                      ``"↵"`` (``newline="\\\\n"`` writes the escape instead)
``"\\t"``                      ``"⇥"``
``"\\r"``                      ``"\\\\r"``
``"\\u00a0"`` (no-break space)  ``"⍽"`` (a mark, not an escape: it is common in tokenizers)
``""``                         ``"∅"``
other control / format chars   ``"\\\\x07"``, ``"\\\\u200b"``, ``"\\\\u202e"`` (never rendered raw)
other space characters         escaped the same way (``"\\\\u2009"``, a thin space)
longer than ``max_len``        cut at ``max_len`` characters, the last being ``"…"``
=============================  ==========================================================

Truncation never splits an escape or a mark. The rules are deliberately small so that the
JS widget can mirror them character for character: a character maps to one display unit;
units are joined until the next one would not fit.

:func:`visible_text` escapes the same dangerous characters in free text — the model's
generated answer, a model name, a page title — without marking spaces or cutting.

:func:`escape_mathtext` additionally protects a label from matplotlib's mathtext (a token
such as ``"$x^2$"`` would otherwise be typeset as a formula).
"""

from __future__ import annotations

import unicodedata
from typing import Any

SPACE = "\u2423"  # ␣ OPEN BOX
DOT_SPACE = "\u00b7"  # · MIDDLE DOT, the quieter alternative
NEWLINE = "\u21b5"  # ↵
TAB = "\u21e5"  # ⇥
NBSP = "\u237d"  # ⍽ SHOULDERED OPEN BOX: a no-break space (U+00A0), not an escape
EMPTY = "\u2205"  # ∅
ELLIPSIS = "\u2026"  # …
DEFAULT_MAX_LEN = 16

# Unicode categories escaped as \xNN / \uNNNN: control, format (zero-width, bidi overrides),
# surrogates, private use, unassigned, line/paragraph separators, and spaces other than " ".
_ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}
# The same minus "Zs": in free text (:func:`visible_text`) other spaces are harmless.
_UNSAFE_CATEGORIES = _ESCAPED_CATEGORIES - {"Zs"}


def escape_char(ch: str) -> str:
    """The escape of one character: ``\\xNN`` below 256, ``\\uNNNN`` or ``\\UNNNNNNNN`` above."""
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def token_units(
    text: str,
    *,
    space: str = SPACE,
    newline: str = NEWLINE,
    tab: str = TAB,
    all_spaces: bool = False,
) -> list[str]:
    """The display units of ``text``: one string per input character (see the module table)."""
    n = len(text)
    lead = n - len(text.lstrip(" "))
    trail = n - len(text.rstrip(" "))
    units = []
    for pos, ch in enumerate(text):
        if ch == " ":
            edge = pos < lead or pos >= n - trail
            units.append(space if (edge or all_spaces) else " ")
        elif ch == "\n":
            units.append(newline)
        elif ch == "\t":
            units.append(tab)
        elif ch == "\r":
            units.append("\\r")
        elif ch == "\u00a0":
            units.append(NBSP)
        elif unicodedata.category(ch) in _ESCAPED_CATEGORIES:
            units.append(escape_char(ch))
        else:
            units.append(ch)
    return units


def format_token(
    text: object,
    *,
    max_len: int | None = DEFAULT_MAX_LEN,
    space: str = SPACE,
    newline: str = NEWLINE,
    tab: str = TAB,
    empty: str = EMPTY,
    ellipsis: str = ELLIPSIS,
    all_spaces: bool = False,
) -> str:
    """A short, unambiguous label for a token string.

    Parameters
    ----------
    text:
        The token's decoded text. ``None`` is treated like ``""``; other non-strings are
        converted with ``str``.
    max_len:
        The longest label, in characters, ellipsis included (``None``: no limit). Must be
        at least 1.
    space, newline, tab:
        Marks for a leading/trailing space, a newline and a tab (e.g. ``space="·"``,
        ``newline="\\\\n"``).
    empty:
        The label of the empty string.
    ellipsis:
        Appended when the label is cut.
    all_spaces:
        Mark every space, not only those at the ends.

    Examples
    --------
    >>> format_token(" the")
    '␣the'
    >>> format_token("\\n\\n")
    '↵↵'
    >>> format_token("")
    '∅'
    >>> format_token("internationalisation", max_len=8)
    'interna…'
    """
    if text is None:
        text = ""
    elif not isinstance(text, str):
        text = str(text)
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be >= 1 or None, got {max_len}")
    if text == "":
        return empty
    units = token_units(text, space=space, newline=newline, tab=tab, all_spaces=all_spaces)
    label = "".join(units)
    if max_len is None or len(label) <= max_len:
        return label
    room = max_len - len(ellipsis)
    kept, used = [], 0
    for unit in units:
        if used + len(unit) > room:
            break
        kept.append(unit)
        used += len(unit)
    return "".join(kept) + ellipsis


def visible_text(text: object, *, keep: str = "\n\t") -> str:
    r"""Free text (a generated answer, a model name, a page title) made safe to print or draw.

    Every character :func:`format_token` would escape — C0/C1 controls such as ESC (terminal
    escape sequences), format characters such as the bidi overrides U+202E and U+2066,
    zero-width characters, line/paragraph separators, private-use and unassigned code points
    — becomes its visible escape (``\x1b``, ``\u202e``; ``\r`` for a carriage return);
    the characters in ``keep`` (default newline and tab) and every other character, spaces
    included, stay as they are. Unlike :func:`format_token` nothing is marked or cut.
    Escaping twice changes nothing: the escapes are plain printable text.

    >>> print(visible_text("\x1b]0;pwned\x07 done\u202e"))
    \x1b]0;pwned\x07 done\u202e
    """
    if text is None:
        return ""
    text = text if isinstance(text, str) else str(text)
    return "".join(
        ch
        if ch in keep or unicodedata.category(ch) not in _UNSAFE_CATEGORIES
        else ("\\r" if ch == "\r" else escape_char(ch))
        for ch in text
    )


def escape_mathtext(label: str) -> str:
    """Protect a label from matplotlib mathtext: every ``$`` becomes ``\\$``.

    Matplotlib typesets text between unescaped dollar signs as a formula; with every dollar
    escaped, it shows the text literally (``\\$`` is drawn as ``$``, and a backslash that
    preceded a dollar survives). Pass ``usetex=False`` to the text as well: under LaTeX
    rendering many more characters are special.
    """
    return label.replace("$", r"\$")


def plot_label(text: object, **kwargs: Any) -> str:
    """:func:`format_token` followed by :func:`escape_mathtext`: a safe matplotlib label."""
    return escape_mathtext(format_token(text, **kwargs))
