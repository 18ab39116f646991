"""A tiny DOM built with the standard library's HTML parser, to query a rendered report."""

from __future__ import annotations

from html.parser import HTMLParser

VOID = {"meta", "input", "br", "img", "link", "hr", "col", "source", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: "Node | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list["Node"]:
        return [n for n in self.iter() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def find(self, *args, **kwargs) -> "Node":
        found = self.find_all(*args, **kwargs)
        assert found, f"no element matches {args} {kwargs}"
        return found[0]


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.here = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.here)
        self.here.children.append(node)
        if tag not in VOID:
            self.here = node

    def handle_startendtag(self, tag, attrs):
        self.here.children.append(Node(tag, dict(attrs), self.here))

    def handle_endtag(self, tag):
        node = self.here
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None, f"unmatched </{tag}>"
        self.here = node.parent

    def handle_data(self, data):
        self.here.children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    assert builder.here is builder.root, f"unclosed <{builder.here.tag}>"
    return builder.root
