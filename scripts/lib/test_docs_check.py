"""Unit tests of the docs check (scripts/lib/docs_check.py): it must fail on the claims that
drifted before it existed (issue 32) and pass on their corrections."""

import unittest

from pathlib import Path

from docs_check import (
    Facts,
    bench_figures,
    check_doc,
    check_settings_table,
    check_text,
    check_where_to_find,
    repo_facts,
)

FACTS = Facts(
    bench={"api_push_one_mutation_rru": 2.5, "api_push_one_mutation_wru": 4.0, "idle_pull_rru": 0.5,
           "push_one_mutation_rru": 1.5, "push_one_mutation_wru": 4.0,
           "sheetlog_500b.wru_per_append": 1.0, "sheetlog_500b.read_rru": 68.0},
    tables={"Entry", "Segment", "Pending Snapshots", "Dedupe", "Clients"},
    settings={"stackName", "backupPlan"},
    exists=lambda p: p in {"docs/sync.md", "functions/api/src/sync.rs", "functions", "clients/replicache"},
)


def errors(text: str, name: str = "docs/x.md") -> list[str]:
    return check_text(name, text, FACTS)


class OldClaims(unittest.TestCase):
    def test_the_three_tables_fail(self):
        self.assertTrue(errors("To tear down, delete the stack and then\nthe three tables by hand."))
        self.assertFalse(errors("Delete the five tables: Entry, Segment, Pending Snapshots, Dedupe, Clients."))

    def test_the_push_cost_measured_on_push_run_alone_fails(self):
        old = "A push of one mutation costs 4 WRU + 1.5 RRU, and so does a push of 100 one-cell edits."
        self.assertTrue(errors(old), "a push cost with no bench key")
        keyed = "A push of one mutation through the API costs 4 WRU (`api_push_one_mutation_wru` = 4)\n+ 1.5 RRU (`api_push_one_mutation_rru` = 1.5)."
        self.assertTrue(any("2.5" in e for e in errors(keyed)), errors(keyed))
        self.assertFalse(errors(keyed.replace("1.5", "2.5")))

    def test_the_two_unit_pull_fails(self):
        old = "Each unchanged pull read the log's head with no hint: a strong query of the Segment table\nand one of the Entry table, 2 read units."
        self.assertTrue(errors(old))
        self.assertTrue(errors("An unchanged pull costs 2 RRU (`idle_pull_rru` = 2)."))
        self.assertFalse(errors("An unchanged pull costs 0.5 RRU (`idle_pull_rru` = 0.5)."))

    def test_a_nested_figure_is_named_by_its_path(self):
        row = "| 500 B | sheetlog | **1** | 0.5 | 1,000 | {} | `sheetlog_500b.wru_per_append`, `sheetlog_500b.read_rru` |"
        self.assertFalse(errors(row.format("68")))
        self.assertTrue(any("read_rru" in e for e in errors(row.format("69"))), errors(row.format("69")))
        self.assertTrue(errors("A 500 B append writes `sheetlog_500b.wru_per_append` = 2 units."))

    def test_a_cost_table_row_must_agree_with_its_keys(self):
        row = "| push of one mutation | 4 WRU + 1.5 RRU | `api_push_one_mutation_wru`, `api_push_one_mutation_rru` |"
        self.assertTrue(errors(row))
        self.assertFalse(errors(row.replace("1.5 RRU", "2.5 RRU")))


