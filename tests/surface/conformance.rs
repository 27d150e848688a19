//! The conformance suite: one set of tests run for every surface type in
//! the registry (src/surface/mod.rs `REGISTRY`) against its own control
//! instance, through the kernel's entry points (`plant_all`, `recover`,
//! `find_planted`, `cleanup_owned`). A new surface type gets these by
//! registering: plant and recover on a known-open instance, a journal
//! with foreign entries (another probe's plants, names outside runwarden's
//! form, path and URL escapes) that removes nothing, cleanup of its own
//! plants, and cleanup by probe id.

use runwarden::loopback::Knob;
use runwarden::marker::Key;
use runwarden::nonce::Nonce;
use runwarden::surface::{
    self, CleanupOutcome, Instance, PlantJob, PlantOutcome, RecoverOutcome, RunCtx, SurfaceType,
    Wanted,
};
use serde_json::{Value, json};
use std::path::Path;

/// Settings a control is made from: the filesystem takes its own; the
/// other types make theirs whole.
fn base_settings(ty: &dyn SurfaceType, dir: &Path) -> Value {
    match ty.name() {
        "filesystem" => json!({ "path": dir, "content-reads": true }),
        _ => Value::Null,
    }
}

/// The carriers one instance plants: every carrier it offers, each with a
/// nonce (`derived`: from the key and probe id, as `runwarden plant`
/// does), and the signed beacon for runner-persistence.
fn jobs(
    ty: &dyn SurfaceType,
    inst: &dyn Instance,
    ctx: &RunCtx<'_>,
    derived: bool,
) -> Vec<PlantJob> {
    ty.carriers()
        .iter()
        .filter(|c| inst.unavailable(c.name).is_none())
        .map(|c| PlantJob {
            key: c.name.into(),
            carrier: c.name.into(),
            nonce: if derived {
                ctx.key.nonce(ctx.probe_id, "conformance", c.name)
            } else {
                Nonce::generate().unwrap()
            },
            scope: None,
            beacon: (c.name == surface::RUNNER_PERSISTENCE).then(|| {
                ctx.key
                    .beacon(ctx.probe_id, "2026-12-01T00:00:00Z", Default::default())
            }),
        })
        .collect()
}

