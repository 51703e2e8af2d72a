//! Shuffled, stratified train/validation split.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// Splits example indices so that every class keeps `fraction` of its rows for validation
/// (at least one row for a class with two or more rows).
pub fn stratified_split(labels: &[usize], fraction: f64, rng: &mut StdRng) -> (Vec<usize>, Vec<usize>) {
    let mut by_class: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (index, &label) in labels.iter().enumerate() {
        by_class.entry(label).or_default().push(index);
    }
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    for (_, mut indices) in by_class {
        indices.shuffle(rng);
        let held_out = ((indices.len() as f64 * fraction).round() as usize)
            .clamp(usize::from(indices.len() > 1), indices.len().saturating_sub(1));
        valid.extend_from_slice(&indices[..held_out]);
        train.extend_from_slice(&indices[held_out..]);
    }
    train.shuffle(rng);
    valid.shuffle(rng);
    (train, valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn keeps_class_proportions_and_loses_no_row() {
        let labels: Vec<usize> = (0..100).map(|i| usize::from(i >= 80)).collect();
        let (train, valid) = stratified_split(&labels, 0.1, &mut StdRng::seed_from_u64(7));
        assert_eq!(train.len() + valid.len(), 100);
        assert_eq!(valid.iter().filter(|&&i| labels[i] == 0).count(), 8);
        assert_eq!(valid.iter().filter(|&&i| labels[i] == 1).count(), 2);
        let mut all: Vec<usize> = train.iter().chain(&valid).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }
}