class BenchOutputs(unittest.TestCase):
    OUTPUTS = {
        "pipeline": {"snapshot_chain_lag_s_p99": 10.3, "peak_rss_mb": 20.8},
        "import": {"peak_rss_mb": 24.8, "api_baseline_rss_mb": 22.9},
        "lambda": {"binary_bytes_sheetlog_api": 23_412_345, "zip_bytes_sheetlog_api": 9_187_001,
                   "init_to_ready_ms_sheetlog_api": 8.6, "api_baseline_rss_mb": 22.9},
        "chaos": {"anomalies": 0, "faults_by_kind": {"stale_read": 1234}},
    }

    def facts(self) -> Facts:
        bench, ambiguous = bench_figures(self.OUTPUTS)
        return Facts(bench=bench, tables=set(), settings=set(), exists=lambda p: True, ambiguous=ambiguous)

    def errors(self, text: str) -> list[str]:
        return check_text("README.md", text, self.facts())

    def test_a_figure_naming_a_key_no_output_has_fails(self):
        found = self.errors("Each snapshot's lag (`snapshot_chain_lag_s_p99` = 10.3 s) and (`snapshot_chain_lag_s_p50` = 5.1).")
        self.assertEqual(len(found), 1, found)
        self.assertIn("snapshot_chain_lag_s_p50", found[0])

    def test_a_figure_of_a_new_output_must_agree(self):
        self.assertTrue(self.errors("Lag p99 (`snapshot_chain_lag_s_p99` = 9.9 s)."))
        self.assertFalse(self.errors("No anomaly (`chaos.anomalies` = 0), stale reads `chaos.faults_by_kind.stale_read` = 1,234."))
        self.assertTrue(self.errors("No anomaly (`chaos.anomalies` = 1)."))

    def test_a_key_two_outputs_disagree_on_must_name_its_output(self):
        bare = self.errors("The worker peaks at 20.8 MB (`peak_rss_mb` = 20.8).")
        self.assertTrue(any("pipeline.peak_rss_mb" in e or "<bench>.peak_rss_mb" in e for e in bare), bare)
        self.assertFalse(self.errors("The worker peaks at 20.8 MB (`pipeline.peak_rss_mb` = 20.8)."))
        self.assertTrue(self.errors("The worker peaks at 24.8 MB (`pipeline.peak_rss_mb` = 24.8)."))
        self.assertFalse(self.errors("Before the commit (`api_baseline_rss_mb` = 22.9)."), "the outputs agree")

    def test_sizes_in_mb_agree_with_a_bytes_key_in_a_table_row(self):
        row = "| `sheetlog-api` | {} MB | 9.2 MB | {} ms | `binary_bytes_sheetlog_api`, `zip_bytes_sheetlog_api`, `init_to_ready_ms_sheetlog_api` |"
        self.assertFalse(self.errors(row.format("23.4", "8.6")))
        self.assertTrue(any("binary_bytes" in e for e in self.errors(row.format("23.5", "8.6"))))
        self.assertTrue(any("init_to_ready" in e for e in self.errors(row.format("23.4", "8.7"))))

    def test_a_size_in_mb_in_prose_agrees_with_a_bytes_key(self):
        self.assertFalse(self.errors("The binary is small (`binary_bytes_sheetlog_api` = 23.4 MB)."))
        self.assertTrue(self.errors("The binary is small (`binary_bytes_sheetlog_api` = 23.5 MB)."))
        self.assertTrue(self.errors("The binary is small (`binary_bytes_sheetlog_api` = 23.4)."))

    def test_the_committed_outputs_of_every_bench_the_docs_cite_are_read(self):
        bench = repo_facts(Path(__file__).resolve().parents[2]).bench
        for key in ("snapshot_chain_lag_ms_p99", "chaos.anomalies", "chaos.faults_by_kind.stale_read",
                    "api_peak_rss_mb", "init_to_ready_ms_sheetlog_api"):
            self.assertTrue(key in bench, f"no committed bench output has `{key}`")


class Names(unittest.TestCase):
    def test_a_missing_path_fails_and_a_present_one_passes(self):
        self.assertTrue(errors("See `functions/core/src/aws/dynamo.rs`."))
        self.assertTrue(errors("The client in `clients/replicache-test` runs it."))
        self.assertFalse(errors("See `functions/api/src/sync.rs:431` and [sync](sync.md#cost)."))
        self.assertTrue(errors("See [the runbook](runbook.md)."))

    def test_an_unknown_table_fails(self):
        self.assertTrue(errors("Items go to the Snapshots table."))
        self.assertFalse(errors("Items go to the Pending\nSnapshots table and the Dedupe table; each table is on demand."))

    def test_an_unknown_setting_fails(self):
        self.assertTrue(errors("Deploy with `-c backupPlans=true`."))
        self.assertFalse(errors("Deploy with `-c backupPlan=true -c stackName=x`."))
        table = "## Configuration\n\n| key | default |\n|---|---|\n| `stackName` | `sheetlog` |\n| `backupPlans` | no |\n"
        found = check_settings_table("docs/deploy.md", table, FACTS)
        self.assertTrue(any("backupPlans" in e for e in found))
        self.assertTrue(any("backupPlan`" in e for e in found), found)

    def test_code_blocks_are_not_checked(self):
        self.assertFalse(errors("```\nthe three tables, `functions/nope.rs`\n```\n"))