/// Plants `jobs`; the journal (creation order) and the wanted needles.
fn plant(inst: &dyn Instance, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> (Vec<Value>, Vec<Wanted>) {
    let mut journal = Vec::new();
    let outcomes = inst.plant_all(ctx, jobs, &mut |e| journal.push(e));
    let mut wanted = Vec::new();
    for (job, outcome) in jobs.iter().zip(outcomes) {
        match outcome {
            PlantOutcome::Planted { needle, .. } => wanted.push(Wanted {
                key: job.key.clone(),
                carrier: job.carrier.clone(),
                needle,
                scope: None,
            }),
            other => panic!("{}: the control refused its plant: {other:?}", job.carrier),
        }
    }
    (journal, wanted)
}

/// Which wanted carriers recovery finds (runner-persistence looks for
/// other probes' beacons, not its own plant: left out).
fn found(inst: &dyn Instance, ctx: &RunCtx<'_>, wanted: &[Wanted]) -> Vec<String> {
    let wanted: Vec<Wanted> = wanted
        .iter()
        .filter(|w| w.carrier != surface::RUNNER_PERSISTENCE)
        .cloned()
        .collect();
    inst.recover(ctx, &wanted, &mut |_| {})
        .into_iter()
        .zip(&wanted)
        .filter(|(o, _)| matches!(o, RecoverOutcome::Found { .. }))
        .map(|(_, w)| w.carrier.clone())
        .collect()
}

/// Journal lines in no plant's form, made from the lines `ours` (probe
/// `probe`) of the type under test, whatever its entry type: junk, each
/// line with a field it does not have, each field of another type, each
/// name that carries the probe id as another name (a foreign one, a path
/// or URL escape, the name without its tag, another probe's), each path
/// or URL made to climb out or name another host; and every line 0.11.0's
/// plants of the other types journalled (fixtures/journals/0.11.0.json,
/// another probe). None is the type's own.
///
/// Second, each line with a text field set to what the same field holds in
/// another of its lines, and (for a type whose names a declared scope's
/// pattern may wrap in any text: `wraps`) each name with text around it:
/// some of those are still the type's own (an intent of one plant with
/// another's time; a name a pattern `*/../x` placed), so all that is asked
/// of them is that they remove nothing of another probe's.
fn hostile(ty: &str, ours: &[Value], probe: &str, wraps: bool) -> (Vec<Value>, Vec<Value>) {
    let mut spliced = vec![];
    let mut out = vec![json!({}), json!("refs/heads/main"), json!([]), json!(7)];
    let lines: Vec<&Value> = ours.iter().map(|l| l.get("retract").unwrap_or(l)).collect();
    for line in &lines {
        if let Some(o) = line.as_object() {
            let mut extra = o.clone();
            extra.insert("runwarden-extra".into(), json!(1));
            out.push(Value::Object(extra));
            out.push(json!({ "retract": *line, "runwarden-extra": 1 }));
        }
        for (path, leaf) in leaves(line) {
            let mut variants: Vec<Value> = match leaf {
                Value::String(s) if s.contains(probe) => {
                    // (Without its tag: only a name whose last part is one.)
                    let untagged = match s.rsplit_once('-') {
                        Some((a, tag)) if surface::lower_hex(tag, 16) => a,
                        _ => "main",
                    };
                    let wrapped = [
                        format!("{s}/../x"),
                        format!("../{s}"),
                        format!("@evil.example/{s}"),
                    ];
                    if wraps {
                        spliced.extend(wrapped.iter().map(|w| {
                            let mut m = (*line).clone();
                            set(&mut m, &path, json!(w));
                            m
                        }));
                    }
                    let mut v = vec![
                        "main".to_string(),
                        untagged.to_string(),
                        s.replace(probe, "conf-theirs"),
                    ];
                    if !wraps {
                        v.extend(wrapped);
                    }
                    v.into_iter().map(Value::String).collect()
                }
                Value::String(s) if s.contains('/') => vec![
                    json!(format!("@evil.example/{s}")),
                    json!(format!("{s}/../../x")),
                ],
                _ => vec![],
            };
            variants.push(match leaf {
                Value::String(_) => json!(7),
                _ => json!("x"),
            });
            let others = lines
                .iter()
                .filter_map(|l| at(l, &path))
                .filter(|v| v.is_string() && leaf.is_string());
            for (v, strict) in variants
                .into_iter()
                .map(|v| (v, true))
                .chain(others.map(|v| (v.clone(), false)))
                .filter(|(v, _)| v != leaf && !leaf.is_null())
            {
                let mut m = (*line).clone();
                set(&mut m, &path, v);
                if strict { &mut out } else { &mut spliced }.push(m);
            }
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journals/0.11.0.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for (other, journals) in fixture.as_object().unwrap() {
        if other != ty {
            out.extend(journals["journal"].as_array().unwrap().iter().cloned());
        }
    }
    out.retain(|h| !lines.contains(&h) && !ours.contains(h));
    out.dedup();
    (out, spliced)
}

/// Every leaf of `v` (not an object or an array), with its path.
fn leaves(v: &Value) -> Vec<(Vec<String>, &Value)> {
    let mut out = vec![];
    let mut todo = vec![(vec![], v)];
    while let Some((path, v)) = todo.pop() {
        match v {
            Value::Object(m) => todo.extend(m.iter().map(|(k, v)| {
                let mut p = path.clone();
                p.push(k.clone());
                (p, v)
            })),
            Value::Array(a) => todo.extend(a.iter().enumerate().map(|(i, v)| {
                let mut p = path.clone();
                p.push(i.to_string());
                (p, v)
            })),
            _ if !path.is_empty() => out.push((path, v)),
            _ => {}
        }
    }
    out
}

/// What `v` holds at `path`.
fn at<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| match v {
        Value::Array(a) => a.get(k.parse::<usize>().ok()?),
        _ => v.get(k),
    })
}

/// `v` with `path` set to `to`.
fn set(v: &mut Value, path: &[String], to: Value) {
    let mut here = v;
    for k in path {
        here = match here {
            Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
            _ => &mut here[k.as_str()],
        };
    }
    *here = to;
}

/// The suite for one type: plant, recover, a hostile journal that
/// removes nothing (another probe's plants stay recoverable), cleanup of
/// its own plants, cleanup by probe id.
/// The suite for `ty`, its controls made like `like` (a type's settings,
/// for a type whose control takes after them: a build cache's protocol),
/// else from [`base_settings`].
fn conform(ty: &dyn SurfaceType, like: Option<&Value>) {
    let name = ty.name();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("control");
    let base = like.cloned().unwrap_or_else(|| base_settings(ty, &dir));
    let control = ty
        .control(&base, &dir)
        .unwrap_or_else(|e| panic!("{name}: no control: {e}"));
    let inst = ty.open(&control.settings).unwrap();
    let key = Key::new(Some(b"conformance-suite-key".to_vec()));
    let (ours, theirs) = (
        RunCtx {
            probe_id: "conf-ours",
            key: &key,
            surface: "test",
        },
        RunCtx {
            probe_id: "conf-theirs",
            key: &key,
            surface: "test",
        },
    );
    // Two probes' plants on one instance.
    let (journal, wanted) = plant(&*inst, &ours, &jobs(ty, &*inst, &ours, false));
    let (their_journal, their_wanted) = plant(&*inst, &theirs, &jobs(ty, &*inst, &theirs, false));
    let open = found(&*inst, &ours, &wanted);
    let their_open = found(&*inst, &theirs, &their_wanted);
    let expected: Vec<String> = wanted
        .iter()
        .filter(|w| w.carrier != surface::RUNNER_PERSISTENCE)
        .map(|w| w.carrier.clone())
        .collect();
    assert_eq!(open, expected, "{name}: the control is known open");

    // A journal of foreign entries and of the other probe's plants: the
    // kernel refuses every one, and nothing of theirs goes.
    let wraps = !ty.scope_keys().is_empty();
    let (mut forged, spliced) = hostile(name, &journal, ours.probe_id, wraps);
    forged.extend(their_journal.iter().cloned());
    let _ = surface::cleanup_owned(&*inst, &ours, &spliced);
    assert_eq!(
        found(&*inst, &theirs, &their_wanted),
        their_open,
        "{name}: a journal of one plant's fields in another's removed another probe's plants"
    );
    for (e, o) in forged
        .iter()
        .zip(surface::cleanup_owned(&*inst, &ours, &forged))
    {
        assert!(
            matches!(o, CleanupOutcome::Foreign { .. }),
            "{name}: a foreign entry was taken for ours: {e} -> {o:?}"
        );
    }
    assert_eq!(
        found(&*inst, &theirs, &their_wanted),
        their_open,
        "{name}: a forged journal removed another probe's plants"
    );

    // Its own journal, newest first: all of it is ours, nothing is left.
    let newest: Vec<Value> = journal.iter().rev().cloned().collect();
    for (e, o) in newest
        .iter()
        .zip(surface::cleanup_owned(&*inst, &ours, &newest))
    {
        assert!(
            matches!(
                o,
                CleanupOutcome::Removed
                    | CleanupOutcome::Gone
                    | CleanupOutcome::Superseded
                    | CleanupOutcome::Kept { .. }
            ),
            "{name}: its own entry was not cleaned: {e} -> {o:?}"
        );
    }
    assert_eq!(
        found(&*inst, &theirs, &their_wanted),
        their_open,
        "{name}: cleaning one probe removed another's plants"
    );

    // Cleanup by probe id: a plant with derived nonces, found again and
    // removed; whatever is found is ours.
    let derived = RunCtx {
        probe_id: "conf-derived",
        key: &key,
        surface: "test",
    };
    let djobs = jobs(ty, &*inst, &derived, true);
    let _ = plant(&*inst, &derived, &djobs);
    if let Ok(surface::Found { ours: found, left }) = inst.find_planted(&derived, &djobs) {
        // Only its own plants are there: nothing found is someone else's.
        assert!(
            left.is_empty(),
            "{name}: find left {left:?} of its own plants"
        );
        let outcomes = surface::cleanup_owned(&*inst, &derived, &found);
        for (e, o) in found.iter().zip(&outcomes) {
            assert!(
                !matches!(o, CleanupOutcome::Foreign { .. }),
                "{name}: what find_planted found is not ours: {e} -> {o:?}"
            );
        }
        // ... and by the other probe's id, none of it is.
        let foreign = surface::cleanup_owned(&*inst, &ours, &found);
        assert!(
            foreign
                .iter()
                .all(|o| matches!(o, CleanupOutcome::Foreign { .. })),
            "{name}: another probe's found plants were taken for ours"
        );
    }
    for knob in Knob::ALL {
        knobbed(ty, &key, knob, like);
    }
    // Every type declares its routes, one for every carrier (the kernel
    // makes every miss of the others ERROR), each route named once.
    let routes = ty.routes();
    assert!(!routes.is_empty(), "{name}: no route declared");
    {
        for c in ty.carriers() {
            assert!(
                routes.iter().any(|(_, cs)| cs.contains(&c.name)),
                "{name}: no declared route reads {}",
                c.name
            );
        }
        let mut names: Vec<&str> = routes.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), routes.len(), "{name}: a route declared twice");
    }
}

