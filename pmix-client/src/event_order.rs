//! The order event handlers run in, as the standard has it.
//!
//! Handlers fall in three categories, run in this order: those registered for one code, those
//! for several, those for every code (no code given). Within a category they run in
//! registration order, unless the registration's info says otherwise:
//! `EVENT_HDLR_FIRST`/`EVENT_HDLR_LAST` put a handler before or after every other (one of
//! each), `EVENT_HDLR_FIRST_IN_CATEGORY`/`EVENT_HDLR_LAST_IN_CATEGORY` at either end of its
//! category (one of each per category), `EVENT_HDLR_PREPEND` at the front of its category
//! (behind its first-in-category handler), `EVENT_HDLR_APPEND` (the default) at its end, and
//! `EVENT_HDLR_BEFORE`/`EVENT_HDLR_AFTER` next to the handler of that `EVENT_HDLR_NAME` in the
//! same category. A place already taken, or a name not registered in the category, refuses
//! the registration (`ERR_EVENT_REGISTRATION`).

use pmix_types::{Info, Status, attr};

use crate::Error;

/// A handler pinned to a place nobody else may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pin {
    None,
    First,
    Last,
    FirstInCategory,
    LastInCategory,
}

/// Where a handler goes relative to the others of its category.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Relative {
    Prepend,
    Append,
    Before(String),
    After(String),
}

/// What a registration asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// 0: one code, 1: several, 2: every code.
    category: u8,
    pin: Pin,
    relative: Relative,
    /// `EVENT_HDLR_NAME`, for others' `BEFORE`/`AFTER`.
    name: Option<String>,
}

impl Placement {
    pub(crate) fn from_info(codes: &[Status], info: &[Info]) -> Placement {
        let flag = |k: &str| {
            info.iter()
                .any(|i| i.key.as_str() == k && i.flag().unwrap_or(false))
        };
        let text = |k: &str| {
            info.iter()
                .find(|i| i.key.as_str() == k)
                .and_then(|i| i.value.as_str())
                .map(str::to_owned)
        };
        let pin = if flag(attr::EVENT_HDLR_FIRST) {
            Pin::First
        } else if flag(attr::EVENT_HDLR_LAST) {
            Pin::Last
        } else if flag(attr::EVENT_HDLR_FIRST_IN_CATEGORY) {
            Pin::FirstInCategory
        } else if flag(attr::EVENT_HDLR_LAST_IN_CATEGORY) {
            Pin::LastInCategory
        } else {
            Pin::None
        };
        let relative = if let Some(n) = text(attr::EVENT_HDLR_BEFORE) {
            Relative::Before(n)
        } else if let Some(n) = text(attr::EVENT_HDLR_AFTER) {
            Relative::After(n)
        } else if flag(attr::EVENT_HDLR_PREPEND) {
            Relative::Prepend
        } else {
            Relative::Append
        };
        Placement {
            category: match codes.len() {
                0 => 2,
                1 => 0,
                _ => 1,
            },
            pin,
            relative,
            name: text(attr::EVENT_HDLR_NAME),
        }
    }

    /// Sorts before `other` in the run order, at the category level (pins to the ends of the
    /// whole list aside).
    fn rank(&self) -> (u8, u8) {
        match self.pin {
            Pin::First => (0, 0),
            Pin::Last => (2, 0),
            _ => (1, self.category),
        }
    }
}

fn refused(why: String) -> Error {
    tracing::debug!("pmix-client: event handler refused: {why}");
    Error::from_status(Status::ERR_EVENT_REGISTRATION)
}

