"""Tests of check_modules.py: each rule fails on a planted violation in a small workspace, and
the repository itself passes."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

import check_modules

REPO = Path(__file__).resolve().parents[2]


def manifest(name: str, tier: str | None, deps=(), dev_deps=()) -> str:
    out = f'[package]\nname = "{name}"\nversion = "0.1.0"\n'
    if tier is not None:
        out += f'\n[package.metadata.sheetlog]\ntier = "{tier}"\n'
    out += "\n[dependencies]\n" + "".join(f'{d} = {{ path = "../{d}" }}\n' for d in deps)
    out += "\n[dev-dependencies]\n" + "".join(f'{d} = {{ path = "../{d}" }}\n' for d in dev_deps)
    return out


class Workspace:
    """A throwaway workspace: crates under functions/, each with a src/lib.rs."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        (self.root / "Cargo.toml").write_text('[workspace]\nmembers = ["functions/*"]\n')

    def crate(self, name: str, tier: str | None, deps=(), dev_deps=(), files=None) -> None:
        base = self.root / "functions" / name
        (base / "src").mkdir(parents=True)
        (base / "Cargo.toml").write_text(manifest(name, tier, deps, dev_deps))
        for rel, text in (files or {"lib.rs": "//! A crate.\n"}).items():
            (base / "src" / rel).write_text(text)

    def problems(self) -> list[str]:
        return check_modules.crate_problems(self.root)

    def run(self) -> int:
        return check_modules.main(["check_modules.py", str(self.root)])


class CrateRules(unittest.TestCase):
    def setUp(self) -> None:
        self.ws = Workspace()
        self.addCleanup(self.ws.dir.cleanup)
        self.ws.crate("core", "core")
        self.ws.crate("api", "function", deps=["core"])

    def test_a_clean_workspace_passes(self) -> None:
        self.assertEqual(self.ws.problems(), [])
        self.assertEqual(self.ws.run(), 0)

    def test_a_function_crate_may_not_depend_on_another(self) -> None:
        self.ws.crate("writer", "function", deps=["core", "api"])
        problems = self.ws.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("writer (function) depends on api (function)", problems[0])

    def test_a_lower_tier_may_not_depend_on_a_higher_one(self) -> None:
        self.ws.crate("model", "model", deps=["core"])
        self.assertIn("model (model) depends on core (core)", "\n".join(self.ws.problems()))

    def test_tools_may_use_tools(self) -> None:
        self.ws.crate("harness", "tool", deps=["api"])
        self.ws.crate("cli", "tool", deps=["harness", "api"])
        self.assertEqual(self.ws.problems(), [])

    def test_every_crate_declares_its_tier(self) -> None:
        self.ws.crate("stray", None)
        self.ws.crate("odd", "middleware")
        problems = "\n".join(self.ws.problems())
        self.assertIn("stray", problems)
        self.assertIn("'middleware'", problems)

    def test_a_loop_through_dev_dependencies_is_found(self) -> None:
        self.ws.crate("harness", "tool", deps=["runner"])
        self.ws.crate("runner", "tool", dev_deps=["harness"])
        problems = self.ws.problems()
        self.assertEqual(problems, ["dependency loop (dev-dependencies included): harness -> runner -> harness"])

    def test_no_loop_is_excepted(self) -> None:
        # The CLI and the harness used each other until the local stack and the client left the
        # CLI's crate (sheetlog-local, sheetlog-client): that loop is an error like any other.
        self.ws.crate("sheetlog-tests", "tool", deps=["sheetlog"])
        self.ws.crate("sheetlog", "tool", dev_deps=["sheetlog-tests"])
        self.assertEqual(
            self.ws.problems(),
            ["dependency loop (dev-dependencies included): sheetlog -> sheetlog-tests -> sheetlog"],
        )


class FileRules(unittest.TestCase):
    def setUp(self) -> None:
        self.ws = Workspace()
        self.addCleanup(self.ws.dir.cleanup)

    def test_an_import_circle_between_files_fails(self) -> None:
        self.ws.crate(
            "core",
            "core",
            files={
                "lib.rs": "//! - `a.rs`\n//! - `b.rs`\nmod a;\nmod b;\n",
                "a.rs": "use crate::b::B;\npub struct A;\n",
                "b.rs": "use crate::a::A;\npub struct B;\n",
            },
        )
        self.assertEqual(self.ws.run(), 1)

    def test_a_module_missing_from_its_parents_header_fails(self) -> None:
        self.ws.crate("core", "core", files={"lib.rs": "//! Nothing listed.\nmod hidden;\n", "hidden.rs": ""})
        self.assertEqual(self.ws.run(), 1)

    def test_a_long_file_fails(self) -> None:
        self.ws.crate("core", "core", files={"lib.rs": "//! Long.\n" + "// line\n" * 901})
        self.assertEqual(self.ws.run(), 1)


class TypeScriptRules(unittest.TestCase):
    def test_a_long_typescript_source_fails_and_a_long_test_does_not(self) -> None:
        ws = Workspace()
        self.addCleanup(ws.dir.cleanup)
        (ws.root / "web/src").mkdir(parents=True)
        (ws.root / "web/test").mkdir(parents=True)
        (ws.root / "web/src/ok.ts").write_text("export {};\n" * 600)
        (ws.root / "web/test/long.test.ts").write_text("export {};\n" * 700)
        self.assertEqual(check_modules.typescript_problems(ws.root), [])
        (ws.root / "web/src/long.ts").write_text("export {};\n" * 601)
        problems = check_modules.typescript_problems(ws.root)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("web/src/long.ts: 601 lines", problems[0])


class Repository(unittest.TestCase):
    def test_the_repository_keeps_every_rule(self) -> None:
        self.assertEqual(check_modules.crate_problems(REPO), [])
        self.assertEqual(check_modules.typescript_problems(REPO), [])


if __name__ == "__main__":
    unittest.main()
