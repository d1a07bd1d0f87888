#!/usr/bin/env python3
"""Groups `perf report --no-children --sort dso,symbol --stdio` lines into cost categories.

Used for docs/bench/snapshot-profile-after2.txt and the later snapshot-profile-*.txt:
    perf report -i perf.data --no-children --sort dso,symbol --stdio | python3 scripts/lib/perf_group.py
A symbol counts toward the first category whose pattern it matches.
"""
import re, sys
rules = [
 ("zstd compression", r"ZSTD_|HIST_|FSE_|HUF_"),
 ("SHA-256", r"sha2::|sha256"),
 ("CSV parsing, and since the per-cell path is inlined into it, typing and encoding (read_csv, csv_records, memchr, csv_core, UTF-8 check)", r"csv_core|csv::|csv_records|CsvRecords|memchr|read_csv|read_rows|from_utf8|Utf8Chunks|run_utf8_validation|read_byte_record"),
 ("value inference (infer_*, float parse)", r"infer_|small_integer|small_decimal|looks_numeric|dec2flt|limit_text|ErrorCode"),
 ("chunk encoding (RowWriter, push, write_value, varint, xxh3)", r"RowWriter|ChunkBuilder|write_value|write_cell|write_text|varint|xxh3|EncodingSink|encode_row|codec::"),
 ("malloc/free", r"malloc|_int_free|cfree|free@|unlink_chunk|realloc|_int_realloc|arena|tcache|__libc_free|sysmalloc"),
 ("memmove/memcpy", r"memmove|memcpy|memset"),
 ("sample data generation (bench harness)", r"sample_|fmt::|format_inner|write_csv|alloc::fmt|core::fmt"),
 ("kernel: thread hand-off (wake-ups, context switches, futex/eventfd)", r"\[k\] .*(finish_task_switch|try_to_wake_up|futex|eventfd|schedule|_raw_spin_unlock_irq|__switch_to|pick_next|enqueue|dequeue|ttwu|update_curr|select_task_rq)"),
 ("kernel: filesystem and other kernel work (chunk files, CSV reads, page faults)", r"\[k\]"),
 ("builder and runtime glue (step, Output, tokio)", r"sheetlog_sheet::snapshot|tokio::|mpsc"),
]
tot = {}
lines = []
for line in sys.stdin:
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+(\[.\])\s+(.*?)\s*-?\s*$", line)
    if not m:
        continue
    pct = float(m.group(1)); dso = m.group(2); sym = m.group(3) + " " + m.group(4)
    lines.append(line.rstrip())
    for name, rx in rules:
        if re.search(rx, sym):
            tot[name] = tot.get(name, 0) + pct
            break
    else:
        tot["other"] = tot.get("other", 0) + pct
for name, pct in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"#   {pct:6.1f}%  {name}")
print("# Top symbols (perf report --no-children --sort dso,symbol):")
for l in lines[:40]:
    print(l[:150])
