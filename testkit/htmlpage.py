"""A dashboard page's HTML read with the standard library's parser: elements by id, tag and
class, their attributes and their text, so tests check what a page shows, not its bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
"""Elements with no end tag."""


@dataclass
class Element:
    """One element: its tag, attributes, children and the text directly and below it."""

    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The element's text, its children's included, with runs of spaces made one."""
        return " ".join("".join(self.parts).split())

    @property
    def classes(self) -> set[str]:
        """The element's classes."""
        return set(self.attrs.get("class", "").split())

    def walk(self) -> list[Element]:
        """This element and every one below it, in document order."""
        found = [self]
        for child in self.children:
            found += child.walk()
        return found

    def find_all(
        self, tag: str | None = None, cls: str | None = None, **attrs: str
    ) -> list[Element]:
        """Every element below (or at) this one with ``tag``, the class ``cls`` and ``attrs``."""
        return [
            e
            for e in self.walk()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())
        ]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element | None:
        """The first element :meth:`find_all` would give, or None."""
        found = self.find_all(tag, cls, **attrs)
        return found[0] if found else None

    def by_id(self, element_id: str) -> Element | None:
        """The element with this id, or None."""
        return self.find(id=element_id)

    def rows(self) -> list[list[str]]:
        """A table's body rows as lists of cell texts."""
        body = self.find("tbody") or self
        return [
            [cell.text for cell in row.children if cell.tag in ("th", "td")]
            for row in body.find_all("tr")
        ]


class _Builder(HTMLParser):
    """Builds the element tree (tolerant of unclosed elements, as browsers are)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.stack:
            element.parts.append(data)


def parse(html: str) -> Element:
    """The page's element tree."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root