class WhereToFind(unittest.TestCase):
    """docs/architecture.md's index from a concept to its files (issue 43)."""

    FILES = {f"functions/core/src/f{i}.rs" for i in range(30)} | {"functions", "Cargo.toml", "docs/bench"}
    FACTS = Facts(bench={"k_rru": 1.0}, tables=set(), settings=set(), exists=lambda p: p.rstrip("/") in WhereToFind.FILES)

    def page(self, rows: list[str], heading: str = "## Where to find") -> str:
        table = "| concept | where |\n|---|---|\n" + "".join(f"| {r} |\n" for r in rows)
        return f"# Architecture\n\nText.\n\n{heading}\n\nOne row per concept.\n\n{table}\n## After\n\n| a | b |\n|---|---|\n| x | y |\n"

    def rows(self, n: int) -> list[str]:
        return [f"concept {i} | `functions/core/src/f{i}.rs`" for i in range(n)]

    def errors(self, text: str) -> list[str]:
        return check_doc("docs/architecture.md", text, self.FACTS)

    def test_a_section_of_25_entries_each_naming_files_that_exist_passes(self):
        self.assertEqual(self.errors(self.page(self.rows(25))), [])
        rows = self.rows(24) + ["the benches | `docs/bench/`, `Cargo.toml:3`, `EventLog::append`, `POST /logs/{logId}`"]
        self.assertEqual(self.errors(self.page(rows)), [])
        listed = "# A\n\n## Where to find\n\n" + "".join(f"- concept {i}: `functions/core/src/f{i}.rs`\n" for i in range(25))
        self.assertEqual(self.errors(listed), [])

    def test_a_missing_section_fails(self):
        found = self.errors(self.page(self.rows(25), heading="## Where things are"))
        self.assertEqual(len(found), 1, found)
        self.assertIn("no \"Where to find\" section", found[0])
        self.assertEqual(check_doc("docs/design.md", "# Design\n", self.FACTS), [], "only architecture.md needs one")

    def test_fewer_than_25_entries_fail(self):
        found = self.errors(self.page(self.rows(24)))
        self.assertEqual(len(found), 1, found)
        self.assertIn("has 24 entries; it needs at least 25", found[0])

    def test_the_rows_of_the_next_section_are_not_entries(self):
        text = self.page(self.rows(24)).replace("## After\n\n| a | b |\n|---|---|\n| x | y |\n", "### More\n\n- x `functions/`\n")
        self.assertEqual(self.errors(text), [], "a subsection's items are the section's")
        self.assertTrue(self.errors(self.page(self.rows(24))), "the next section's are not")

    def test_an_entry_naming_a_missing_file_fails_once(self):
        rows = self.rows(25) + ["gone | `functions/core/src/gone.rs`"]
        found = self.errors(self.page(rows))
        self.assertEqual(len(found), 1, found)
        self.assertRegex(found[0], r"^docs/architecture.md:\d+: functions/core/src/gone.rs does not exist$")

    def test_an_entry_naming_a_file_by_a_shortened_path_fails(self):
        found = self.errors(self.page(self.rows(25) + ["retries | `log/retry.rs`"]))
        self.assertEqual(len(found), 1, found)
        self.assertIn("log/retry.rs does not exist (name a file by its path from the repository root)", found[0])

    def test_an_entry_naming_no_file_fails(self):
        found = self.errors(self.page(self.rows(25) + ["append | `EventLog::append` in the core", "x | `Cargo.toml:9`"]))
        self.assertEqual(len(found), 1, found)
        self.assertIn("names no file", found[0])

    def test_the_repositorys_index_passes(self):
        root = Path(__file__).resolve().parents[2]
        text = (root / "docs" / "architecture.md").read_text()
        self.assertEqual(check_where_to_find("docs/architecture.md", text, repo_facts(root)), [])


if __name__ == "__main__":
    unittest.main()
