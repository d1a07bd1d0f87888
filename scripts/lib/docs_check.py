"""Docs that cannot drift: checks README.md and docs/*.md against the tree.

Run by ./scripts/check-docs (part of ./scripts/test). It fails when
- a figure names a bench JSON key (`key` = 1.5 in prose, or a table row whose cell lists the
  keys) and disagrees with the committed bench output docs/bench/<bench>.json, or (in prose) names
  a key that no committed output has, or one that two outputs give different values. Every
  output's keys are merged; `<bench>.key` names a key of one output (`chaos.anomalies`, with `_`
  for `-` in the file name), which a key that is not snake_case or is in two outputs needs;
- a sentence states a push's or a pull's cost in request units without naming the bench key it
  comes from (a key of a bench whose output is not committed names its source but is not compared);
- a doc names a repository path (a link, or a backticked path under a top-level folder) that does
  not exist;
- a doc names a DynamoDB table the stack does not have, or counts "the N tables" wrongly;
- a doc names a CDK setting (`-c key=…`, or a row of docs/deploy.md's configuration table) that
  cdk/lib/config.ts does not read;
- docs/architecture.md has no "Where to find" section, or one of fewer than 25 entries (table
  rows or list items), or an entry that names no file, or names one by anything but its path
  from the repository root, or a path that does not exist (issue 43).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
}
TOP_DIRS = ("functions", "cdk", "docs", "scripts", "tests", "web", "clients")
# Words before "table" that are not table names.
NOT_TABLES = {
    "The", "A", "An", "Each", "Every", "This", "That", "One", "Any", "Its", "Which", "DynamoDB",
    "Another", "No", "Global", "Markdown", "Same", "New", "Restored", "Source", "Target",
}
# A bench key: snake_case, and for a nested object's figure, its path with dots
# (`sheetlog_500b.wru_per_append`).
KEY = r"[a-z][a-z0-9]*(?:[_.][a-z0-9]+)+"
NUM = r"-?\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:RRU|WRU|read units?|write units?)"
SIZE_UNITS = {"KB": 1e3, "MB": 1e6, "GB": 1e9}
# The index from a concept to its files (issue 43): which doc holds it, and how many entries.
WHERE_TO_FIND_DOC = "docs/architecture.md"
WHERE_TO_FIND_MIN = 25
# A backticked token that names a file or folder: `a/b/c.rs`, `docs/bench/`, `Cargo.toml`. Not a
# route (`/logs/…`), a placeholder or glob (`functions/*/…`), or a Rust path (`a::b`).
PATH_LIKE = re.compile(r"^[\w.-]+(?:/[\w.-]*)+$|^[\w.-]+\.(?:rs|ts|mts|mjs|js|json|py|md|toml|sh)$")


@dataclass
class Facts:
    """What the docs are checked against."""

    bench: dict[str, float]
    tables: set[str]
    settings: set[str]
    exists: object  # callable: str -> bool (a repository path)
    # Bare keys that two bench outputs give different values: a doc must say `<bench>.key`.
    ambiguous: dict[str, list[str]] = field(default_factory=dict)


def bench_figures(outputs: dict[str, dict]) -> tuple[dict[str, float], dict[str, list[str]]]:
    """The figures of the bench outputs (file stem -> JSON object), each by its key (a nested
    object's by its dotted path) and by `<stem>.<key>`; and the bare keys that two outputs give
    different values, which only the qualified name can state."""
    by_key: dict[str, dict[str, float]] = {}

    def add(stem: str, prefix: str, obj: dict) -> None:
        for k, v in obj.items():
            if isinstance(v, dict):
                add(stem, f"{prefix}{k}.", v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                by_key.setdefault(prefix + k, {})[stem] = float(v)

    for stem, obj in outputs.items():
        add(stem, "", obj)
    bench = {
        f"{stem.replace('-', '_')}.{key}": v for key, values in by_key.items() for stem, v in values.items()
    }
    ambiguous = {}
    for key, values in by_key.items():
        if len(set(values.values())) > 1:
            ambiguous[key] = sorted(values)
        else:
            bench[key] = next(iter(values.values()))
    return bench, ambiguous


def number(text: str) -> float:
    return float(text.replace(",", ""))


def agrees(doc: str, value: float) -> bool:
    """A documented figure agrees when it is the JSON value at the figure's precision."""
    decimals = len(doc.split(".")[1]) if "." in doc else 0
    return abs(round(value, decimals) - number(doc)) < 1e-9 or abs(value - number(doc)) < 1e-9


def blocks(text: str) -> list[tuple[int, str]]:
    """The prose of a Markdown file as (first line, text): each paragraph or list item joined
    into one line (docs are hard-wrapped), each table row on its own; code blocks left out."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    in_code = False

    def flush() -> None:
        if current:
            out.append((start, " ".join(current)))
            current.clear()

    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        if not stripped or stripped.startswith("#"):
            flush()
            if stripped:
                out.append((lineno, stripped))
            continue
        if stripped.startswith("|"):
            flush()
            out.append((lineno, stripped))
            continue
        if re.match(r"^([-*+]|\d+\.) ", stripped):
            flush()
        if not current:
            start = lineno
        current.append(stripped)
    flush()
    return out


def check_text(name: str, text: str, facts: Facts) -> list[str]:
    errors: list[str] = []
    for lineno, line in blocks(text):
        where = f"{name}:{lineno}"
        errors += check_figures(where, line, facts)
        errors += check_tables(where, line, facts)
        errors += check_settings(where, line, facts)
        errors += check_paths(where, name, line, facts)
    return errors


def check_figures(where: str, line: str, facts: Facts) -> list[str]:
    errors = []
    for key, doc, size in re.findall(rf"`({KEY})` = ({NUM})(?: (KB|MB|GB)\b)?", line):
        value = facts.bench.get(key)
        if value is not None and size and "bytes" in key.split("_"):
            value /= SIZE_UNITS[size]  # `api_push_request_bytes` = 5.8 MB
        if key in facts.ambiguous:
            errors.append(f"{where}: `{key}` is in {' and '.join(facts.ambiguous[key])} with different values; name it as `<bench>.{key}`")
        elif key not in facts.bench:
            errors.append(f"{where}: `{key}` = {doc}, but no committed bench output (docs/bench/*.json) has `{key}`")
        elif not agrees(doc, value):
            errors.append(f"{where}: `{key}` = {doc}{' ' + size if size else ''}, but the bench output says {facts.bench[key]}")
    if line.startswith("|"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        keys = [k for c in cells for k in re.findall(rf"`({KEY})`", c) if k in facts.bench]
        key_cells = [c for c in cells if re.fullmatch(rf"(?:`{KEY}`[,; ]*)+", c)]
        if keys and key_cells:
            text = " ".join(c for c in cells if c not in key_cells)
            for key in keys:
                value = facts.bench[key]
                unit = {"rru": "RRU", "wru": "WRU", "bytes": "bytes"}.get(key.rsplit("_", 1)[-1])
                # A table whose columns carry the unit states bare numbers.
                pattern = rf"({NUM}) {unit}" if unit and unit in text else rf"({NUM})"
                found = re.findall(pattern, text)
                agreeing = any(agrees(f, value) for f in found)
                if "bytes" in key.split("_") and not agreeing:
                    # Sizes in decimal units, as the benches print them (23.4 MB = 23,400,000 bytes).
                    scaled = re.findall(rf"({NUM}) (KB|MB|GB)\b", text)
                    agreeing = any(agrees(f, value / SIZE_UNITS[u]) for f, u in scaled)
                    found += [f"{f} {u}" for f, u in scaled]
                if not agreeing:
                    errors.append(
                        f"{where}: the row names `{key}` ({value}) but states {found or 'no figure'}"
                    )
    # A push's or pull's cost with no bench key in the same sentence.
    for sentence in [line] if line.startswith("|") else re.split(r"(?<=[.;])\s+", line):
        if re.search(r"\b(push|pull)", sentence, re.I) and re.search(rf"{NUM} ?{UNIT}", sentence):
            # Any key counts as named; only those in committed output can be compared.
            named = re.findall(rf"`({KEY})`", sentence)
            if not named:
                errors.append(f"{where}: a push or pull cost without a bench key: {sentence.strip()[:100]}")
    return errors


def check_tables(where: str, line: str, facts: Facts) -> list[str]:
    errors = []
    for word in re.findall(r"\bthe (\w+) (?:DynamoDB )?tables\b", line, re.I):
        n = NUMBER_WORDS.get(word.lower())
        if n is not None and n != len(facts.tables):
            errors.append(f"{where}: \"the {word} tables\", but the stack has {len(facts.tables)}")
    for name in re.findall(r"\b((?:[A-Z][a-z]+ )*[A-Z][a-z]+) table\b", line):
        words = name.split(" ")
        while words and words[0] in NOT_TABLES:
            words = words[1:]
        if not words:
            continue
        candidate = " ".join(words)
        if candidate not in facts.tables:
            errors.append(f"{where}: the {candidate} table is not one of the stack's ({', '.join(sorted(facts.tables))})")
    return errors


def check_settings(where: str, line: str, facts: Facts) -> list[str]:
    errors = []
    for key in re.findall(r"-c ([A-Za-z][A-Za-z0-9]*)=", line):
        if key != "key" and key not in facts.settings:
            errors.append(f"{where}: -c {key}= is not a setting (cdk/lib/config.ts)")
    return errors


def check_settings_table(name: str, text: str, facts: Facts) -> list[str]:
    """docs/deploy.md's configuration table: every key row names a setting, and every setting has a row."""
    section = text.split("## Configuration", 1)
    if len(section) < 2:
        return [f"{name}: no Configuration section"]
    rows = re.findall(r"^\| `([A-Za-z0-9]+)` \|", section[1].split("\n## ", 1)[0], re.M)
    errors = [f"{name}: the configuration table lists `{k}`, which cdk/lib/config.ts does not read" for k in rows if k not in facts.settings]
    errors += [f"{name}: the configuration table has no row for `{k}`" for k in sorted(facts.settings - set(rows))]
    return errors


def check_paths(where: str, doc: str, line: str, facts: Facts) -> list[str]:
    errors = []
    base = str(Path(doc).parent)
    candidates = []
    for target in re.findall(r"\]\(([^)\s]+)\)", line):
        if re.match(r"^[a-z]+:|^#|^mailto:", target):
            continue
        target = target.split("#", 1)[0]
        if target:
            candidates.append(str(Path(base) / target) if base != "." else target)
    for token in re.findall(r"`([^`\s]+)`", line):
        if token.split("/", 1)[0] in TOP_DIRS and "/" in token:
            candidates.append(re.sub(r":\d+(-\d+)?$", "", token.split("#", 1)[0]))
    for path in candidates:
        if re.search(r"[<>*{}…$]|\.\.\.", path):
            continue
        if not facts.exists(path):
            errors.append(f"{where}: {path} does not exist")
    return errors


def where_to_find_entries(text: str) -> list[tuple[int, str]] | None:
    """The entries of a doc's "Where to find" section, as (line, text): its table's rows (not the
    header row or the separator) and its list items. None when the doc has no such section."""
    found = None
    level = 0
    section: list[tuple[int, str]] = []
    for lineno, line in blocks(text):
        heading = re.match(r"^(#+)\s+(.*)$", line)
        if heading and found is None and heading.group(2).strip().lower() == "where to find":
            found, level = True, len(heading.group(1))
            continue
        if found and heading and len(heading.group(1)) <= level:
            break
        if found:
            section.append((lineno, line))
    if found is None:
        return None
    entries = []
    for i, (lineno, line) in enumerate(section):
        if line.startswith("|"):
            if re.fullmatch(r"[|:\-\s]+", line):
                continue  # the separator
            following = section[i + 1][1] if i + 1 < len(section) else ""
            if re.fullmatch(r"\|[|:\-\s]+", following):
                continue  # the header row
            entries.append((lineno, line))
        elif re.match(r"^([-*+]|\d+\.) ", line):
            entries.append((lineno, line))
    return entries


def check_where_to_find(name: str, text: str, facts: Facts) -> list[str]:
    """The "Where to find" index: present, at least WHERE_TO_FIND_MIN entries, each naming at
    least one file by its path from the repository root, and every path it names existing."""
    entries = where_to_find_entries(text)
    if entries is None:
        return [f"{name}: no \"Where to find\" section (the index from a concept to its files)"]
    errors = []
    if len(entries) < WHERE_TO_FIND_MIN:
        errors.append(
            f"{name}: the \"Where to find\" section has {len(entries)} entries; it needs at least {WHERE_TO_FIND_MIN}"
        )
    for lineno, line in entries:
        where = f"{name}:{lineno}"
        # A path may end in a line (`a.rs:12`) or an anchor (`docs/sync.md#pokes`).
        tokens = [re.sub(r":\d+(-\d+)?$", "", t.split("#", 1)[0]) for t in re.findall(r"`([^`\s]+)`", line)]
        paths = [t for t in tokens if PATH_LIKE.match(t)]
        if not paths:
            errors.append(f"{where}: a \"Where to find\" entry that names no file: {line[:80]}")
        for path in paths:
            if not facts.exists(path):
                # Under a top-level folder, the message check_paths gives, so it is reported once.
                hint = ""
                if path.split("/", 1)[0] not in TOP_DIRS:
                    hint = " (name a file by its path from the repository root)"
                errors.append(f"{where}: {path} does not exist{hint}")
    return errors


def check_doc(name: str, text: str, facts: Facts) -> list[str]:
    """Every check of one doc (its path from the repository root), each problem once."""
    errors = check_text(name, text, facts)
    if name == "docs/deploy.md":
        errors += check_settings_table(name, text, facts)
    if name == WHERE_TO_FIND_DOC:
        errors += check_where_to_find(name, text, facts)
    return list(dict.fromkeys(errors))


def repo_facts(root: Path) -> Facts:
    bench, ambiguous = bench_figures(
        {f.stem: json.loads(f.read_text()) for f in sorted((root / "docs" / "bench").glob("*.json"))}
    )
    stack = (root / "cdk" / "lib" / "stack" / "names.ts").read_text()
    ids = re.search(r"export const LOGICAL_IDS = \{(.*?)\}", stack, re.S)
    tables = set()
    for logical in re.findall(r"'(\w+)Table'", ids.group(1) if ids else ""):
        tables.add(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", logical))
    config = (root / "cdk" / "lib" / "config.ts").read_text()
    keys = re.search(r"CONFIG_CONTEXT_KEYS = \[(.*?)\]", config, re.S)
    settings = set(re.findall(r"'(\w+)'", keys.group(1) if keys else ""))
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.split()
    known = set(tracked)
    for f in tracked:
        parts = f.split("/")
        known.update("/".join(parts[:i]) for i in range(1, len(parts)))

    def exists(path: str) -> bool:
        p = str(Path(path)).rstrip("/")
        if p in known or (root / p).exists():
            return True
        # Build outputs and other ignored paths the docs may name (web/dist, target/…).
        return any(
            subprocess.run(["git", "check-ignore", "-q", "--no-index", q], cwd=root).returncode == 0
            for q in (p, p + "/")
        )

    return Facts(bench=bench, tables=tables, settings=settings, exists=exists, ambiguous=ambiguous)


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    facts = repo_facts(root)
    if not facts.bench:
        print("docs check: no bench output in docs/bench/", file=sys.stderr)
        return 1
    errors: list[str] = []
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        errors += check_doc(str(doc.relative_to(root)), doc.read_text(), facts)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"docs check: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print(f"docs check: {len(facts.bench)} bench keys, {len(facts.tables)} tables, {len(facts.settings)} settings known; no drift")
    return 0


if __name__ == "__main__":
    sys.exit(main())