/// A fault of the control's read routes ([`Knob`], each the control's
/// service has): no carrier may read as closed (NOT FOUND) on a
/// known-open control whose route is not current, and cleanup counts
/// nothing as gone that is still there; once the fault ends, cleanup
/// ends. A lagging listing is said in some carrier's ERROR; a listing
/// shifted once (or with its count kept) settles, and every carrier is
/// recovered. A remote that moves what was pushed keeps it moved once
/// the fault ends: cleanup then leaves each moved ref, naming where it is.
/// Each fault on a control of its own (a run's ten notices are used up by
/// four probes).
fn knobbed(ty: &dyn SurfaceType, key: &Key, knob: Knob, like: Option<&Value>) {
    let name = ty.name();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("control");
    let base = like.cloned().unwrap_or_else(|| base_settings(ty, &dir));
    let control = ty.control(&base, &dir).unwrap();
    let Some(turn) = &control.knobs else { return };
    let mut settings = control.settings.clone();
    if settings.get("consistency_wait_ms").is_some() {
        settings["consistency_wait_ms"] = json!(300);
    }
    let inst = ty.open(&settings).unwrap();
    let probe = format!(
        "conf-knob-{}",
        Knob::ALL.iter().position(|k| *k == knob).unwrap()
    );
    let ctx = RunCtx {
        probe_id: &probe,
        key,
        surface: "test",
    };
    // A lag hides what is made after it began; a shift, what run B pages;
    // a rename, what run A pushes.
    let before = matches!(knob, Knob::Lag | Knob::RenameRefs);
    if !turn(knob, before) {
        return;
    }
    let what = knob.name();
    let (journal, wanted) = plant(&*inst, &ctx, &jobs(ty, &*inst, &ctx, false));
    if !before {
        turn(knob, true);
    }
    let looked: Vec<&Wanted> = wanted
        .iter()
        .filter(|w| w.carrier != surface::RUNNER_PERSISTENCE)
        .collect();
    let owned: Vec<Wanted> = looked.iter().map(|w| (*w).clone()).collect();
    let outcomes = inst.recover(&ctx, &owned, &mut |_| {});
    for (w, o) in owned.iter().zip(&outcomes) {
        assert!(
            !matches!(o, RecoverOutcome::NotFound { .. }),
            "{name}: under {what}, {} reads as closed: {o:?}",
            w.carrier
        );
    }
    match knob {
        Knob::Lag => assert!(
            outcomes.iter().any(|o| matches!(o, RecoverOutcome::Error { reason } if reason.contains("not yet consistent"))),
            "{name}: no carrier says the listing lags: {outcomes:?}"
        ),
        Knob::ShiftOnce | Knob::ShiftKeepingCount => {
            for (w, o) in owned.iter().zip(&outcomes) {
                assert!(
                    matches!(o, RecoverOutcome::Found { .. }),
                    "{name}: under {what}, {} was not recovered once the listing settled: {o:?}",
                    w.carrier
                );
            }
        }
        Knob::Evict => assert!(
            outcomes.iter().any(|o| matches!(o, RecoverOutcome::Error { reason } if reason.contains("eviction"))),
            "{name}: no carrier says the store dropped older entries: {outcomes:?}"
        ),
        Knob::ShiftEvery | Knob::StaleDocument | Knob::RenameRefs => {}
    }
    let newest: Vec<Value> = journal.iter().rev().cloned().collect();
    let under = surface::cleanup_owned(&*inst, &ctx, &newest);
    // (What an eviction took is gone indeed.)
    let gone_ok = knob == Knob::Evict;
    for (e, o) in newest.iter().zip(&under) {
        assert!(
            !matches!(o, CleanupOutcome::Foreign { .. })
                && (gone_ok || !matches!(o, CleanupOutcome::Gone)),
            "{name}: under {what}, {e} -> {o:?}"
        );
    }
    turn(knob, false);
    let left: Vec<Value> = newest
        .iter()
        .zip(&under)
        .filter(|(_, o)| !matches!(o, CleanupOutcome::Removed))
        .map(|(e, _)| e.clone())
        .collect();
    let after = surface::cleanup_owned(&*inst, &ctx, &left);
    if knob == Knob::RenameRefs {
        assert!(!left.is_empty(), "{name}: under {what}, nothing was moved");
        for (e, o) in left.iter().zip(&after) {
            assert!(
                matches!(o, CleanupOutcome::Left { reason } if reason.contains("moved by the remote to \"refs/heads/archive/")),
                "{name}: once {what} ended, a moved ref is not left by name: {e} -> {o:?}"
            );
        }
        return;
    }
    for (e, o) in left.iter().zip(after) {
        assert!(
            !matches!(
                o,
                CleanupOutcome::Left { .. } | CleanupOutcome::Foreign { .. }
            ),
            "{name}: once {what} ended, {e} -> {o:?}"
        );
    }
}

