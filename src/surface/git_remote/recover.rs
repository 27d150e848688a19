//! Run B: one ls-remote for the name carriers (their only route), one
//! fetch of the agreed refs that exist, each content carrier read from
//! its agreed object, and the unreachable commit fetched by id.

use super::*;

impl Instance {
    /// The text a content carrier lives in, from the locally fetched ref.
    pub(super) fn read_carrier(
        &self,
        dir: &Path,
        carrier: &str,
        local: &str,
    ) -> Result<String, String> {
        match carrier {
            "commit-message" => self.plumb(dir, &["log", "-1", "--format=%B", local], &[], b""),
            "author-name" => self.plumb(dir, &["log", "-1", "--format=%an", local], &[], b""),
            "author-email" => self.plumb(dir, &["log", "-1", "--format=%ae", local], &[], b""),
            "annotated-tag-message" => self.plumb(dir, &["cat-file", "-p", local], &[], b""),
            "file-path" => self.plumb(dir, &["ls-tree", "-r", "--name-only", local], &[], b""),
            // Every blob of the commit's tree (notes: the notes tree).
            "file-content" | "notes" => {
                let listing = self.plumb(dir, &["ls-tree", "-r", local], &[], b"")?;
                let blobs: String = listing
                    .lines()
                    .filter_map(|l| l.split_whitespace().nth(2))
                    .map(|b| format!("{b}\n"))
                    .collect();
                self.plumb(dir, &["cat-file", "--batch"], &[], blobs.as_bytes())
            }
            other => Err(format!("no reader for carrier {other}")),
        }
    }

    /// Fetches one commit by id (not advertised by any ref) and reads it.
    /// A failure of run B's git, as the outcome it means.
    pub(super) fn failure(&self, reason: String) -> RecoverOutcome {
        if self.refused(&reason) {
            RecoverOutcome::Denied {
                reason: format!("the remote refused run B: {reason}"),
            }
        } else {
            RecoverOutcome::Failed { reason }
        }
    }

    pub(super) fn fetch_by_id(
        &self,
        dir: &Path,
        w: &Wanted,
        text: &str,
    ) -> Result<Option<String>, RecoverOutcome> {
        let Some(sha) = w.needle.get("sha").and_then(Value::as_str) else {
            return Err(RecoverOutcome::Failed {
                reason: "no object id to fetch".into(),
            });
        };
        let args: Vec<String> = vec![
            "fetch".into(),
            "--no-tags".into(),
            "-q".into(),
            self.s.url.clone(),
            sha.into(),
        ];
        let (out, _) = self.remote_run(dir, &args);
        if !out.success {
            let reason = out.reason();
            // The server declining to serve an unadvertised object is its
            // own policy: the channel is closed.
            if reason.contains("upload-pack: not our ref") || reason.contains("unadvertised object")
            {
                return Err(RecoverOutcome::Denied {
                    reason: format!("the remote does not serve unadvertised objects: {reason}"),
                });
            }
            return Err(self.failure(reason));
        }
        let body = self
            .plumb(dir, &["cat-file", "-p", sha], &[], b"")
            .map_err(|reason| RecoverOutcome::Failed { reason })?;
        Ok(body.contains(text).then(|| {
            format!(
                "run B fetched commit {} by id (no ref points at it) and read the nonce",
                &sha[..12.min(sha.len())]
            )
        }))
    }
}

