"""Unit tests of the docs check (scripts/lib/docs_check.py): it must fail on the claims that
drifted before it existed (issue 32) and pass on their corrections."""

import unittest

from docs_check import Facts, check_settings_table, check_text

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


if __name__ == "__main__":
    unittest.main()
