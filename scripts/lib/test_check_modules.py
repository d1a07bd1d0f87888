"""Tests of check_modules.py: each rule fails on a planted violation in a small workspace, and
the repository itself passes."""

from __future__ import annotations

import contextlib
import io
import tempfile
import unittest
from pathlib import Path
from unittest import mock

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
        return self.check()[0]

    def check(self) -> tuple[int, str]:
        """The whole check's exit code and what it printed."""
        out = io.StringIO()
        with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
            code = check_modules.main(["check_modules.py", str(self.root)])
        return code, out.getvalue()


def function(name: str, lines: int, signature: str = "()") -> str:
    """A Rust function of exactly `lines` lines, from its `fn` line to its closing brace."""
    return f"pub fn {name}{signature} {{\n" + "    let _ = 1;\n" * (lines - 2) + "}\n"


class Lexing(unittest.TestCase):
    def test_strings_and_comments_are_blanked_keeping_lines(self) -> None:
        src = 'let a = br#"{"k":"}"#;\nlet b = r"\\";\nlet c = \'{\'; // }\nlet d = "}\\"{";\n'
        self.assertEqual(
            check_modules.strip_comments_and_strings(src),
            'let a = "";\nlet b = "";\nlet c = \' \'; \nlet d = "";\n',
        )


    def test_a_test_item_is_blanked_whole_keeping_lines(self) -> None:
        src = "#[cfg(test)]\nfn f(k: [u8; 4]) {\n    g();\n}\nfn h() {}\n"
        self.assertEqual(check_modules.strip_test_blocks(src), "\n\n\n\nfn h() {}\n")
        self.assertEqual(check_modules.strip_test_blocks("#[cfg(test)]\nmod tests;\nmod a;\n"), "\n\nmod a;\n")


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
        code, out = self.ws.check()
        self.assertEqual(code, 1)
        self.assertIn("import circle between functions/core/src/a.rs, functions/core/src/b.rs", out)

    def test_a_module_missing_from_its_parents_header_fails(self) -> None:
        self.ws.crate("core", "core", files={"lib.rs": "//! Nothing listed.\nmod hidden;\n", "hidden.rs": ""})
        code, out = self.ws.check()
        self.assertEqual(code, 1)
        self.assertIn("functions/core/src/lib.rs: its //! header does not name its module `hidden`", out)

    def test_a_module_at_a_path_attribute_is_checked(self) -> None:
        lib = '//! - `pushes` (`chaos_pushes.rs`)\n#[path = "chaos_pushes.rs"]\nmod pushes;\n'
        self.ws.crate("core", "core", files={"lib.rs": lib, "chaos_pushes.rs": "// line\n" * 900})
        self.assertEqual(self.ws.run(), 0, "a header may name the module by its file")
        (self.ws.root / "functions/core/src/chaos_pushes.rs").write_text("// line\n" * 901)
        self.assertIn("functions/core/src/chaos_pushes.rs: 901 lines", self.ws.check()[1])

    def test_only_the_attributes_just_above_a_module_make_it_test_code(self) -> None:
        lib = "//! - `real`\n#[cfg(test)]\nmod tests;\nmod real;\n"
        self.ws.crate("core", "core", files={"lib.rs": lib, "tests.rs": "", "real.rs": "// line\n" * 901})
        self.assertIn("functions/core/src/real.rs: 901 lines", self.ws.check()[1])

    def test_a_long_file_fails(self) -> None:
        self.ws.crate("core", "core", files={"lib.rs": "//! Long.\n" + "// line\n" * 900})
        code, out = self.ws.check()
        self.assertEqual(code, 1)
        self.assertIn("functions/core/src/lib.rs: 901 lines", out)


