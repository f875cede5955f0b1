"""Text cut short for messages and views: one `shorten` for error messages and trace views alike."""
from __future__ import annotations


def shorten(text: str, width: int, *, ellipsis: str = "…", one_line: bool = True) -> str:
    """`text` cut to `width` characters, ending in `ellipsis` when cut; with `one_line` (the
    default) its runs of whitespace, line breaks included, first become one space."""
    text = " ".join(str(text).split()) if one_line else str(text)
    return text if len(text) <= width else text[: max(1, width - len(ellipsis))] + ellipsis