impl Instance {
    pub(super) fn recover_refs(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let all = |o: RecoverOutcome| wanted.iter().map(|_| o.clone()).collect::<Vec<_>>();
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => return all(RecoverOutcome::Failed { reason: e }),
        };
        let dir = work.path();
        let text = |w: &Wanted| {
            w.needle
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let refname = |w: &Wanted| {
            w.needle
                .get("ref")
                .and_then(Value::as_str)
                .map(String::from)
        };
        let mut found: Vec<Option<String>> = wanted.iter().map(|_| None).collect();

        // 1. One ls-remote: ref names carry the name carriers; it also
        // tells which agreed refs exist. Streamed: memory holds only those.
        let names: Vec<(usize, String)> = wanted
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                matches!(
                    w.carrier.as_str(),
                    "branch-name" | "tag-name" | "custom-ref" | "deleted-ref"
                )
            })
            .map(|(i, w)| (i, text(w)))
            .collect();
        let agreed: HashSet<String> = wanted.iter().filter_map(refname).collect();
        let mut present: HashSet<String> = HashSet::new();
        let mut listed: u64 = 0;
        // This probe's name markers: any other ref in that form is one no
        // plant with this key made.
        let tag = format!("runwarden-{}-", ctx.probe_id);
        let ours: HashSet<&str> = names.iter().map(|(_, t)| t.as_str()).collect();
        let ls = self.remote_stream(dir, &["ls-remote".into(), self.s.url.clone()], |line| {
            listed += 1;
            let Some(tab) = line.iter().position(|b| *b == b'\t') else {
                return;
            };
            let name = &line[tab + 1..];
            if !ours.is_empty()
                && let Some(hex) = marker_hex(name, ctx.probe_id, &tag)
                && !ours.contains(hex)
            {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name),
                    detail: "a ref named like a marker of this probe, with a nonce no plant with this key made: someone else writes here".into(),
                    beacon: None,
                });
            }
            for (i, t) in &names {
                if found[*i].is_none() && memchr::memmem::find(name, t.as_bytes()).is_some() {
                    found[*i] = Some(format!(
                        "run B listed ref {} whose name carries the nonce",
                        escape::bytes(name)
                    ));
                }
            }
            if let Ok(n) = std::str::from_utf8(name)
                && agreed.contains(n)
            {
                present.insert(n.to_string());
            }
        });
        if !ls.success {
            let reason = ls.reason();
            return all(if self.refused(&reason) {
                RecoverOutcome::Denied {
                    reason: format!("the remote refused run B's ls-remote: {reason}"),
                }
            } else {
                let what = if no_credential(&unquoted(&reason)) {
                    "the remote asked for credentials and runwarden had none to give"
                } else if is_refusal(&reason) {
                    "authentication failed and the only credential is a credential helper, which may work in the job but not here"
                } else {
                    "remote unreachable"
                };
                RecoverOutcome::Failed {
                    reason: format!("{what}: ls-remote {} failed: {reason}", self.s.shown),
                }
            });
        }

        // 2. One fetch of the agreed refs that exist.
        let mut local: HashMap<String, String> = HashMap::new();
        let mut fetch_error: Option<String> = None;
        if !present.is_empty() {
            let mut args: Vec<String> = vec![
                "fetch".into(),
                "--no-tags".into(),
                "-q".into(),
                self.s.url.clone(),
            ];
            for (i, r) in present.iter().enumerate() {
                let dst = format!("refs/runwarden-b/{i}");
                args.push(format!("+{r}:{dst}"));
                local.insert(r.clone(), dst);
            }
            let (out, _) = self.remote_run(dir, &args);
            if !out.success {
                fetch_error = Some(out.reason());
            }
        }

        // 3. Read each carrier's agreed object. Failures are typed where
        // they happen (a refusal is Denied, anything else Failed), never
        // re-read from their text.
        let mut failures: Vec<Option<RecoverOutcome>> = wanted.iter().map(|_| None).collect();
        for (i, w) in wanted.iter().enumerate() {
            if found[i].is_some() {
                continue;
            }
            let t = text(w);
            let got: Result<Option<String>, RecoverOutcome> = match (w.carrier.as_str(), refname(w))
            {
                ("unreachable-object", _) => self.fetch_by_id(dir, w, &t),
                // Name carriers were looked for in the listing.
                (c, None) if is_name_carrier(c) => Ok(None),
                // A content carrier without its agreed ref was never read:
                // that is no PASS.
                (c, None) => Err(RecoverOutcome::Failed {
                    reason: format!("no agreed ref to read {c} from"),
                }),
                (_, Some(r)) if !present.contains(&r) => Ok(None),
                (_, Some(_)) if fetch_error.is_some() => {
                    Err(self.failure(fetch_error.clone().unwrap_or_default()))
                }
                (c, Some(r)) => match self.read_carrier(dir, c, &local[&r]) {
                    Ok(content) => Ok(content.contains(&t).then(|| {
                        format!(
                            "run B fetched {} and read the nonce in its {c}",
                            escape::bytes(r.as_bytes())
                        )
                    })),
                    // Local plumbing in run B's own scratch repository: the
                    // remote had no say, so never a refusal.
                    Err(reason) => Err(RecoverOutcome::Failed { reason }),
                },
            };
            match got {
                Ok(hit) => found[i] = hit,
                Err(o) => failures[i] = Some(o),
            }
        }

        (0..wanted.len())
            .map(|i| {
                if let Some(d) = found[i].take() {
                    RecoverOutcome::Found { detail: d }
                } else if let Some(o) = failures[i].take() {
                    o
                } else {
                    RecoverOutcome::NotFound {
                        detail: format!(
                            "run B listed {listed} refs of {} and read what it could; no nonce",
                            self.s.shown
                        ),
                    }
                }
            })
            .collect()
    }
}