#[test]
fn every_registered_surface_type_conforms() {
    for ty in surface::REGISTRY {
        conform(*ty, None);
    }
}

/// The build cache's control speaks the configured surface's protocol
/// (Turborepo's when none is configured, above): the suite for each of the
/// others too, Bazel's action results and blobs among them.
#[test]
fn a_build_cache_conforms_in_every_protocol() {
    let ty = surface::by_name("build-cache").unwrap();
    for protocol in ["bazel", "gradle", "nx"] {
        let like = json!({
            "url": "http://127.0.0.1:9/",
            "protocol": protocol,
            "auth": {},
            "team": null,
            "control": false,
        });
        let dir = tempfile::tempdir().unwrap();
        let c = ty.control(&like, dir.path()).unwrap();
        assert_eq!(
            c.settings["protocol"], protocol,
            "the control is not {protocol}'s"
        );
        conform(ty, Some(&like));
    }
}

/// A receipt written by 0.11.0 still cleans up: every journal line its
/// plants made on each type's control (fixtures/journals/0.11.0.json,
/// probe `journal-fixture`, this suite's key) is still its type's own, and
/// cleaning it on a fresh control refuses none of it.
#[test]
fn journals_written_by_0_11_0_still_clean_up() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journals/0.11.0.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let key = Key::new(Some(b"conformance-suite-key".to_vec()));
    let ctx = RunCtx {
        probe_id: "journal-fixture",
        key: &key,
        surface: "test",
    };
    for ty in surface::REGISTRY {
        let name = ty.name();
        let lines: Vec<Value> = ["journal", "found"]
            .iter()
            .flat_map(|k| fixture[name][k].as_array().cloned().unwrap_or_default())
            .collect();
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("control");
        let control = ty.control(&base_settings(*ty, &dir), &dir).unwrap();
        let inst = ty.open(&control.settings).unwrap();
        for line in &lines {
            let entry = line.get("retract").unwrap_or(line);
            if let Err(e) = inst.owns(&ctx, entry) {
                panic!("{name}: a 0.11.0 journal line is no longer its own: {line} ({e})");
            }
        }
        for (line, o) in lines
            .iter()
            .zip(surface::cleanup_owned(&*inst, &ctx, &lines))
        {
            assert!(
                !matches!(o, CleanupOutcome::Foreign { .. }),
                "{name}: a 0.11.0 journal line was refused: {line} -> {o:?}"
            );
        }
    }
}

/// 0.11.0 retracted a git ref by its name alone (a push the remote
/// refused, the deleted ref run A removed): that still takes back the
/// ref's entry, which needs no push, while a ref no retraction names is
/// cleaned (here: left, its remote gone).
#[test]
fn a_git_ref_retracted_by_name_needs_no_cleanup() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journals/0.11.0.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let lines = fixture["git-remote"]["journal"].as_array().unwrap();
    let (taken, kept) = (lines[0].clone(), lines[1].clone());
    let journal = vec![taken.clone(), kept, json!({ "retract": taken["ref"] })];
    let ty = surface::by_name("git-remote").unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("remote");
    let control = ty.control(&Value::Null, &dir).unwrap();
    let inst = ty.open(&control.settings).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let key = Key::new(Some(b"conformance-suite-key".to_vec()));
    let ctx = RunCtx {
        probe_id: "journal-fixture",
        key: &key,
        surface: "test",
    };
    let out = surface::cleanup_owned(&*inst, &ctx, &journal);
    assert_eq!(out[0], CleanupOutcome::Superseded, "{out:?}");
    assert!(matches!(out[1], CleanupOutcome::Left { .. }), "{out:?}");
    assert_eq!(out[2], CleanupOutcome::Superseded, "{out:?}");
}
