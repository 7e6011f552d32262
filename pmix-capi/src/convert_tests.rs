//! Property and refusal tests of the C conversions.
