//! Beacons on any surface (the kernel's one reading of them): what a
//! `runner-persistence` recovery makes of bytes named or labelled like a
//! beacon. A valid beacon of another probe is a hit, with who planted it
//! and when; this probe's own is nothing; anything else is a notice,
//! never counted (anyone who can write the surface can make one).

use super::{Notice, NoticeKind, RunCtx};
use crate::escape;
use crate::marker::Checked;

/// What a beacon said: the hit's detail when it is a valid beacon of
/// another probe, and the notice to give (none for this probe's own).
/// `entry`: where it was, already escaped.
pub fn read(ctx: &RunCtx<'_>, entry: String, bytes: &[u8]) -> (Option<String>, Option<Notice>) {
    match ctx.key.check_beacon(bytes) {
        Checked::Valid(body) if body.probe_id == ctx.probe_id => (None, None),
        Checked::Valid(body) => {
            let detail = format!(
                "beacon of probe {} planted {} by {}",
                escape::bytes(body.probe_id.as_bytes()),
                escape::bytes(body.planted_at.as_bytes()),
                escape::bytes(body.origin.describe().as_bytes())
            );
            let hit = format!("run B found {entry}, a valid {detail}");
            let notice = Notice {
                kind: NoticeKind::Beacon,
                entry,
                detail,
                beacon: Some(body),
            };
            (Some(hit), Some(notice))
        }
        Checked::Unverified { body, why } => (
            None,
            Some(Notice {
                kind: NoticeKind::UnverifiedBeacon,
                entry,
                detail: format!(
                    "claims probe {}, but {why}; not counted",
                    escape::bytes(body.probe_id.as_bytes())
                ),
                beacon: Some(body),
            }),
        ),
        Checked::Malformed(why) => (
            None,
            Some(Notice {
                kind: NoticeKind::MalformedBeacon,
                entry,
                detail: format!("{}; not counted", escape::bytes(why.as_bytes())),
                beacon: None,
            }),
        ),
    }
}
