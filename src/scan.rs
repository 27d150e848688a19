//! Streaming scans of what surfaces download, as the body arrives:
//! [`Needles`] searches raw bytes for nonces across chunk edges, and
//! [`Marked`] extracts marked strings from listings (a WebDAV
//! multistatus's `href` elements, a PyPI simple page's `href` attributes),
//! with memory at one string, at most [`MAX_ITEM`] bytes; a longer one is
//! skipped. Surfaces that extract names also search the raw body for their
//! needles, so a skipped string can never hide a plant.

/// Needles searched in a stream of chunks; a needle cut by a chunk edge is
/// still found. Memory: the longest needle.
pub struct Needles {
    needles: Vec<String>,
    found: Vec<bool>,
    window: Vec<u8>,
}

impl Needles {
    pub fn new(needles: Vec<String>) -> Needles {
        let found = vec![false; needles.len()];
        Needles {
            needles,
            found,
            window: vec![],
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        self.window.extend_from_slice(chunk);
        for (i, n) in self.needles.iter().enumerate() {
            self.found[i] |= memchr::memmem::find(&self.window, n.as_bytes()).is_some();
        }
        let longest = self.needles.iter().map(String::len).max().unwrap_or(0);
        let keep = self.window.len().saturating_sub(longest.saturating_sub(1));
        self.window.drain(..keep);
    }

    /// Whether needle `i` was seen.
    pub fn found(&self, i: usize) -> bool {
        self.found[i]
    }
}

/// The longest string handed over.
pub const MAX_ITEM: usize = 64 << 10;

/// Finds every `open … close` string in a stream.
pub struct Marked {
    open: &'static [u8],
    close: u8,
    /// Skip matches of `open` that are part of a closing tag (`</D:href>`).
    skip_closing_tags: bool,
    carry: Vec<u8>,
}

impl Marked {
    /// `<D:href>…</D:href>` (any namespace prefix), percent-decoded.
    pub fn dav_hrefs() -> Marked {
        Marked {
            open: b"href>",
            close: b'<',
            skip_closing_tags: true,
            carry: vec![],
        }
    }

    /// `href="…"`, percent-decoded.
    pub fn href_attributes() -> Marked {
        Marked {
            open: b"href=\"",
            close: b'"',
            skip_closing_tags: false,
            carry: vec![],
        }
    }

    /// Feeds one chunk; hands each complete string (entity `&amp;` and
    /// percent-decoded) to `each`.
    pub fn feed(&mut self, chunk: &[u8], each: &mut dyn FnMut(&str)) {
        self.carry.extend_from_slice(chunk);
        let finder = memchr::memmem::Finder::new(self.open);
        // Everything before `keep` is done with.
        let mut at = 0;
        // By default keep the tail that may start a match: from the last
        // `<` (a tag whose name is still arriving), or the last few bytes.
        let tail = self.carry.len().saturating_sub(self.open.len());
        let mut keep = match memchr::memrchr(b'<', &self.carry) {
            Some(lt) if self.carry.len() - lt <= 256 => lt.min(tail),
            _ => tail,
        };
        while let Some(i) = finder.find(&self.carry[at..]) {
            let m = at + i;
            let start = m + self.open.len();
            let lt = memchr::memrchr(b'<', &self.carry[..m]).unwrap_or(m);
            if self.skip_closing_tags && self.carry.get(lt + 1) == Some(&b'/') {
                at = start;
                keep = keep.max(start);
                continue;
            }
            match memchr::memchr(self.close, &self.carry[start..]) {
                Some(end) => {
                    let raw = String::from_utf8_lossy(&self.carry[start..start + end]);
                    each(&crate::wire::percent_decode(&raw.replace("&amp;", "&")));
                    at = start + end;
                    keep = keep.max(at);
                }
                None => {
                    // Cut in half: keep it, unless it is too long to be one.
                    keep = if self.carry.len() - m > MAX_ITEM {
                        self.carry.len()
                    } else {
                        m
                    };
                    break;
                }
            }
        }
        self.carry.drain(..keep.min(self.carry.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(mut m: Marked, body: &[u8], chunk: usize) -> Vec<String> {
        let mut out = vec![];
        for c in body.chunks(chunk) {
            m.feed(c, &mut |s| out.push(s.to_string()));
        }
        out
    }

    #[test]
    fn needles_cut_by_chunk_edges_are_found() {
        let body = b"xxxx0123456789abcdefyyyyABCDEF";
        for n in [1, 2, 5, 7, 100] {
            let mut s = Needles::new(vec![
                "0123456789abcdef".into(),
                "ABCDEF".into(),
                "zz".into(),
            ]);
            for c in body.chunks(n) {
                s.feed(c);
            }
            assert!(s.found(0) && s.found(1) && !s.found(2), "chunk {n}");
            assert!(s.window.len() < 16);
        }
    }

    #[test]
    fn strings_cut_across_chunks_are_found_once() {
        let dav = b"<D:multistatus><D:response><D:href>/a%20b/</D:href></D:response><response><href>/c&amp;d</href></response></D:multistatus>";
        for n in [1, 2, 3, 7, 1000] {
            assert_eq!(
                all(Marked::dav_hrefs(), dav, n),
                ["/a b/", "/c&d"],
                "chunk {n}"
            );
        }
        let simple = b"<a href=\"x-1/\">x-1</a><br><a href=\"../../+f/y.tar.gz#sha256=0\">y</a>";
        for n in [1, 5, 1000] {
            assert_eq!(
                all(Marked::href_attributes(), simple, n),
                ["x-1/", "../../+f/y.tar.gz#sha256=0"]
            );
        }
    }

    #[test]
    fn an_endless_string_is_skipped_and_memory_stays_bounded() {
        let mut m = Marked::dav_hrefs();
        let mut n = 0;
        m.feed(b"<D:href>", &mut |_| n += 1);
        for _ in 0..200 {
            m.feed(&[b'x'; 4096], &mut |_| n += 1);
            assert!(m.carry.len() <= MAX_ITEM + 8192);
        }
        m.feed(b"</D:href><D:href>/ok</D:href>", &mut |_| n += 1);
        assert_eq!(n, 1);
    }
}
