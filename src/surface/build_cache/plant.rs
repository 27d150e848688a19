//! Run A's writes: the check that what it writes can be deleted (before
//! anything of the plants is written), the witnesses on both sides of the
//! plants, and each carrier's entry; every one journalled before its
//! write and taken back when the cache answered that it made nothing.

use super::protocol::{Read, Said};
use super::{
    Build, BuildCache, Entry, Kind, PLAIN_TAG, Protocol, agreed, bazel, body, cas_body, key_of,
};
use crate::nonce::Nonce;
use crate::surface::witness::{self, Side};
use crate::surface::{Job, Journal, PlantOutcome, RunCtx};
use ::http::Method;

/// The route run B reads the entries through, by name: its witnesses'
/// names are derived from it.
pub(super) const ROUTE: &str = "by-key";

/// The name of the delete check's entry.
pub(super) fn delete_check(ctx: &RunCtx<'_>) -> String {
    witness::name(ctx, "delete-check", Side::Before, "")
}

/// Why a carrier that writes here is SKIPPED unless `permanent: true`.
fn stays(why: &str) -> PlantOutcome<Nonce> {
    PlantOutcome::Unsupported {
        reason: format!(
            "{why}: what a probe writes here would stay; planted only with `permanent: true`, which accepts that (its entries are then listed as kept, by key)"
        ),
    }
}

impl BuildCache {
    /// One write (a PUT of `body` at `entry`'s key, with Turborepo's
    /// `tag`): journalled first, taken back when the cache answered with
    /// a 4xx (then nothing was made; a 5xx may come after the write was
    /// done, so the entry stays for cleanup).
    pub(super) fn write(
        &self,
        journal: &mut Journal<'_, Entry>,
        entry: &Entry,
        body: Vec<u8>,
        tag: Option<&str>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        journal.record(entry);
        let op = format!("PUT of {}", self.place(entry.kind, &entry.key));
        let (status, answer) = self
            .send(Method::PUT, entry.kind, &entry.key, body, tag)
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let said = self.said(status, &op, &answer);
        if said != Said::Done && (400..500).contains(&status) {
            journal.retract(entry);
        }
        match said {
            Said::Done => Ok(()),
            Said::Refused(reason) => Err(PlantOutcome::Refused { reason }),
            Said::Absent => Err(PlantOutcome::Error {
                reason: format!(
                    "{op}: HTTP {status}, no such place on the server: check `url` and `protocol`"
                ),
            }),
            Said::Failed(reason) => Err(PlantOutcome::Error { reason }),
        }
    }

    /// The entry of tagged name `name` holding `content`: for Bazel, the
    /// blob and then the action result pointing at it (as Bazel uploads
    /// outputs before their action result), or, where the blob's write is
    /// refused, an action result holding `content` itself (its stdout: a
    /// credential that may write action results carries bytes in them, so
    /// only a refusal of that very write closes the carrier); for the
    /// others, the entry itself, with `tag` (Turborepo's: always one, a
    /// server that verifies signatures answers an artifact without one as
    /// missing).
    pub(super) fn write_entry(
        &self,
        journal: &mut Journal<'_, Entry>,
        name: &str,
        content: Vec<u8>,
        tag: &str,
    ) -> Result<(), PlantOutcome<Nonce>> {
        if self.settings.protocol != Protocol::Bazel {
            let tag = (self.settings.protocol == Protocol::Turborepo).then_some(tag);
            return self.write(journal, &Entry::at_key(name, &content), content, tag);
        }
        let blob = Entry::blob(name, &content);
        let size = content.len();
        let ac = match self.write(journal, &blob, content.clone(), None) {
            Ok(()) => bazel::action_result(&format!("runwarden/{name}"), &blob.key, size),
            Err(PlantOutcome::Refused { .. }) => bazel::bare_result(&content),
            Err(o) => return Err(o),
        };
        self.write(journal, &Entry::at_key(name, &ac), ac, None)
    }

    /// A witness of run B's route on `side` ([`witness`]): an entry at an
    /// agreed key holding no nonce. (What it answered is not kept: run B
    /// finds a witness that was not made missing, and then proves nothing.)
    pub(super) fn witness(&self, ctx: &RunCtx<'_>, side: Side, journal: &mut Journal<'_, Entry>) {
        let name = witness::name(ctx, ROUTE, side, "");
        let _ = self.write_entry(journal, &name, body(&name, None), PLAIN_TAG);
    }

