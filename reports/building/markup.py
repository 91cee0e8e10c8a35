"""Text of the results (corpus names, row labels, corpus words, whatever a results.json holds) as it goes into
the pages the reports write: `markdown_text` for Markdown (report.md, table.md, summary.md, the README's
blocks), `latex_text` for LaTeX (table.tex); report.html's is html.escape. Every writer of those pages
passes its text through them, and its tables through `markdown_table` / `latex_table`.

Markdown: the text stays text, one line, each cell one cell: no HTML tag (`<img src=x onerror=...>`), no
comment, autolink or entity, no link or image (`[x](javascript:...)`), no line break (a name's newline
would start a heading or a table row), and in a table no column (`a|b|c`). Only what would be read as
markup is escaped, so that plain text, the figures' "< 1/10000" and "[117.9, 135.8]" included, is written
as it is: the committed reports rebuild to the same bytes.
"""

from __future__ import annotations

import re

import pandas as pd

LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")  # control characters: a line break, for some
MARKDOWN = [(re.compile(r"\\"), r"\\\\"),                     # a backslash (it would escape what follows)
            (re.compile(r"&"), "&amp;"),                       # an entity
            (re.compile(r"<(?=[A-Za-z/!?])"), "&lt;"),         # a tag, comment, declaration, autolink
            (re.compile(r">"), "&gt;"),
            (re.compile(r"\](?=[(\[])"), r"\\]")]              # a link or image: ](url), ][reference]
LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#", "_": r"\_",
         "%": r"\%", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}", "<": r"\textless{}",
         ">": r"\textgreater{}", "|": r"\textbar{}"}


def markdown_text(text, code: tuple[str, ...] = ()) -> str:
    """`text` as Markdown text (module docstring); the words of `code` (the corpus's markers, `<unk>`) set
    as code spans, as they are."""
    parts = re.split(f"({'|'.join(map(re.escape, code))})", str(text)) if code else [str(text)]
    return "".join(f"`{part}`" if part in code else _escaped(part) for part in parts)


def _escaped(text: str) -> str:
    text = LINE_BREAKS.sub(" ", text)
    for pattern, replacement in MARKDOWN:
        text = pattern.sub(replacement, text)
    return text


def markdown_cell(value):
    """A Markdown table's cell: text through markdown_text, its `|` escaped (a cell stays one cell); a number
    as it is (aligned as one)."""
    return markdown_text(value).replace("|", r"\|") if isinstance(value, str) else value


def markdown_table(frame: pd.DataFrame) -> str:
    """The frame as a Markdown table (pandas', without the index), every text cell and header a `markdown_cell`."""
    return frame.map(markdown_cell).rename(columns=markdown_cell).to_markdown(index=False)


def latex_text(value):
    """Text as LaTeX text: each of its special characters, and the < > | that OT1 fonts draw as other
    glyphs, as the command that prints it; a number as it is."""
    return "".join(LATEX.get(character, character) for character in value) if isinstance(value, str) else value


def latex_table(frame: pd.DataFrame) -> str:
    """The frame as a LaTeX tabular (pandas', without the index), every text cell and header through latex_text."""
    return frame.map(latex_text).rename(columns=latex_text).to_latex(index=False, escape=False)
