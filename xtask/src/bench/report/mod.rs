//! The single-node report of `cargo xtask bench`, one concern per file: `rows` (the stacks,
//! the run settings and the rows of the tables), `plan` (the runs the selected rows need),
//! `measured` (the numbers measured for them), `goals` (the goals judged on them), `tables`
//! (the tables of the numbers), `render` (the whole report, with what went wrong) and `digits`
//! (how a number is written). The launch rows, their table and their goals are `launch`'s.

mod digits;
mod goals;
mod measured;
mod plan;
mod render;
mod rows;
mod tables;

pub(super) use digits::sig3;
pub(super) use goals::worst_below_one;
pub(crate) use measured::Measured;
pub(crate) use plan::{Plan, configs_needed};
pub(crate) use render::{Context, render};
#[cfg(test)]
pub(crate) use rows::FLOOR;
pub(crate) use rows::{Config, Row, Stack};
