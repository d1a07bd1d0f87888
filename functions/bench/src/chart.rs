//! Log-log line charts for the docs, drawn with plotters' SVG backend. Text is written as SVG
//! `<text>` in the viewer's sans-serif font, so the file needs no font to draw and stays small.
//!
//! Shared by the `scale` benchmark and the `peers` example (which includes this file by path:
//! an example cannot import from a binary crate).

use std::path::Path;

use plotters::prelude::*;

/// One line of a chart: its legend name, colour and (x, y) points; y values of 0 are drawn at
/// the axis floor (a log axis has no 0).
pub struct Line {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// The colours of up to six lines (ColorBrewer's "Dark2", readable on white and in grey).
pub const COLORS: [RGBColor; 6] = [
    RGBColor(27, 158, 119),
    RGBColor(217, 95, 2),
    RGBColor(117, 112, 179),
    RGBColor(231, 41, 138),
    RGBColor(102, 166, 30),
    RGBColor(166, 118, 29),
];

/// Where the legend goes: a corner the lines leave free.
pub use plotters::chart::SeriesLabelPosition as LegendAt;

/// Writes a 760 x 440 log-log chart of `lines` to `path`.
pub fn log_log_svg(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    legend_at: LegendAt,
    lines: &[Line],
) -> anyhow::Result<()> {
    let points = || lines.iter().flat_map(|l| l.points.iter().copied());
    let positive = |v: f64| v.is_finite() && v > 0.0;
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points() {
        if positive(x) {
            x0 = x0.min(x);
            x1 = x1.max(x);
        }
        if positive(y) {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    anyhow::ensure!(
        x0 <= x1 && y0 <= y1,
        "chart {title:?}: no positive points to draw"
    );
    // Whole decades around the data, so the axis labels are round numbers.
    let decade_below = |v: f64| 10f64.powf(v.log10().floor());
    let decade_above = |v: f64| 10f64.powf(v.log10().ceil());
    let (x0, x1) = (decade_below(x0), decade_above(x1));
    let (y0, y1) = (decade_below(y0), decade_above(y1 * 1.01));

    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(14)
        .margin_right(44)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| round_label(*v))
        .y_label_formatter(&|v| round_label(*v))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()
        .map_err(draw_err)?;
    for line in lines {
        let color = line.color;
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter(|(x, _)| positive(*x))
            .map(|&(x, y)| (x, if positive(y) { y } else { y0 }))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(draw_err)?
            .label(line.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(draw_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .position(legend_at)
        .draw()
        .map_err(draw_err)?;
    root.present().map_err(draw_err)?;
    Ok(())
}

/// `1000` → "1,000"; `0.5` → "0.5": what a reader expects on a log axis.
pub fn round_label(v: f64) -> String {
    if v >= 1.0 {
        let digits = format!("{:.0}", v);
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        format!("{v}")
    }
}

fn draw_err<E: std::error::Error + Send + Sync + 'static>(
    e: plotters::drawing::DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_round_numbers() {
        assert_eq!(round_label(1000.0), "1,000");
        assert_eq!(round_label(100_000.0), "100,000");
        assert_eq!(round_label(10.0), "10");
        assert_eq!(round_label(0.1), "0.1");
    }

    #[test]
    fn writes_an_svg_with_every_line_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        log_log_svg(
            &path,
            "t",
            ("x", "y"),
            LegendAt::UpperLeft,
            &[
                Line {
                    name: "one".into(),
                    color: COLORS[0],
                    points: vec![(50.0, 1.0), (100_000.0, 98.0)],
                },
                Line {
                    name: "two".into(),
                    color: COLORS[1],
                    points: vec![(50.0, 0.0), (100_000.0, 200.0)],
                },
            ],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        // plotters writes each text on a line of its own inside its element.
        let texts: Vec<&str> = svg
            .lines()
            .filter(|l| !l.starts_with('<'))
            .map(str::trim)
            .collect();
        for want in ["one", "two", "100,000", "10"] {
            assert!(texts.contains(&want), "{want} not in {texts:?}");
        }
        assert!(log_log_svg(&path, "t", ("x", "y"), LegendAt::UpperLeft, &[]).is_err());
    }
}
