//! The report's charts as inline SVG, drawn with plotters' SVG backend. Charts carry only
//! numbers and fixed axis names; class names and other text from the data stay in the HTML,
//! where the template engine escapes them.

use anyhow::anyhow;
use plotters::prelude::*;

use crate::tally::{CONFIDENCE_BINS, RELIABILITY_BINS, ReliabilityBin};

const WIDTH: u32 = 420;
const HEIGHT: u32 = 260;
const BAR: RGBColor = RGBColor(70, 110, 190);
const GAP: RGBColor = RGBColor(200, 80, 60);

fn failed<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("cannot draw a chart: {error:?}")
}

/// A histogram of one class's confidences: rows per bin over [0, 1].
pub fn confidence_histogram(bins: &[u64; CONFIDENCE_BINS]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let top = bins.iter().copied().max().unwrap_or(0).max(1);
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..1f64, 0u64..top + top / 10 + 1)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("confidence")
            .y_desc("rows")
            .x_labels(6)
            .y_labels(5)
            .draw()
            .map_err(failed)?;
        let width = 1.0 / CONFIDENCE_BINS as f64;
        chart
            .draw_series(bins.iter().enumerate().map(|(i, &rows)| {
                let left = i as f64 * width;
                Rectangle::new([(left + width * 0.08, 0), (left + width * 0.92, rows)], BAR.filled())
            }))
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// A reliability diagram: each bin's accuracy against its mean confidence, the diagonal of a
/// calibrated model, and the gap between them shaded.
pub fn reliability_diagram(bins: &[ReliabilityBin; RELIABILITY_BINS]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + 40)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..1f64, 0f64..1f64)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .x_desc("confidence")
            .y_desc("accuracy")
            .x_labels(6)
            .y_labels(6)
            .draw()
            .map_err(failed)?;
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(0.0, 0.0), (1.0, 1.0)], BLACK.mix(0.4))))
            .map_err(failed)?;
        let width = 1.0 / RELIABILITY_BINS as f64;
        let filled: Vec<(usize, &ReliabilityBin)> = bins.iter().enumerate().filter(|(_, b)| b.rows > 0).collect();
        chart
            .draw_series(filled.iter().map(|(i, bin)| {
                let left = *i as f64 * width;
                let accuracy = bin.correct as f64 / bin.rows as f64;
                Rectangle::new([(left + width * 0.1, 0.0), (left + width * 0.9, accuracy)], BAR.mix(0.8).filled())
            }))
            .map_err(failed)?;
        chart
            .draw_series(filled.iter().map(|(_, bin)| {
                let confidence = bin.confidence_sum / bin.rows as f64;
                let accuracy = bin.correct as f64 / bin.rows as f64;
                Circle::new((confidence, accuracy), 4, GAP.filled())
            }))
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Mean attention entropy per hop as bars, with ln(mean tokens) marked: the entropy of an
/// even spread, which a hop that attends to nothing in particular approaches.
pub fn hop_entropy(entropies: &[f64], even: f64) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let top = entropies.iter().copied().filter(|e| e.is_finite()).fold(even, f64::max).max(0.1) * 1.1;
        let hops = entropies.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(0.5f64..hops as f64 + 0.5, 0f64..top)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("hop")
            .y_desc("mean entropy (nats)")
            .x_labels(hops.min(16))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(failed)?;
        chart
            .draw_series(entropies.iter().enumerate().map(|(i, &h)| {
                let centre = i as f64 + 1.0;
                Rectangle::new([(centre - 0.35, 0.0), (centre + 0.35, h)], BAR.filled())
            }))
            .map_err(failed)?;
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(0.5, even), (hops as f64 + 0.5, even)], GAP)))
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_a_shape_per_bar() {
        let mut bins = [0u64; CONFIDENCE_BINS];
        bins[19] = 30;
        bins[10] = 3;
        let svg = confidence_histogram(&bins).expect("histogram");
        assert!(svg.starts_with("<svg"), "{svg}");
        // One rectangle for the background, one per bin (empty bins draw a flat one).
        assert!(svg.matches("<rect").count() > CONFIDENCE_BINS, "{svg}");

        let mut reliability = [ReliabilityBin::default(); RELIABILITY_BINS];
        reliability[9] = ReliabilityBin { rows: 10, correct: 9, confidence_sum: 9.7 };
        let svg = reliability_diagram(&reliability).expect("reliability");
        assert_eq!(svg.matches("<circle").count(), 1, "{svg}");
    }
}