/// Where `new` goes among `existing` (in run order).
pub(crate) fn place<'a>(
    existing: impl Iterator<Item = &'a Placement>,
    new: &Placement,
) -> Result<usize, Error> {
    let all: Vec<&Placement> = existing.collect();
    match new.pin {
        Pin::First if all.iter().any(|p| p.pin == Pin::First) => {
            return Err(refused("a handler is already registered first".into()));
        }
        Pin::First => return Ok(0),
        Pin::Last if all.iter().any(|p| p.pin == Pin::Last) => {
            return Err(refused("a handler is already registered last".into()));
        }
        Pin::Last => return Ok(all.len()),
        _ => {}
    }
    let rank = new.rank();
    // The category's range: after everything ranked before it, before everything after.
    let lo = all.iter().take_while(|p| p.rank() < rank).count();
    let hi = lo + all[lo..].iter().take_while(|p| p.rank() == rank).count();
    let cat = &all[lo..hi];
    let has = |pin: Pin| cat.iter().any(|p| p.pin == pin);
    let front = lo + usize::from(cat.first().is_some_and(|p| p.pin == Pin::FirstInCategory));
    let back = hi - usize::from(cat.last().is_some_and(|p| p.pin == Pin::LastInCategory));
    match new.pin {
        Pin::FirstInCategory if has(Pin::FirstInCategory) => {
            return Err(refused("its category already has a first handler".into()));
        }
        Pin::FirstInCategory => return Ok(lo),
        Pin::LastInCategory if has(Pin::LastInCategory) => {
            return Err(refused("its category already has a last handler".into()));
        }
        Pin::LastInCategory => return Ok(hi),
        _ => {}
    }
    let named = |n: &str| {
        cat.iter()
            .position(|p| p.name.as_deref() == Some(n))
            .map(|i| lo + i)
            .ok_or_else(|| refused(format!("no handler named {n:?} in its category")))
    };
    Ok(match &new.relative {
        Relative::Prepend => front,
        Relative::Append => back,
        Relative::Before(n) => named(n)?.max(front),
        Relative::After(n) => (named(n)? + 1).clamp(front, back),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(codes: &[i32], info: &[Info]) -> Placement {
        let codes: Vec<Status> = codes.iter().map(|c| Status(*c)).collect();
        Placement::from_info(&codes, info)
    }

    fn named(n: &str, more: &[Info]) -> Vec<Info> {
        let mut v = vec![Info::attr(attr::EVENT_HDLR_NAME, n)];
        v.extend_from_slice(more);
        v
    }

    /// Registers each in turn; the names in run order.
    fn order(regs: &[Placement]) -> Vec<String> {
        let mut list: Vec<Placement> = Vec::new();
        for r in regs {
            let at = place(list.iter(), r).unwrap();
            list.insert(at, r.clone());
        }
        list.into_iter().map(|p| p.name.unwrap()).collect()
    }

    #[test]
    fn categories_then_registration_order_then_what_was_asked() {
        let t = |k: &'static str| Info::attr(k, true);
        let regs = [
            reg(&[], &named("any", &[])),
            reg(&[1, 2], &named("multi", &[])),
            reg(&[1], &named("one", &[])),
            reg(&[], &named("last", &[t(attr::EVENT_HDLR_LAST)])),
            reg(&[1], &named("one-more", &[])),
            reg(&[1], &named("pre", &[t(attr::EVENT_HDLR_PREPEND)])),
            reg(&[], &named("first", &[t(attr::EVENT_HDLR_FIRST)])),
            reg(
                &[1],
                &named("cat-first", &[t(attr::EVENT_HDLR_FIRST_IN_CATEGORY)]),
            ),
            reg(&[1], &named("pre2", &[t(attr::EVENT_HDLR_PREPEND)])),
            reg(
                &[1],
                &named("before-one", &[Info::attr(attr::EVENT_HDLR_BEFORE, "one")]),
            ),
            reg(
                &[1, 3],
                &named(
                    "after-multi",
                    &[Info::attr(attr::EVENT_HDLR_AFTER, "multi")],
                ),
            ),
            reg(
                &[4],
                &named("cat-last", &[t(attr::EVENT_HDLR_LAST_IN_CATEGORY)]),
            ),
            reg(&[5], &named("one-appended", &[t(attr::EVENT_HDLR_APPEND)])),
        ];
        assert_eq!(
            order(&regs),
            [
                "first",
                "cat-first",
                "pre2",
                "pre",
                "before-one",
                "one",
                "one-more",
                "one-appended",
                "cat-last",
                "multi",
                "after-multi",
                "any",
                "last",
            ]
        );
    }

    #[test]
    fn taken_places_and_unknown_names_are_refused() {
        let t = |k: &'static str| Info::attr(k, true);
        let first = reg(&[], &named("a", &[t(attr::EVENT_HDLR_FIRST)]));
        let list = [first.clone()];
        assert!(place(list.iter(), &first).is_err());
        let cat = reg(&[1], &named("c", &[t(attr::EVENT_HDLR_LAST_IN_CATEGORY)]));
        let list = [cat.clone()];
        assert!(place(list.iter(), &cat).is_err());
        // Another category has its own last.
        assert!(
            place(
                list.iter(),
                &reg(&[1, 2], &[t(attr::EVENT_HDLR_LAST_IN_CATEGORY)])
            )
            .is_ok()
        );
        let before = reg(&[1], &[Info::attr(attr::EVENT_HDLR_BEFORE, "nobody")]);
        assert!(place(list.iter(), &before).is_err());
    }
}
