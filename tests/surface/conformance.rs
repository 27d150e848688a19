//! The conformance suite: one set of tests run for every surface type in
//! the registry (src/surface/mod.rs `REGISTRY`) against its own control
//! instance, through the kernel's entry points (`plant_all`, `recover`,
//! `find_planted`, `cleanup_owned`). A new surface type gets these by
//! registering: plant and recover on a known-open instance, a journal
//! with foreign entries (another probe's plants, names outside runwarden's
//! form, path and URL escapes) that removes nothing, cleanup of its own
//! plants, and cleanup by probe id.

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

/// Journal entries in no plant's form, one for each field shape a
/// surface journals: foreign names and objects, path and URL escapes,
/// names of runwarden's form without a tag, an empty match.
fn hostile(probe: &str) -> Vec<Value> {
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let hex = "0123456789abcdef0123456789abcdef";
    let rw = format!("runwarden-{probe}");
    vec![
        json!({ "ref": "refs/heads/main", "sha": sha }),
        json!({ "ref": "refs/tags/v1.0", "sha": sha }),
        json!({ "ref": format!("refs/heads/runwarden/{probe}/../../main"), "sha": sha }),
        json!({ "retract": "refs/heads/main" }),
        json!({ "name": ".runwarden-notes", "kind": "file", "dev": 1, "ino": 1, "dir_dev": 1, "dir_ino": 1 }),
        json!({ "name": ".runwarden-beacon-other", "kind": "file", "dev": 1, "ino": 1, "dir_dev": 1, "dir_ino": 1 }),
        json!({ "name": format!(".runwarden-{probe}-../x"), "kind": "file", "dev": 1, "ino": 1, "dir_dev": 1, "dir_ino": 1 }),
        json!({ "intent": { "name": ".runwarden-notes", "kind": "file", "dir_dev": 1, "dir_ino": 1, "uid": 0, "after": [0, 0] } }),
        json!({ "name": format!(".runwarden-{probe}-symlink-target"), "kind": "dir", "dev": 1, "ino": 1, "dir_dev": 1, "dir_ino": 1 }),
        json!({ "carrier": "label-name", "list": "/repos/o/r/labels", "items": null, "match": {}, "object": "/repos/o/r/labels/{}", "key": "name", "ref": "bug" }),
        json!({ "carrier": "milestone-title", "list": "/repos/o/r/milestones?state=all", "items": null, "match": {}, "object": "/repos/o/r/milestones/{}", "key": "number", "ref": null }),
        json!({ "carrier": "label-name", "list": "@evil.example/x", "items": null, "match": { "name": format!("rw-{probe}-{hex}") }, "object": "@evil.example/x/{}", "key": "name", "ref": "x" }),
        json!({ "name": "left-pad", "versions": ["1.3.0"] }),
        json!({ "name": format!("{rw}-x/../left-pad"), "versions": ["0.0.0"] }),
        json!({ "name": format!("{rw}-package-name-{hex}"), "versions": ["0.0.0"] }),
        json!({ "project": format!("{rw}-version-0123456789abcdef"), "version": "..", "files": [] }),
        json!({ "project": "requests", "version": "2.0.0", "files": ["requests-2.0.0.tar.gz"] }),
        json!({ "key": format!("npm-linux-{rw}"), "version": "0", "scope": null }),
        json!({ "key": format!("{rw}-cache-key-{hex}"), "version": "0", "scope": "refs/heads/main" }),
        json!({ "name": format!("{rw}-artifact-name") }),
        json!({ "name": "build-output", "id": 7 }),
        json!({ "name": format!("{rw}-cache-key-{hex}-0123456789abcdef"), "kind": "file", "sha256": "00" }),
        json!({ "name": "runwarden-x/../../index", "kind": "collection" }),
        json!({}),
        json!("refs/heads/main"),
    ]
}

/// The suite for one type: plant, recover, a hostile journal that
/// removes nothing (another probe's plants stay recoverable), cleanup of
/// its own plants, cleanup by probe id.
fn conform(ty: &dyn SurfaceType) {
    let name = ty.name();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("control");
    let control = ty
        .control(&base_settings(ty, &dir), &dir)
        .unwrap_or_else(|e| panic!("{name}: no control: {e}"));
    let inst = ty.open(&control.settings).unwrap();
    let key = Key::new(Some(b"conformance-suite-key".to_vec()));
    let (ours, theirs) = (
        RunCtx {
            probe_id: "conf-ours",
            key: &key,
        },
        RunCtx {
            probe_id: "conf-theirs",
            key: &key,
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
    let mut forged = hostile(ours.probe_id);
    forged.extend(their_journal.iter().cloned());
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
    };
    let djobs = jobs(ty, &*inst, &derived, true);
    let _ = plant(&*inst, &derived, &djobs);
    if let Ok(found) = inst.find_planted(&derived, &djobs) {
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
    lagging(ty, &control, &key);
}

/// A lagging listing (the control's listings leave out what was made
/// since the lag began, every other route still serves it): no carrier
/// whose only route is the listing is NOT FOUND, at least one is ERROR
/// saying the listing is not consistent, and cleanup counts nothing as
/// gone that is still there; once the listing catches up, cleanup ends.
fn lagging(ty: &dyn SurfaceType, control: &surface::Control, key: &Key) {
    let Some(lag) = &control.lag else { return };
    let name = ty.name();
    let mut settings = control.settings.clone();
    settings["consistency_wait_ms"] = json!(300);
    let inst = ty.open(&settings).unwrap();
    let ctx = RunCtx {
        probe_id: "conf-lag",
        key,
    };
    lag(true);
    let (journal, wanted) = plant(&*inst, &ctx, &jobs(ty, &*inst, &ctx, false));
    let outcomes = inst.recover(&ctx, &wanted, &mut |_| {});
    for (w, o) in wanted.iter().zip(&outcomes) {
        assert!(
            !matches!(o, RecoverOutcome::NotFound { .. }),
            "{name}: {} reads as closed from a lagging listing: {o:?}",
            w.carrier
        );
    }
    assert!(
        outcomes.iter().any(|o| matches!(o, RecoverOutcome::Error { reason } if reason.contains("not yet consistent"))),
        "{name}: no carrier says the listing lags: {outcomes:?}"
    );
    let newest: Vec<Value> = journal.iter().rev().cloned().collect();
    let lagged = surface::cleanup_owned(&*inst, &ctx, &newest);
    for (e, o) in newest.iter().zip(&lagged) {
        assert!(
            !matches!(o, CleanupOutcome::Gone | CleanupOutcome::Foreign { .. }),
            "{name}: under a lagging listing, {e} -> {o:?}"
        );
    }
    lag(false);
    for (e, o) in newest
        .iter()
        .zip(surface::cleanup_owned(&*inst, &ctx, &newest))
    {
        assert!(
            !matches!(
                o,
                CleanupOutcome::Left { .. } | CleanupOutcome::Foreign { .. }
            ),
            "{name}: once the listing caught up, {e} -> {o:?}"
        );
    }
}

#[test]
fn every_registered_surface_type_conforms() {
    for ty in surface::REGISTRY {
        conform(*ty);
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
