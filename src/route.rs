//! Read routes and their proof of currency: the rules every listing run B
//! reads obeys, below the surfaces and the clients that page for them.
//!
//! A listing's silence counts only when the listing is known complete.
//! How it is known depends on how it was handed over:
//! - in one answer (one page, one ref advertisement, one directory read
//!   whose entries did not change during it): one read, its own proof;
//! - page by page behind a cursor: the server keeps the place, so an item
//!   removed ahead of it shifts nothing;
//! - page by page by number (GitHub's `page=`, an offset): an item removed
//!   from an early page while the listing is read moves the item at the
//!   next page's boundary onto the page already read, and it is never
//!   handed over. Nothing in the answers shows it (an upload that finishes
//!   meanwhile even keeps `total_count`). Such a listing is read again,
//!   whole, until two passes in a row hand over the same items, at most
//!   [`MAX_PASSES`] times; passes that never agree are no look at all
//!   ([`Disagreed`]), never "not there".

use std::collections::HashSet;

/// How many whole passes of a numbered listing are taken, at most, before
/// it counts as changing under every read. Two agree at once on a listing
/// nothing writes to; a third and a fourth give an item that went once
/// (a label deleted, an upload finished) its chance to settle; a listing
/// that changes on every pass (a busy repository's comments) stays
/// unproven rather than read without end.
pub const MAX_PASSES: u32 = 4;

/// How one pass of a listing was handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// In one answer.
    Whole,
    /// Page by page, each next page named by a cursor the server keeps.
    Cursor,
    /// Page by page, by page number or offset.
    Numbered,
}

impl Paging {
    /// How a listing whose next page is `next` pages: by cursor when the
    /// link names no page number or offset and names a cursor (`after`,
    /// `before`, `cursor`, `last`, `marker`, `continuation-token`); by
    /// number otherwise (unknown counts as the weaker kind).
    pub fn of_next(next: &str) -> Paging {
        let query = next.split_once('?').map_or("", |(_, q)| q);
        let keys: Vec<&str> = query
            .split('&')
            .map(|p| p.split_once('=').map_or(p, |(k, _)| k))
            .collect();
        let numbered = keys
            .iter()
            .any(|k| matches!(*k, "page" | "offset" | "from" | "start"));
        let cursor = keys.iter().any(|k| {
            matches!(
                *k,
                "after" | "before" | "cursor" | "last" | "marker" | "continuation-token"
            )
        });
        if cursor && !numbered {
            Paging::Cursor
        } else {
            Paging::Numbered
        }
    }
}

/// What one whole pass of a listing handed over: the identity of every
/// item (an id, or the item itself where it has none), how it paged, and
/// whether the pass itself saw it was short.
#[derive(Debug, Default)]
pub struct Pass {
    pub items: HashSet<String>,
    pub paging: Option<Paging>,
    pub short: Option<Short>,
}

/// A pass that counted more items (a `total_count`) than it handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Short {
    pub counted: u64,
    pub handed: u64,
}

/// How a listing was shown complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Complete {
    /// One read (one answer, or pages behind a cursor).
    OneRead,
    /// `passes` whole passes, the last two handing over the same items.
    Agreed { passes: u32 },
}

/// A numbered listing whose passes never agreed: it changed under every
/// read, so what it did not hand over proves nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreed {
    pub passes: u32,
    /// The last pass that was short by its own count.
    pub short: Option<Short>,
}

impl Disagreed {
    /// Why the listing is no look, for a reason.
    pub fn why(&self, what: &str) -> String {
        format!(
            "{what} is not current: it pages by number and changed while it was read ({} whole passes, no two in a row handing over the same items{}), so an item may have been skipped at a page boundary: its silence proves nothing",
            self.passes,
            match self.short {
                Some(s) => format!(
                    "; a pass counted {} but handed over {}",
                    s.counted, s.handed
                ),
                None => String::new(),
            }
        )
    }
}

/// Takes whole passes of a listing with `pass` until one is complete by
/// itself (one answer, or a cursor) or two in a row agree, at most
/// [`MAX_PASSES`]. An error of a pass ends it at once.
pub fn complete<E>(
    mut pass: impl FnMut(u32) -> Result<Pass, E>,
) -> Result<Result<Complete, Disagreed>, E> {
    let mut last: Option<Pass> = None;
    let mut short = None;
    for n in 1..=MAX_PASSES {
        let p = pass(n)?;
        short = p.short.or(short);
        if p.short.is_none() && matches!(p.paging, None | Some(Paging::Whole | Paging::Cursor)) {
            return Ok(Ok(Complete::OneRead));
        }
        if p.short.is_none()
            && let Some(prev) = &last
            && prev.short.is_none()
            && prev.items == p.items
        {
            return Ok(Ok(Complete::Agreed { passes: n }));
        }
        last = Some(p);
    }
    Ok(Err(Disagreed {
        passes: MAX_PASSES,
        short,
    }))
}

