//! How the reports write a number: three significant digits, no exponent.

/// Three significant digits (whole numbers from 1000 on), no exponent.
pub(in crate::bench) fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if v.abs() >= 1000.0 {
        return format!("{v:.0}");
    }
    // Round first, so that 0.000999 becomes 0.00100 and not 0.001000.
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    let rounded = (v * scale).round() / scale;
    let magnitude = rounded.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 6) as usize;
    format!("{rounded:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits() {
        assert_eq!(sig3(0.0690), "0.0690");
        assert_eq!(sig3(12.345), "12.3");
        assert_eq!(sig3(1234.5), "1234");
        assert_eq!(sig3(0.5), "0.500");
        assert_eq!(sig3(0.000_999_9), "0.00100");
        assert_eq!(sig3(999.7), "1000");
    }
}
