//! Carriers as enums: each surface type declares its carriers once, in a
//! [`carriers!`] invocation, which makes both the enum its code matches on
//! and the [`Carrier`] table [`SurfaceType::carriers`] returns (the names
//! config, JSON reports, SARIF and docs use).
//!
//! A carrier's name arrives as a string (a [`PlantJob`], a [`Wanted`], a
//! config entry, a tagged name read back): a surface parses it once, where
//! it comes in ([`CarrierSet::parse`]: the kernel's adapter parses every
//! job's and wanted needle's; [`CarrierSet::tagged`]), and matches on
//! variants from there on.
//!
//! [`SurfaceType::carriers`]: super::SurfaceType::carriers
//! [`Wanted`]: super::Wanted

use super::{Carrier, RecoverOutcome, RunCtx};
use crate::fault::Fault;

/// A surface type's carriers, as the enum [`carriers!`] makes.
pub trait CarrierSet: Copy + Eq + 'static {
    /// Every carrier, in the order of the surface's table.
    const ALL: &'static [Self];

    /// The surface's table (`CARRIERS`), in the same order.
    const TABLE: &'static [Carrier];

    /// The stable kebab-case id (`file-content`).
    fn name(self) -> &'static str;

    /// The carrier named `name`, when it is one of this surface's.
    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.name() == name)
    }

    /// The carrier a [`tagged_name`](super::tagged_name) of this probe was
    /// made for, when its tag verifies ([`super::tagged_carrier`]).
    fn tagged(ctx: &RunCtx<'_>, name: &str, bound: &str) -> Option<Self> {
        super::tagged_carrier(ctx, Self::TABLE, name, bound).and_then(Self::parse)
    }

    /// [`super::owned_name`], by carrier: the carrier whose plant makes
    /// exactly `name`, where `with_nonce` says which carriers put their
    /// nonce in it; `Invalid` for any other name.
    fn owned(
        ctx: &RunCtx<'_>,
        name: &str,
        bound: &str,
        with_nonce: &dyn Fn(Self) -> bool,
    ) -> Result<Self, Fault> {
        let c = super::owned_name(ctx, Self::TABLE, name, bound, &|c| {
            Self::parse(c).is_some_and(with_nonce)
        })?;
        // (`owned_name` answers a name of the table, which always parses.)
        Self::parse(c).ok_or_else(|| Fault::invalid(format!("{c} is not a carrier")))
    }
}

/// What recovery says of a wanted needle whose carrier is none of the
/// surface's.
pub fn not_a_carrier() -> RecoverOutcome {
    RecoverOutcome::Error {
        reason: "not a carrier of this surface".into(),
    }
}

/// Declares a surface's carriers: the enum (`Clone, Copy, Debug,
/// PartialEq, Eq, Hash`, shown as its name), its [`CarrierSet`] impl
/// (`ALL`, `name`, `parse`, also inherent so no import is needed), and
/// `static CARRIERS: &[Carrier]`, the table `SurfaceType::carriers`
/// returns, in the same order. Each line is
/// `Variant = "name", Persistence, "description";`.
//
// Why a macro: each carrier's name is then spelled once. The table and the
// enum come from the same lines, so they cannot drift apart (a carrier in
// the table the code never matches, a name matched that is not in the
// table), and a misspelt name inside a surface is a compile error (an
// unknown variant) rather than an arm that never matches.
macro_rules! carriers {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $name:expr, $persistence:ident, $description:expr;
            )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $enum {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $enum {
            /// Every carrier, in the order of [`CARRIERS`].
            $vis const ALL: &'static [$enum] = &[$($enum::$variant),+];

            /// The stable kebab-case id.
            $vis const fn name(self) -> &'static str {
                match self {
                    $( $enum::$variant => $name, )+
                }
            }

            /// The carrier named `name`, when it is one of this surface's.
            $vis fn parse(name: &str) -> Option<$enum> {
                <$enum as $crate::surface::carrier::CarrierSet>::parse(name)
            }
        }

        impl $crate::surface::carrier::CarrierSet for $enum {
            const ALL: &'static [$enum] = $enum::ALL;
            const TABLE: &'static [$crate::surface::Carrier] = CARRIERS;

            fn name(self) -> &'static str {
                $enum::name(self)
            }
        }

        impl ::std::fmt::Display for $enum {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        /// The carriers, as `SurfaceType::carriers` lists them (made with
        /// the enum: see [`carriers!`](crate::surface::carrier::carriers)).
        $vis static CARRIERS: &[$crate::surface::Carrier] = &[
            $(
                $crate::surface::Carrier {
                    name: $enum::$variant.name(),
                    persistence: $crate::surface::Persistence::$persistence,
                    description: $description,
                },
            )+
        ];
    };
}

pub(crate) use carriers;

#[cfg(test)]
mod tests {
    use crate::surface::{Persistence, RUNNER_PERSISTENCE};

    carriers! {
        /// A test surface's carriers.
        enum Test {
            FileName = "file-name", Durable, "the nonce in a name";
            Beacon = RUNNER_PERSISTENCE, Transient, "a beacon of another probe";
        }
    }

    #[test]
    fn the_table_and_the_enum_are_one_list() {
        assert_eq!(Test::ALL, [Test::FileName, Test::Beacon]);
        assert_eq!(CARRIERS.len(), Test::ALL.len());
        for (c, row) in Test::ALL.iter().zip(CARRIERS) {
            assert_eq!(c.name(), row.name);
            assert_eq!(c.to_string(), row.name);
            assert_eq!(Test::parse(row.name), Some(*c));
        }
        assert_eq!(CARRIERS[1].name, "runner-persistence");
        assert_eq!(CARRIERS[1].persistence, Persistence::Transient);
        assert_eq!(CARRIERS[0].description, "the nonce in a name");
        assert_eq!(Test::parse("file-size"), None);
    }
}
