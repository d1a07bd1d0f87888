#!/usr/bin/env python3
"""Checks the Rust sources' module structure (issue 28; `docs/design.md`, "Tiers"):

- no import circle between source files: file A uses something defined in file B (a `use` of
  `crate::`, `super::`, `self::` or a child module, or such a path inline) and B, directly or
  through other files, uses something defined in A;
- no non-test Rust source file over 900 lines;
- every non-test child module a file declares is named in that file's `//!` header (its name or
  its file's), so the layout a header gives cannot fall behind the code;
- the crate tiers of `docs/architecture.md`: every workspace member declares its tier in its
  manifest (`[package.metadata.sheetlog] tier = "…"`: model, core, library, function, tool) and
  depends only on crates of a lower tier (tools may use tools), so no function crate depends on
  another; and no loop runs through the crates' dependencies, dev-dependencies included;
- no non-test TypeScript source (`cdk/lib`, `cdk/bin`, `web/src`) over 600 lines;
- no non-test Rust function over 100 lines, counted from its `fn` line to its closing brace with
  nested functions and closures inside their parent, but the at most five `LONG_FUNCTIONS` lists,
  each with its reason (an entry that no longer exists or is no longer long fails too).

A path is resolved to the file that defines its item: through the module tree (`mod x;`, or the
file a `#[path = "…"]` attribute names), and through `pub use` re-exports, so a `mod.rs` that only
declares and re-exports its children is not an edge. Test code is left out: files declared under
`#[cfg(test)]` (an attribute in the run of attributes just above the `mod`), `tests.rs` and
`*_tests.rs`, and inline `#[cfg(test)]` blocks.

Usage: check_modules.py [ROOT]   (exits 1 and names each problem: circle, long file or function, …)
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

MAX_LINES = 900
MAX_TS_LINES = 600
TS_SOURCES = ("cdk/lib", "cdk/bin", "web/src")
MAX_FN_LINES = 100
MAX_LONG_FUNCTIONS = 5
# Non-test Rust functions allowed over MAX_FN_LINES: (path from the repository root, function
# name) -> why it is long. At most MAX_LONG_FUNCTIONS; an entry whose function is gone or no
# longer over the limit fails the check, so the list cannot go stale. A name stands for every
# function of that name in the file (methods of two types may share one).
LONG_FUNCTIONS: dict[tuple[str, str], str] = {}

FN_ITEM = re.compile(r"\bfn\s+(\w+)\s*(?=[<(])")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
USE_STMT = re.compile(r"\buse\s+([^;]+);", re.S)
PATH_RE = re.compile(r"\b((?:crate|super|self)(?:\s*::\s*\w+)+)")


def strip_comments_and_strings(src: str) -> str:
    """Blanks out comments, string and char literals, keeping line structure."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif re.match(r'b?r#*"', src[i:]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            # A raw string, or a raw byte string (`br#"…"#`): no escapes inside.
            m = re.match(r'b?r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:]):
            m = re.match(r"'(\\.|[^\\'])'", src[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_test_blocks(src: str) -> str:
    """Blanks inline `#[cfg(test)]` items (a `mod tests { ... }` block or a single item), keeping
    line structure."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", src)
        if not m:
            return src
        # The item ends at its first `;` before any `{`, else at the matching `}`.
        k = item_body(src, m.end())
        end = k + 1 if k == len(src) or src[k] == ";" else matching_brace(src, k) + 1
        src = src[: m.start()] + "\n" * src.count("\n", m.start(), end) + src[end:]


def attributes(lines: list[str], index: int) -> list[str]:
    """The outer attributes (`#[...]`, one a line) just above line `index` of a file."""
    out = []
    while index > 0 and lines[index - 1].strip().startswith("#["):
        index -= 1
        out.append(lines[index].strip())
    return out


def functions(code: str) -> list[tuple[str, int, int]]:
    """Each function with a body in `code` (comments and strings blanked): its name, the line of
    its `fn` and its length in lines, from that line to its closing brace inclusive. Outermost
    functions only: a nested function or a closure counts in its parent."""
    out = []
    pos = 0
    while m := FN_ITEM.search(code, pos):
        k = item_body(code, m.end())
        if k == len(code) or code[k] == ";":
            # A declaration with no body, in a trait or an extern block.
            pos = k + 1
            continue
        end = matching_brace(code, k)
        first = code.count("\n", 0, m.start()) + 1
        out.append((m.group(1), first, code.count("\n", m.start(), end) + 1))
        pos = end + 1
    return out


def item_body(code: str, start: int) -> int:
    """The index of the `{` that opens the body of the item whose text goes on at `start`, or of
    the `;` that ends it first (either outside parentheses and brackets, so `[u8; 4]` in a
    signature is neither), or the end of `code`."""
    depth = 0
    for k in range(start, len(code)):
        if code[k] in "([":
            depth += 1
        elif code[k] in ")]":
            depth -= 1
        elif depth <= 0 and code[k] in "{;":
            return k
    return len(code)


def matching_brace(code: str, start: int) -> int:
    """The index of the `}` that closes the `{` at `start` (the end of `code` if none does)."""
    depth = 0
    for k in range(start, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code)


def expand_use_tree(tree: str) -> list[list[str]]:
    """`a::{b, c::{d, e as f}, *}` into [[a, b], [a, c, d], [a, c, e], [a, *]]."""
    tree = re.sub(r"\s+", "", tree)

    def parse(s: str, prefix: list[str]) -> list[list[str]]:
        out: list[list[str]] = []
        # split s at top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            brace = p.find("{")
            if brace >= 0:
                head = [x for x in p[:brace].split("::") if x]
                out += parse(p[brace + 1 : p.rfind("}")], prefix + head)
            else:
                p = re.sub(r"as\w+$", "", p) if re.search(r"\w+as\w+$", p) else p
                segs = [x for x in p.split("::") if x]
                out.append(prefix + segs)
        return out

    return parse(tree, [])


class Module:
    def __init__(self, path: Path, name: list[str], is_dir_owner: bool):
        self.path = path
        self.name = name  # module path from the crate root
        self.is_dir_owner = is_dir_owner  # lib.rs, main.rs, mod.rs
        self.children: dict[str, Module] = {}
        self.test = False
        self.code = ""
        self.reexports: dict[str, list[str]] = {}  # name -> absolute path of what it re-exports


class Crate:
    def __init__(self, root: Path):
        self.root = Module(root, [], True)
        self.modules: list[Module] = []
        self._load(self.root, test=False)

    def _load(self, m: Module, test: bool) -> None:
        m.test = test or m.path.name == "tests.rs" or m.path.name.endswith("_tests.rs")
        raw = m.path.read_text()
        code = strip_comments_and_strings(raw)
        m.full_code = code
        m.code = strip_test_blocks(code)
        self.modules.append(m)
        base = m.path.parent if m.is_dir_owner else m.path.parent / m.path.stem
        raw_lines = raw.splitlines()
        for decl in MOD_DECL.finditer(code):
            name = decl.group(1)
            attrs = attributes(raw_lines, code.count("\n", 0, decl.start()))
            child_test = test or any(re.search(r"#\[cfg\(test\)\]", a) for a in attrs)
            where = [re.search(r'#\[path\s*=\s*"([^"]+)"\s*\]', a) for a in attrs]
            named = [w.group(1) for w in where if w]
            if named:
                # `#[path = "x.rs"] mod y;` names its file relative to the declaring file's folder.
                cands = [(m.path.parent / named[0], True)]
            else:
                cands = [(base / f"{name}.rs", False), (base / name / "mod.rs", True)]
            for cand, owner in cands:
                if cand.exists():
                    child = Module(cand, m.name + [name], owner)
                    # Two declarations of one name under exclusive cfgs (a stand-in for a
                    # feature left out): the first is the module paths resolve to.
                    m.children.setdefault(name, child)
                    self._load(child, child_test)
                    break

    def find(self, name: list[str]) -> Module | None:
        m = self.root
        for seg in name:
            m = m.children.get(seg)
            if m is None:
                return None
        return m

    def absolute(self, m: Module, segs: list[str]) -> list[str] | None:
        """A use path written in module `m` as an absolute module path, or None (external)."""
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "super"):
            base = list(m.name)
            while segs and segs[0] in ("self", "super"):
                if segs[0] == "super":
                    if not base:
                        return None
                    base.pop()
                segs = segs[1:]
            return base + segs
        if segs[0] in m.children:
            return m.name + segs
        return None

    def resolve(self, path: list[str], seen: set | None = None) -> Module | None:
        """The file that defines the item at `path` (following `pub use` re-exports)."""
        seen = seen or set()
        m = self.root
        rest = list(path)
        while rest and rest[0] in m.children:
            m = m.children[rest.pop(0)]
        if rest and rest[0] in m.reexports and (m.path, rest[0]) not in seen:
            seen.add((m.path, rest[0]))
            target = self.resolve(m.reexports[rest[0]] + rest[1:], seen)
            if target is not None:
                return target
        return m

    def collect_reexports(self) -> None:
        for m in self.modules:
            for stmt in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", m.code):
                for segs in expand_use_tree(stmt.group(1)):
                    if segs[-1] in ("*", "self"):
                        continue
                    absolute = self.absolute(m, segs)
                    if absolute is not None:
                        m.reexports[segs[-1]] = absolute

    def edges(self) -> dict[Path, set[Path]]:
        self.collect_reexports()
        out: dict[Path, set[Path]] = {}
        for m in self.modules:
            if m.test:
                continue
            targets: set[Path] = set()
            code = m.code
            paths: list[list[str]] = []
            for stmt in USE_STMT.finditer(code):
                if re.match(r"\s*pub", code[max(0, stmt.start() - 12) : stmt.start()][-12:].split("\n")[-1]):
                    # A re-export is structure, resolved through, not a use.
                    prefix = code[max(0, stmt.start() - 12) : stmt.start()]
                    if re.search(r"pub(\([^)]*\))?\s*$", prefix):
                        continue
                paths += expand_use_tree(stmt.group(1))
            for p in PATH_RE.finditer(USE_STMT.sub(" ", code)):
                paths.append(re.sub(r"\s+", "", p.group(1)).split("::"))
            for child in m.children:
                for p in re.finditer(rf"(?<![\w:]){child}::(\w+)", USE_STMT.sub(" ", code)):
                    paths.append([child, p.group(1)])
            for segs in paths:
                absolute = self.absolute(m, segs)
                if absolute is None:
                    continue
                target = self.resolve([s for s in absolute if s not in ("*", "self")])
                if target is not None and target is not m and not target.test:
                    targets.add(target.path)
            out[m.path] = targets
        return out


def cycles(edges: dict) -> list[list]:
    """Strongly connected components with more than one node (Tarjan); nodes are files or crate
    names."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list[list] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


# The tiers, lowest first: a crate may depend on crates of a lower tier; only tools on tools.
TIERS = ["model", "core", "library", "function", "tool"]
SAME_TIER_ALLOWED = {"tool"}


def workspace_manifests(root: Path) -> dict[str, tuple[Path, dict]]:
    """Each workspace member's package name -> (manifest path, parsed manifest)."""
    workspace = tomllib.loads((root / "Cargo.toml").read_text())["workspace"]
    out = {}
    for pattern in workspace.get("members", []):
        for member in sorted(root.glob(pattern)):
            manifest = member / "Cargo.toml"
            if manifest.exists():
                data = tomllib.loads(manifest.read_text())
                out[data["package"]["name"]] = (manifest, data)
    return out


def crate_problems(root: Path) -> list[str]:
    """The crate rules: declared tiers, dependencies only downwards, no dependency loop."""
    crates = workspace_manifests(root)
    problems = []
    tier: dict[str, int] = {}
    for name, (manifest, data) in crates.items():
        declared = data["package"].get("metadata", {}).get("sheetlog", {}).get("tier")
        if declared not in TIERS:
            problems.append(
                f"{manifest.relative_to(root)}: declares no tier ([package.metadata.sheetlog] "
                f"tier = one of {', '.join(TIERS)}), got {declared!r}"
            )
            continue
        tier[name] = TIERS.index(declared)
    edges: dict[str, set[str]] = {name: set() for name in crates}
    for name, (manifest, data) in crates.items():
        for section in ("dependencies", "dev-dependencies", "build-dependencies"):
            for dep in data.get(section, {}):
                if dep not in crates or dep == name:
                    continue
                edges[name].add(dep)
                if section != "dependencies" or name not in tier or dep not in tier:
                    continue
                if tier[dep] > tier[name] or (
                    tier[dep] == tier[name] and TIERS[tier[name]] not in SAME_TIER_ALLOWED
                ):
                    problems.append(
                        f"{manifest.relative_to(root)}: {name} ({TIERS[tier[name]]}) depends on "
                        f"{dep} ({TIERS[tier[dep]]}); a crate depends only on lower tiers"
                    )
    for loop in crate_loops(edges):
        problems.append("dependency loop (dev-dependencies included): " + " -> ".join(loop + loop[:1]))
    return problems


def crate_loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of more than one crate, as a list of names."""
    return [sorted(comp) for comp in cycles(edges)]


def typescript_problems(root: Path) -> list[str]:
    """Non-test TypeScript files over MAX_TS_LINES."""
    problems = []
    for folder in TS_SOURCES:
        for path in sorted((root / folder).rglob("*.ts")):
            lines = path.read_text().count("\n")
            if lines > MAX_TS_LINES:
                problems.append(
                    f"{path.relative_to(root)}: {lines} lines (TypeScript sources stay within {MAX_TS_LINES})"
                )
    return problems


def function_problems(long: dict[tuple[str, str], list[tuple[int, int]]]) -> list[str]:
    """The function rule, given each non-test function over MAX_FN_LINES ((path, name) -> its
    (line, length) for each function of that name): every one is listed in LONG_FUNCTIONS, which
    holds at most MAX_LONG_FUNCTIONS entries, each with a reason and each still over the limit."""
    problems = []
    if len(LONG_FUNCTIONS) > MAX_LONG_FUNCTIONS:
        problems.append(
            f"LONG_FUNCTIONS lists {len(LONG_FUNCTIONS)} functions; at most {MAX_LONG_FUNCTIONS} "
            "may be excepted: split one instead"
        )
    for (path, name), why in sorted(LONG_FUNCTIONS.items()):
        if (path, name) not in long:
            problems.append(
                f"LONG_FUNCTIONS lists {path} `fn {name}`, which no longer exists or is no longer "
                f"over {MAX_FN_LINES} lines; remove the entry"
            )
        if not why.strip():
            problems.append(f"LONG_FUNCTIONS lists {path} `fn {name}` without a reason")
    for (path, name), found in sorted(long.items(), key=lambda item: (item[0][0], min(item[1]))):
        if (path, name) in LONG_FUNCTIONS:
            continue
        for line, lines in found:
            problems.append(
                f"{path}:{line}: fn {name} is {lines} lines (non-test functions stay within "
                f"{MAX_FN_LINES}; split it, or list it in LONG_FUNCTIONS with its reason)"
            )
    return problems


def crate_roots(root: Path) -> list[Path]:
    roots = []
    for manifest in sorted(root.glob("functions/*/Cargo.toml")) + [root / "tests/Cargo.toml"]:
        src = manifest.parent / "src"
        for name in ("lib.rs", "main.rs"):
            if (src / name).exists():
                roots.append(src / name)
        roots += sorted((src / "bin").glob("*.rs")) if (src / "bin").exists() else []
    return roots


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else ".").resolve()
    problems = crate_problems(root) + typescript_problems(root)
    seen_files: set[Path] = set()
    long: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for crate_root in crate_roots(root):
        crate = Crate(crate_root)
        edges = crate.edges()
        for comp in cycles(edges):
            names = [str(p.relative_to(root)) for p in comp]
            detail = []
            for p in comp:
                for q in sorted(edges[p] & set(comp)):
                    detail.append(f"{p.relative_to(root)} -> {q.relative_to(root)}")
            problems.append(
                "import circle between " + ", ".join(names) + "\n    " + "\n    ".join(detail)
            )
        for m in crate.modules:
            if m.test or m.path in seen_files:
                continue
            seen_files.add(m.path)
            header = "\n".join(
                line for line in m.path.read_text().splitlines() if line.lstrip().startswith("//!")
            )
            for name, child in sorted(m.children.items()):
                if child.test or any(
                    re.search(rf"\b{re.escape(n)}\b", header) for n in (name, child.path.stem)
                ):
                    continue
                problems.append(
                    f"{m.path.relative_to(root)}: its //! header does not name its module `{name}` "
                    f"({child.path.relative_to(root)}); add a line for it"
                )
            lines = m.path.read_text().count("\n")
            if lines > MAX_LINES:
                problems.append(
                    f"{m.path.relative_to(root)}: {lines} lines (non-test files stay within {MAX_LINES})"
                )
            for name, line, length in functions(m.code):
                if length > MAX_FN_LINES:
                    long.setdefault((m.path.relative_to(root).as_posix(), name), []).append((line, length))
    problems += function_problems(long)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_modules: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(
        f"check_modules: no import circles, no non-test source file over {MAX_LINES} lines, "
        "every module named in its parent's header, every crate in its tier, no dependency loop, "
        f"no TypeScript source over {MAX_TS_LINES} lines, no non-test function over {MAX_FN_LINES} "
        f"lines but the {len(LONG_FUNCTIONS)} listed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