/// How one whole pass of a listing ended: how it paged, and how many
/// items its first page counted (`total_count`), where it says.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    pub paging: Paging,
    pub counted: Option<u64>,
}

/// Reads a listing whole by [`complete`]'s rule: `pass(n, item)` takes
/// the `n`th whole pass, calling `item(identity, item)` for every item it
/// is handed (repeats within a pass count once); `each` gets every item
/// once, the first time any pass lists it. How many items the last pass
/// held, or why the listing is no look.
pub fn read_whole<T: ?Sized, E>(
    mut pass: impl FnMut(u32, &mut dyn FnMut(&str, &T)) -> Result<Ended, E>,
    each: &mut dyn FnMut(&T),
) -> Result<Result<usize, Disagreed>, E> {
    let mut handed = HashSet::new();
    let mut n = 0;
    let done = complete(|k| {
        let mut items = HashSet::new();
        let ended = pass(k, &mut |id, item| {
            if handed.insert(id.to_string()) {
                each(item);
            }
            items.insert(id.to_string());
        })?;
        n = items.len();
        let handed = n as u64;
        Ok(Pass {
            items,
            paging: Some(ended.paging),
            short: ended
                .counted
                .filter(|c| handed < *c)
                .map(|counted| Short { counted, handed }),
        })
    })?;
    Ok(done.map(|_| n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(items: &[&str], paging: Paging) -> Pass {
        Pass {
            items: items.iter().map(|s| s.to_string()).collect(),
            paging: Some(paging),
            short: None,
        }
    }

    #[test]
    fn one_answer_or_a_cursor_is_one_read() {
        for paging in [Paging::Whole, Paging::Cursor] {
            let mut n = 0;
            let r = complete::<()>(|_| {
                n += 1;
                Ok(pass(&["a"], paging))
            });
            assert_eq!(r, Ok(Ok(Complete::OneRead)));
            assert_eq!(n, 1);
        }
    }

    #[test]
    fn numbered_pages_are_read_until_two_passes_agree() {
        // A shift once: the first pass misses "c", the next two agree.
        let passes = [
            vec!["x", "a", "b"],
            vec!["a", "b", "c"],
            vec!["a", "b", "c"],
        ];
        let r = complete::<()>(|n| Ok(pass(&passes[n as usize - 1], Paging::Numbered)));
        assert_eq!(r, Ok(Ok(Complete::Agreed { passes: 3 })));
    }

    #[test]
    fn passes_that_never_agree_or_fall_short_are_no_look() {
        let r = complete::<()>(|n| Ok(pass(&[&format!("x{n}"), "a"], Paging::Numbered)));
        assert_eq!(
            r,
            Ok(Err(Disagreed {
                passes: MAX_PASSES,
                short: None
            }))
        );
        // Short by its own count: even equal passes do not agree.
        let r = complete::<()>(|_| {
            let mut p = pass(&["a"], Paging::Numbered);
            p.short = Some(Short {
                counted: 2,
                handed: 1,
            });
            Ok(p)
        });
        assert!(matches!(r, Ok(Err(Disagreed { short: Some(_), .. }))));
        let why = r.unwrap().unwrap_err().why("listing x");
        assert!(why.contains("counted 2 but handed over 1"), "{why}");
    }

    #[test]
    fn a_link_pages_by_cursor_only_when_it_names_one_and_no_number() {
        for (next, paging) in [
            ("https://x/y?per_page=100&page=2", Paging::Numbered),
            ("https://x/y?after=Y3Vy&per_page=100", Paging::Cursor),
            ("https://x/v2/_catalog?n=100&last=b", Paging::Cursor),
            ("https://x/y?after=a&page=2", Paging::Numbered),
            ("https://x/y", Paging::Numbered),
        ] {
            assert_eq!(Paging::of_next(next), paging, "{next}");
        }
    }

    #[test]
    fn each_item_is_handed_over_once_across_passes() {
        let passes = [vec!["a", "x"], vec!["a", "b"], vec!["a", "b"]];
        let mut handed = vec![];
        let r = read_whole::<str, ()>(
            |n, item| {
                for i in &passes[n as usize - 1] {
                    item(i, i);
                }
                Ok(Ended {
                    paging: Paging::Numbered,
                    counted: None,
                })
            },
            &mut |i| handed.push(i.to_string()),
        );
        assert_eq!(r, Ok(Ok(2)));
        assert_eq!(handed, ["a", "x", "b"]);
    }
}
