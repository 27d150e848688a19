//! What watch mode cannot see here: it lists the projects the simple
//! index's root lists (the listing run B starts from), and a project listed
//! or gone carries its name. Versions, descriptions and file names are on
//! each project's own page, which watch mode does not read: those carriers
//! are SKIPPED.

/// Why watch mode cannot see every carrier but project-name.
pub(super) const ON_PROJECT_PAGES: &str = "versions, descriptions and file names are on each project's page, which watch mode does not read";
