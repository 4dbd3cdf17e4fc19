#!/usr/bin/env python3
"""Circles among the Rust crate's sibling modules (docs/architecture.md, rule 8).

Usage: python3 tools/rust_modules.py [rust/]    (stdlib only; exit status 1 on a circle, or on a
child that uses a helper its parent keeps private: see the end)

Every .rs file under rust/ (examples/ excluded) is a module: lib.rs the crate, x.rs and
x/mod.rs the module x, x/y.rs its child y. Each `crate::`, `super::` and `self::` path of a
file (in `use` trees and in code) is resolved to the module that defines the item, through
the `pub use` re-exports on the way. A path from a::b::... to a::c::... is an edge b -> c
between two children of a (a folder is one module; its files are its children). Every
strongly connected component of that graph is printed with the references that make it
(`[test]`: only from `#[cfg(test)]` code).

A child may still name its parent's mod.rs (the folder's face, e.g. `super::TextEncoder`);
those references are listed at the end, and one to an item that is not `pub` is marked: a
helper kept in mod.rs only to be shared, which belongs in a sibling file (rule 8).
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

# Comments, strings and char literals: blanked before anything is read ('{' is often one).
LEXEME = re.compile(
    r"""//[^\n]*|(?<!\w)b?r(?P<h>\#*)".*?"(?P=h)|b?"(?:\\.|[^"\\])*\""""
    r"""|'(?:\\(?:u\{[0-9a-fA-F]*\}|.)|[^'\\])'""",
    re.S,
)
# What a file is read for, in order: module declarations, braces, `use` trees, paths.
PUB = r"\bpub(?:\([^)]*\))?\s+"
ITEM = re.compile(
    rf"(?P<test>\#\[cfg\(test\)\]\s*)?(?:{PUB})?\bmod\s+(?P<mod>\w+)\s*(?P<end>[{{;])"
    rf"|(?P<pub>{PUB})?\buse\s+(?P<use>[^;]+);|(?P<brace>[{{}}])"
    r"|(?P<path>\b(?:crate|super|self)(?:\s*::\s*\w+)+)"
)
# A file's own items (rustfmt puts them at column 0), with their visibility.
DEFINITION = re.compile(
    r"^(?P<vis>pub(?:\([^)]*\))?\s+)?(?:const|static|fn|struct|enum|trait|type)\s+(?P<name>\w+)",
    re.M,
)


def blank(text):
    """`text` without comments (nested block comments too), strings and char literals."""
    out, depth, i = [], 0, 0
    while i < len(text):
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif depth and text.startswith("*/", i):
            depth, i = depth - 1, i + 2
        elif depth:
            i += 1
        else:
            match = LEXEME.match(text, i)
            out.append(" " if match else text[i])
            i = match.end() if match else i + 1
    return "".join(out)


def use_paths(tree, prefix=()):
    """The paths of a `use` tree: `a::{b, c::{self, d as e}}` -> a::b, a::c, a::c::d."""
    tree = re.sub(r"\s+as\s+\w+", "", tree).strip()
    head, brace, rest = tree.partition("{")
    segments = [s.strip() for s in head.split("::") if s.strip() not in ("", "*")]
    segments = prefix + tuple(s for s in segments if s != "self" or not prefix)
    if not brace:
        return [segments]
    parts, depth, start, inner = [], 0, 0, rest[: rest.rindex("}")]
    for i, c in enumerate(inner + ","):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    return [p for part in parts if part.strip() for p in use_paths(part, segments)]


def module_of(path, root):
    """rust/x/y.rs -> ("x", "y"); lib.rs and mod.rs name their folder."""
    parts = path.relative_to(root).with_suffix("").parts
    return parts[:-1] if parts[-1] in ("lib", "mod") else parts