class FunctionRules(unittest.TestCase):
    """No non-test Rust function over 100 lines but the at most five LONG_FUNCTIONS lists."""

    def setUp(self) -> None:
        self.ws = Workspace()
        self.addCleanup(self.ws.dir.cleanup)
        patch = mock.patch.object(check_modules, "LONG_FUNCTIONS", {})
        patch.start()
        self.addCleanup(patch.stop)

    def lib(self, text: str, **files: str) -> None:
        self.ws.crate("core", "core", files={"lib.rs": text, **files})

    def test_a_function_over_100_lines_fails_naming_file_function_and_length(self) -> None:
        self.lib("//! Long.\n\n" + function("short", 100) + function("long", 101))
        code, out = self.ws.check()
        self.assertEqual(code, 1)
        self.assertIn("functions/core/src/lib.rs:103: fn long is 101 lines", out)
        self.assertNotIn("fn short", out)

    def test_lines_are_counted_from_fn_to_brace_with_comments_strings_and_nesting_inside(self) -> None:
        body = (
            "pub async fn outer(key: [u8; 4]) -> Result<(), ()> {\n"
            "    // a comment with a brace }\n"
            '    let s = "}}}";\n'
            "    let f = |x: u8| {\n"
            + "        let _ = x;\n" * 40
            + "    };\n"
            "    fn inner() {\n"
            + "        let _ = '}';\n" * 50
            + "    }\n"
            "    Ok(())\n"
            "}\n"
        )
        blanked = check_modules.strip_comments_and_strings(body)
        self.assertEqual(check_modules.functions(blanked), [("outer", 1, 99)])
        self.assertEqual(check_modules.functions("trait T {\n    fn declared(&self);\n}\n"), [])
        self.lib("//! Nested.\n" + body.replace("Ok(())\n", "Ok(())\n" * 3))
        code, out = self.ws.check()
        self.assertIn("fn outer is 101 lines", out)
        self.assertNotIn("inner", out)

    def test_test_code_is_not_counted(self) -> None:
        self.lib(
            "//! - `other`\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod helpers;\nmod other;\n"
            "#[cfg(test)]\nmod inline {\n" + function("long_inline", 150) + "}\n"
            "#[cfg(test)]\n" + function("long_item", 150),
            **{
                "tests.rs": function("long_test", 150),
                "helpers.rs": function("long_helper", 150),
                "other.rs": "//! - `more`\n#[cfg(test)]\nmod more;\n",
            },
        )
        (self.ws.root / "functions/core/src/other").mkdir(exist_ok=True)
        (self.ws.root / "functions/core/src/other/more.rs").write_text(function("long_more", 150))
        tests = self.ws.root / "functions/core/tests"
        tests.mkdir()
        (tests / "integration.rs").write_text(function("long_integration", 150))
        code, out = self.ws.check()
        self.assertEqual(code, 0, out)

    def test_a_listed_exception_passes(self) -> None:
        self.lib("//! Long.\n" + function("long", 150))
        check_modules.LONG_FUNCTIONS[("functions/core/src/lib.rs", "long")] = "a table of cases"
        self.assertEqual(self.ws.run(), 0)

    def test_more_than_five_exceptions_fail(self) -> None:
        self.lib("//! Long.\n" + "".join(function(f"long{i}", 150) for i in range(6)))
        for i in range(6):
            check_modules.LONG_FUNCTIONS[("functions/core/src/lib.rs", f"long{i}")] = "why"
        code, out = self.ws.check()
        self.assertEqual(code, 1)
        self.assertIn("LONG_FUNCTIONS lists 6 functions; at most 5", out)
        del check_modules.LONG_FUNCTIONS[("functions/core/src/lib.rs", "long5")]
        self.assertEqual(self.ws.check()[0], 1, "long5 is no longer excepted")
        self.lib_rewrite("//! Long.\n" + "".join(function(f"long{i}", 150) for i in range(5)))
        self.assertEqual(self.ws.run(), 0)

    def lib_rewrite(self, text: str) -> None:
        (self.ws.root / "functions/core/src/lib.rs").write_text(text)

    def test_a_stale_exception_fails(self) -> None:
        self.lib("//! Short.\n" + function("was_long", 100))
        check_modules.LONG_FUNCTIONS[("functions/core/src/lib.rs", "was_long")] = "it was long"
        code, out = self.ws.check()
        self.assertEqual(code, 1)
        self.assertIn("functions/core/src/lib.rs `fn was_long`, which no longer exists or is no longer over 100", out)
        check_modules.LONG_FUNCTIONS.clear()
        check_modules.LONG_FUNCTIONS[("functions/core/src/gone.rs", "gone")] = "the file was removed"
        self.assertEqual(self.ws.run(), 1)

    def test_an_exception_needs_a_reason(self) -> None:
        self.lib("//! Long.\n" + function("long", 150))
        check_modules.LONG_FUNCTIONS[("functions/core/src/lib.rs", "long")] = " "
        self.assertIn("without a reason", self.ws.check()[1])


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
        code, out = ws.check()
        self.assertEqual(code, 1)
        self.assertIn("web/src/long.ts: 601 lines", out)


class CleanTree(unittest.TestCase):
    def test_a_tree_at_every_limit_passes(self) -> None:
        """Tiers kept, headers complete, no circle, a file of 900 lines, a function of 100, a
        TypeScript source of 600, long test code: the whole check passes."""
        ws = Workspace()
        self.addCleanup(ws.dir.cleanup)
        ws.crate("sheet", "model")
        ws.crate(
            "core",
            "core",
            deps=["sheet"],
            files={
                "lib.rs": "//! - `log` (`log/mod.rs`)\n//! - `ports.rs`\nmod log;\nmod ports;\n#[cfg(test)]\nmod tests;\n",
                "ports.rs": "//! Ports.\npub trait Store {\n    fn get(&self, k: [u8; 4]) -> u8;\n}\n",
                "tests.rs": function("long_test", 500),
            },
        )
        (ws.root / "functions/core/src/log").mkdir()
        (ws.root / "functions/core/src/log/mod.rs").write_text(
            "//! - `append.rs`\nmod append;\nuse crate::ports::Store;\n"
            + function("longest", 100)
            + "// padding\n" * (900 - 3 - 100)
        )
        (ws.root / "functions/core/src/log/append.rs").write_text("use super::*;\n" + function("short", 10))
        ws.crate("api", "function", deps=["core"])
        ws.crate("cli", "tool", deps=["api", "core"], dev_deps=["harness"])
        ws.crate("harness", "tool", deps=["core"])
        (ws.root / "web/src").mkdir(parents=True)
        (ws.root / "web/src/page.ts").write_text("export {};\n" * 600)
        with mock.patch.object(check_modules, "LONG_FUNCTIONS", {}):
            code, out = ws.check()
        self.assertEqual(code, 0, out)
        self.assertIn("check_modules: no import circles", out)
        self.assertEqual((ws.root / "functions/core/src/log/mod.rs").read_text().count("\n"), 900)


class Repository(unittest.TestCase):
    def test_the_repository_keeps_every_rule(self) -> None:
        self.assertEqual(check_modules.crate_problems(REPO), [])
        self.assertEqual(check_modules.typescript_problems(REPO), [])


if __name__ == "__main__":
    unittest.main()
