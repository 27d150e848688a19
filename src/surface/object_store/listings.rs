//! S3's listings, read to their end: ListObjectsV2 by continuation token,
//! ListMultipartUploads and ListObjectVersions by a pair of markers. A
//! page that does not say whether it is the last, names no next page or
//! the same again, or a refusal after pages were handed over, is a
//! listing that broke; one longer than [`MAX_PAGES`] is never read as
//! whole.

use super::ObjectStore;
use super::s3::{Call, Said, parse};
use super::surface::{ListError, said};
use http::Method;

/// A listing paged by a pair of markers: its subresource, what S3 calls
/// it, its items, the field of each beside `Key`, and the query and answer
/// names of that field's marker.
pub(super) struct Marked {
    sub: &'static str,
    op: &'static str,
    items: &'static [&'static str],
    id: &'static str,
    id_marker: &'static str,
    next_id: &'static str,
}

const UPLOAD_LISTING: Marked = Marked {
    sub: "uploads",
    op: "ListMultipartUploads",
    items: &["Upload"],
    id: "UploadId",
    id_marker: "upload-id-marker",
    next_id: "NextUploadIdMarker",
};

pub(super) const VERSION_LISTING: Marked = Marked {
    sub: "versions",
    op: "ListObjectVersions",
    items: &["Version", "DeleteMarker"],
    id: "VersionId",
    id_marker: "version-id-marker",
    next_id: "NextVersionIdMarker",
};

/// The same listing, its delete markers alone.
pub(super) const MARKER_LISTING: Marked = Marked {
    items: &["DeleteMarker"],
    ..VERSION_LISTING
};

/// The most pages of a listing read (1,000 keys each): a bucket larger
/// than this is an ERROR, never a PASS resting on part of it.
pub(super) const MAX_PAGES: usize = 1_000;

impl ObjectStore {
    /// Every key under the prefix, page by page to the end (`each` gets
    /// each key as listed).
    pub(super) fn list_keys(&self, each: &mut dyn FnMut(&str)) -> Result<usize, ListError> {
        let s3 = self
            .s3
            .as_ref()
            .ok_or_else(|| ListError::Failed("no credentials".into()))?;
        let mut token: Option<String> = None;
        let mut count = 0;
        for _ in 0..MAX_PAGES {
            let mut call = Call::new(Method::GET, None)
                .query("list-type", "2")
                .query("prefix", self.settings.prefix.clone());
            if let Some(t) = &token {
                call = call.query("continuation-token", t.clone());
            }
            let doc = self.page(s3, &call, &["Contents"], "ListObjectsV2", token.is_none())?;
            for (_, f) in &doc.items {
                if let Some(k) = f.get("Key") {
                    count += 1;
                    each(k);
                }
            }
            match next(&doc, "NextContinuationToken", &token)? {
                Some(t) => token = Some(t),
                None => return Ok(count),
            }
        }
        Err(ListError::Failed(format!(
            "the bucket lists more than {MAX_PAGES} pages under the prefix: not read to its end"
        )))
    }

    /// Every multipart upload under the prefix, page by page to the end
    /// (`each` gets its key and upload id).
    pub(super) fn list_uploads(
        &self,
        each: &mut dyn FnMut(&str, &str),
    ) -> Result<usize, ListError> {
        self.list_marked(&UPLOAD_LISTING, &self.settings.prefix, each)
    }

    /// A listing paged by a pair of markers (`m`) under `prefix`, to its
    /// end: `each` gets each item's key and id. (One key may hold many
    /// uploads or versions: only the pair must move on.)
    pub(super) fn list_marked(
        &self,
        m: &Marked,
        prefix: &str,
        each: &mut dyn FnMut(&str, &str),
    ) -> Result<usize, ListError> {
        let s3 = self
            .s3
            .as_ref()
            .ok_or_else(|| ListError::Failed("no credentials".into()))?;
        let mut marker: Option<(String, String)> = None;
        let mut count = 0;
        for _ in 0..MAX_PAGES {
            let mut call = Call::new(Method::GET, None)
                .query(m.sub, "")
                .query("prefix", prefix.to_string());
            if let Some((k, i)) = &marker {
                call = call
                    .query("key-marker", k.clone())
                    .query(m.id_marker, i.clone());
            }
            let doc = self.page(s3, &call, m.items, m.op, marker.is_none())?;
            for (_, f) in &doc.items {
                if let (Some(k), Some(id)) = (f.get("Key"), f.get(m.id)) {
                    count += 1;
                    each(k, id);
                }
            }
            let Some(k) = next(&doc, "NextKeyMarker", &None)? else {
                return Ok(count);
            };
            let id = doc.top.get(m.next_id).cloned().unwrap_or_default();
            if id.is_empty() || marker.as_ref() == Some(&(k.clone(), id.clone())) {
                return Err(ListError::Failed(format!(
                    "{} names no next page, or the same again",
                    m.op
                )));
            }
            marker = Some((k, id));
        }
        Err(ListError::Failed(format!(
            "{} holds more than {MAX_PAGES} pages under the prefix: not read to its end",
            m.op
        )))
    }

    /// One page of a listing, parsed. A refusal is the listing's refusal
    /// on its `first` page only: one refused after pages were handed over
    /// is a listing that broke, never a refusal (what was read is no
    /// whole listing, and the identity was let in).
    fn page(
        &self,
        s3: &super::s3::S3,
        call: &Call<'_>,
        items: &[&str],
        op: &str,
        first: bool,
    ) -> Result<super::s3::Doc, ListError> {
        let a = s3.send(call).map_err(|f| ListError::Failed(f.into()))?;
        match a.said() {
            Said::Done => parse(&a.body, items).map_err(ListError::Failed),
            Said::Denied if first => Err(ListError::Denied(said(&Said::Denied, op))),
            Said::Denied => Err(ListError::Failed(format!(
                "{} on a later page, after earlier pages were handed over: no whole listing",
                said(&Said::Denied, op)
            ))),
            Said::Unsupported(m) => Err(ListError::Absent(m)),
            other => Err(ListError::Failed(said(&other, op))),
        }
    }
}

/// The next page's marker named by `field` of a truncated page; `None`
/// at the end. A truncated page without one, or naming the page just
/// read again, is an error: the listing would never end, or end early.
fn next(
    doc: &super::s3::Doc,
    field: &str,
    was: &Option<String>,
) -> Result<Option<String>, ListError> {
    match doc.top.get("IsTruncated").map(|t| t.trim()) {
        Some("false") => return Ok(None),
        Some("true") => {}
        // Not S3's answer: a page that does not say whether more follow
        // is no whole listing.
        _ => {
            return Err(ListError::Failed(
                "a page of the listing does not say whether it is the last (IsTruncated)".into(),
            ));
        }
    }
    match doc.top.get(field).filter(|t| !t.is_empty()) {
        Some(t) if Some(t) == was.as_ref() => Err(ListError::Failed(format!(
            "the listing names the page just read as its next ({field})"
        ))),
        Some(t) => Ok(Some(t.clone())),
        None => Err(ListError::Failed(format!(
            "a truncated page names no next page ({field}): the listing cannot be read to its end"
        ))),
    }
}