    /// Plants one carrier.
    pub(super) fn plant_job(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Build>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let name = agreed(ctx, job.carrier);
        let key = key_of(&name);
        let done = match job.carrier {
            Build::EntryContent => {
                self.write_entry(journal, &name, body(&name, Some(&job.nonce)), PLAIN_TAG)
            }
            // The artifact holds no nonce: its tag does.
            Build::ArtifactTag => {
                self.write_entry(journal, &name, body(&name, None), &job.nonce.hex())
            }
            Build::CasBlob => {
                let content = cas_body(&name, &job.nonce);
                let blob = Entry::blob(&name, &content);
                let place = self.place(Kind::Blob, &blob.key);
                return match self.write(journal, &blob, content, None) {
                    Err(o) => o,
                    Ok(()) => PlantOutcome::Planted {
                        needle: job.nonce,
                        persistence: None,
                        detail: format!(
                            "PUT {place} under {}: a blob no action result points at",
                            self.shown()
                        ),
                    },
                };
            }
        };
        let detail = match job.carrier {
            Build::ArtifactTag => format!(
                "PUT {} under {}, its x-artifact-tag the nonce",
                self.place(Kind::Entry, &key),
                self.shown()
            ),
            _ if self.settings.protocol == Protocol::Bazel => format!(
                "PUT {} under {}: an action result whose output is a blob holding the nonce",
                self.place(Kind::Entry, &key),
                self.shown()
            ),
            _ => format!(
                "PUT {} under {}",
                self.place(Kind::Entry, &key),
                self.shown()
            ),
        };
        match done {
            Err(o) => o,
            Ok(()) => PlantOutcome::Planted {
                needle: job.nonce,
                persistence: None,
                detail,
            },
        }
    }

    /// Whether what run A writes can be deleted, before it writes any
    /// plant: where the API has no delete, or the server takes none, every
    /// carrier is SKIPPED (`Err`, saying why) unless `permanent: true`.
    /// Each kind of thing run A writes is asked about (Bazel's action
    /// results and blobs may be served by different rules): a DELETE of a
    /// key nothing is at (a 405 or a 403 says no), then a write of the
    /// check's own entry (no nonce in it). Refused, the plants' writes of
    /// that kind will be too, and their refusals are the verdict; taken,
    /// its DELETE and a read showing it gone say yes (a server may answer
    /// a DELETE it does not do). Only a check that left nothing is taken
    /// back; else its entry stays journalled, and cleanup lists it.
    pub(super) fn may_delete(
        &self,
        ctx: &RunCtx<'_>,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let s = &self.settings;
        if s.permanent || s.control {
            return Ok(());
        }
        if !s.protocol.may_delete() {
            return Err(stays(&s.protocol.no_delete()));
        }
        let name = delete_check(ctx);
        let text = body(&name, None);
        let mut checks = vec![];
        if s.protocol == Protocol::Bazel {
            checks.push(Entry::blob(&name, &text));
            checks.push(Entry::at_key(&name, &bazel::bare_result(&text)));
        } else {
            checks.push(Entry::at_key(&name, &text));
        }
        for entry in checks {
            let content = match entry.kind {
                Kind::Blob => text.clone(),
                Kind::Entry if s.protocol == Protocol::Bazel => bazel::bare_result(&text),
                Kind::Entry => text.clone(),
            };
            self.delete_check(journal, &entry, content)?;
        }
        Ok(())
    }

    /// The delete check of one kind of thing run A writes: `entry`, which
    /// holds `content`.
    fn delete_check(
        &self,
        journal: &mut Journal<'_, Entry>,
        entry: &Entry,
        content: Vec<u8>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let err = |f: crate::fault::Fault| PlantOutcome::Error { reason: f.into() };
        let op = format!("DELETE of {}", self.place(entry.kind, &entry.key));
        let delete = || {
            self.send(Method::DELETE, entry.kind, &entry.key, vec![], None)
                .map_err(err)
        };
        let (status, answer) = delete()?;
        let no_delete = match (status, self.said(status, &op, &answer)) {
            (_, Said::Done | Said::Absent) => None,
            (405 | 501, _) => Some(format!(
                "the cache takes no DELETE (HTTP {status} to a DELETE of a key nothing is at)"
            )),
            (_, Said::Refused(why)) => Some(why),
            (_, Said::Failed(reason)) => return Err(PlantOutcome::Error { reason }),
        };
        match self.write(journal, entry, content, None) {
            Ok(()) => {}
            // The check's own write refused: the plants' writes of this
            // kind will be, and each refusal is its carrier's verdict.
            Err(PlantOutcome::Refused { .. }) => return Ok(()),
            Err(o) => return Err(o),
        }
        let kept = "; the check's own entry, which holds no nonce, stays and is listed";
        if let Some(why) = no_delete {
            return Err(stays(&format!("{why}{kept}")));
        }
        let (status, answer) = delete()?;
        match self.said(status, &op, &answer) {
            Said::Done | Said::Absent => {}
            Said::Refused(why) | Said::Failed(why) => {
                return Err(stays(&format!(
                    "the cache did not delete the check's own entry ({why}){kept}"
                )));
            }
        }
        match self.read(entry.kind, &entry.key, None) {
            Read::Absent => {
                journal.retract(entry);
                Ok(())
            }
            Read::There(_) => Err(stays(&format!(
                "the cache answered the DELETE with HTTP {status} and kept the entry{kept}"
            ))),
            Read::Refused(why) | Read::Failed(why) => Err(PlantOutcome::Error {
                reason: format!(
                    "whether the delete check's entry is gone could not be told: {why}"
                ),
            }),
        }
    }
}