def read(files):
    """Every path of every file as (file's module, module it appears in, path from the crate
    root), the modules under `#[cfg(test)]`, each module's `pub use` re-exports, and which of
    its items are `pub`."""
    refs, test_only, reexports, public = [], set(), defaultdict(dict), set()
    for module, path in files.items():
        text, inline, depth = blank(path.read_text()), [], 0
        for d in DEFINITION.finditer(text):
            if (d["vis"] or "").strip() == "pub":
                public.add((*module, d["name"]))
        for m in ITEM.finditer(text):
            here = module + tuple(name for name, _ in inline)
            if m["test"]:  # `#[cfg(test)] mod x;` or `#[cfg(test)] mod tests { ... }`
                test_only.add((*here, m["mod"]))
            if m["end"] == "{":  # an inline module: `super` inside it is the file's module
                inline.append((m["mod"], depth))
                depth += 1
            elif m["brace"]:
                depth += 1 if m["brace"] == "{" else -1
                if inline and inline[-1][1] == depth:
                    inline.pop()
            paths = (
                use_paths(m["use"]) if m["use"] else [m["path"].split("::")] if m["path"] else []
            )
            for segments in (tuple(s.strip() for s in p) for p in paths):
                ups = segments.count("super")
                if segments[0] == "crate":
                    target = segments[1:]
                elif segments[0] == "self":
                    target = here + segments[1:]
                elif ups:  # super::super::x, counted from the (inline) module it is in
                    target = here[: len(here) - ups] + segments[ups:]
                elif here + segments[:1] in files:  # `use child::Item` in a mod.rs
                    target = here + segments
                else:
                    continue  # another crate (std, serde, ...)
                if m["pub"]:
                    reexports[here][target[-1]] = target
                refs.append((module, here, target))
    return refs, test_only, reexports, public


def main(root):
    files = {module_of(p, root): p for p in sorted(root.rglob("*.rs")) if "examples" not in p.parts}
    refs, test_only, reexports, public = read(files)
    edges, upward = defaultdict(set), set()
    for module, here, target in refs:
        # The module that defines the item: the longest known prefix, through re-exports.
        for _ in range(10):
            known = max(
                (target[:k] for k in range(len(target) + 1) if target[:k] in files), key=len
            )
            rest = target[len(known) :]
            if not rest or rest[0] not in reexports[known]:
                break
            target = reexports[known][rest[0]] + rest[1:]
        item = rest[0] if rest else "(the module)"
        test = " [test]" if any(here[:k] in test_only for k in range(len(here) + 1)) else ""
        common = 0
        while common < min(len(module), len(known)) and module[common] == known[common]:
            common += 1
        if known == module[:common] and common < len(module):  # a child names an ancestor
            shared = "" if (*known, item) in public or not rest else " [not pub: move it down]"
            upward.add(f"  {files[module]}{test} -> {files[known]}: {item}{shared}")
        elif common < len(module) and common < len(known):  # siblings below module[:common]
            edges[module[: common + 1], known[: common + 1]].add(f"{files[module]}{test}: {item}")
    circles = strongly_connected(edges)
    for circle in circles:
        print(f"circle among {', '.join('::'.join(m) for m in sorted(circle))}:")
        for (a, b), notes in sorted(edges.items()):
            if a in circle and b in circle:
                print(f"  {'::'.join(a)} -> {'::'.join(b)}:\n    " + "\n    ".join(sorted(notes)))
    print(
        f"{len(circles)} circle(s) among sibling modules ({len(files)} files, {len(edges)} edges)"
    )
    if upward:
        print("children naming their parent's mod.rs (its face):\n" + "\n".join(sorted(upward)))
    hidden = [line for line in upward if line.endswith("[not pub: move it down]")]
    if hidden:
        print(
            f"{len(hidden)} child(ren) use a private helper of their parent: move it to a sibling"
        )
    return 1 if circles or hidden else 0


def strongly_connected(edges):
    """Tarjan's algorithm: the components of more than one module."""
    graph, index, low, stack, found = defaultdict(list), {}, {}, [], []
    for a, b in edges:
        graph[a].append(b)

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(component)

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "rust")))
