"""A tiny document model rendered both as Markdown (README.md) and HTML (index.html)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any


class Doc:
    def __init__(self, title: str) -> None:
        self.title = title
        self.blocks: list[tuple[Any, ...]] = []

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("h", level, text))

    def para(self, text: str, strong: bool = False) -> None:
        self.blocks.append(("p", strong, text))

    def table(self, header: list[str], rows: Iterable[Iterable[object]]) -> None:
        self.blocks.append(("t", header, [[fmt(c) for c in r] for r in rows]))

    def image(self, path: str, alt: str) -> None:
        self.blocks.append(("img", path, alt))

    def links(self, items: list[tuple[str, str]]) -> None:
        """items: [(path, description)]."""
        self.blocks.append(("links", items))

    def markdown(self) -> str:
        out = ["# %s\n" % self.title]
        for b in self.blocks:
            if b[0] == "h":
                out.append("\n%s %s\n" % ("#" * b[1], b[2]))
            elif b[0] == "p":
                out.append("\n%s\n" % ("**%s**" % b[2] if b[1] else b[2]))
            elif b[0] == "t":
                header, rows = b[1], b[2]
                out.append("\n| %s |\n|%s|\n" % (" | ".join(header),
                                                  "|".join("---" for _ in header)))
                for r in rows:
                    out.append("| %s |\n" % " | ".join(c.replace("|", "\\|") for c in r))
            elif b[0] == "img":
                out.append("\n![%s](%s)\n" % (b[2], b[1]))
            elif b[0] == "links":
                out.append("\n" + "".join("- [%s](%s): %s\n" % (p, p, d) for p, d in b[1]))
        return "".join(out)

    def html(self) -> str:
        e = html.escape
        out = ["<!doctype html><html><head><meta charset='utf-8'><title>%s</title>" % e(self.title),
               "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;}"
               "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
               "padding:3px 8px;text-align:right}th{background:#eee}td:first-child{text-align:left}"
               "img{max-width:100%;border:1px solid #ddd;margin:.5em 0}"
               ".bad{color:#b00;font-size:1.3em}</style></head><body>",
               "<h1>%s</h1>" % e(self.title)]
        for b in self.blocks:
            if b[0] == "h":
                out.append("<h%d>%s</h%d>" % (b[1], e(b[2]), b[1]))
            elif b[0] == "p":
                out.append("<p class='bad'><b>%s</b></p>" % e(b[2]) if b[1] else
                           "<p>%s</p>" % e(b[2]))
            elif b[0] == "t":
                out.append("<table><tr>%s</tr>" % "".join("<th>%s</th>" % e(h) for h in b[1]))
                for r in b[2]:
                    out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % e(c) for c in r))
                out.append("</table>")
            elif b[0] == "img":
                out.append("<div><img src='%s' alt='%s'></div>" % (e(b[1]), e(b[2])))
            elif b[0] == "links":
                out.append("<ul>%s</ul>" % "".join("<li><a href='%s'>%s</a>: %s</li>" %
                                                   (e(p), e(p), e(d)) for p, d in b[1]))
        out.append("</body></html>\n")
        return "\n".join(out)

    def write(self, directory: str) -> None:
        import os
        with open(os.path.join(directory, "README.md"), "w") as f:
            f.write(self.markdown())
        with open(os.path.join(directory, "index.html"), "w") as f:
            f.write(self.html())


def fmt(v: object) -> str:
    """Readable number formatting for tables."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return "{:,}".format(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        a = abs(v)
        if a >= 10000:
            return "{:,.0f}".format(v)
        if a >= 100:
            return "{:.1f}".format(v)
        if a >= 1:
            return "{:.2f}".format(v)
        return "{:.3g}".format(v)
    return str(v)
