//! Deterministic sample data shaped like a real business sheet (ids, names, e-mails, cities,
//! prices, quantities, dates, flags, free-text notes, percentages), for tests and benchmarks.
//! Ten columns per row; the same row number always gives the same values.

use std::io::{self, Write};

const CITIES: [&str; 12] = [
    "Amsterdam",
    "Berlin",
    "Cairo",
    "Denver",
    "Edinburgh",
    "Florence",
    "Gdansk",
    "Helsinki",
    "Istanbul",
    "Jakarta",
    "Kyoto",
    "Lisbon",
];
const WORDS: [&str; 16] = [
    "delivered",
    "late",
    "box",
    "damaged",
    "customer",
    "called",
    "refund",
    "pending",
    "urgent",
    "repeat",
    "order",
    "invoice",
    "sent",
    "checked",
    "warehouse",
    "north",
];

/// Columns per sample row.
pub const SAMPLE_COLS: u32 = 10;

fn mix(i: u64) -> u64 {
    // splitmix64: cheap, well-spread, and fixed forever (the data must never change).
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The CSV fields of sample row `i`.
pub fn sample_fields(i: u64) -> [String; 10] {
    let h = mix(i);
    let notes: Vec<&str> = (0..(2 + h % 5))
        .map(|k| WORDS[(mix(h.wrapping_add(k)) % 16) as usize])
        .collect();
    [
        (i + 1).to_string(),
        format!("Customer {:06}", h % 1_000_000),
        format!("user{}@example.com", h % 100_000),
        CITIES[(h >> 8) as usize % CITIES.len()].to_owned(),
        format!("{}.{:02}", (h >> 16) % 1000, (h >> 26) % 100),
        ((h >> 33) % 500).to_string(),
        (44_000 + (h >> 40) % 1500).to_string(),
        if (h >> 50) & 1 == 0 { "TRUE" } else { "FALSE" }.to_owned(),
        notes.join(" "),
        format!("0.{:02}", (h >> 52) % 100),
    ]
}

/// Writes sample rows `0..rows` as CSV.
pub fn write_sample_csv(w: impl Write, rows: u64) -> io::Result<()> {
    write_wide_sample_csv(w, rows, 1)
}

/// Writes `lines` CSV lines of `per_line` sample rows side by side (`10 * per_line` columns), so
/// a big sheet can stay within the sheet's row limit.
pub fn write_wide_sample_csv(mut w: impl Write, lines: u64, per_line: u64) -> io::Result<()> {
    let mut line = String::new();
    for i in 0..lines {
        sample_line(&mut line, i, per_line);
        w.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// Sets `line` to CSV line `i` of [`write_wide_sample_csv`], with its newline.
pub fn sample_line(line: &mut String, i: u64, per_line: u64) {
    line.clear();
    for k in 0..per_line {
        for (j, f) in sample_fields(i * per_line + k).iter().enumerate() {
            if k > 0 || j > 0 {
                line.push(',');
            }
            line.push_str(f);
        }
    }
    line.push('\n');
}
