//! Settings with a fixed set of named values (`--backend ort`, `long_documents="head-tail"`):
//! each type lists its values once, with the name that flags, keyword arguments and metadata
//! spell and a line of help. The command lines turn the list into their parsers; the
//! libraries need no command-line crate.

/// A setting with a fixed set of named values.
pub trait Choice: Copy + PartialEq + Send + Sync + 'static {
    /// Every value with its name and a line of help, in the order help lists them.
    const CHOICES: &'static [(Self, &'static str, &'static str)];

    /// The name flags and keyword arguments spell this value with.
    fn name(self) -> &'static str {
        Self::CHOICES.iter().find(|(value, _, _)| *value == self).map_or("", |(_, name, _)| name)
    }

    /// The value named `text` (exactly, as listed).
    fn from_name(text: &str) -> Option<Self> {
        Self::CHOICES.iter().find(|(_, name, _)| *name == text).map(|(value, _, _)| *value)
    }

    /// The value `argument` was given as `text`, or an error that lists the names.
    fn parse_argument(argument: &str, text: &str) -> anyhow::Result<Self> {
        Self::from_name(text).ok_or_else(|| {
            let names: Vec<&str> = Self::CHOICES.iter().map(|(_, name, _)| *name).collect();
            anyhow::anyhow!("{argument}={text:?} is not one of: {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Choice;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Colour {
        Red,
        Blue,
    }

    impl Choice for Colour {
        const CHOICES: &'static [(Self, &'static str, &'static str)] =
            &[(Colour::Red, "red", "warm"), (Colour::Blue, "dark-blue", "cold")];
    }

    #[test]
    fn names_round_trip_and_an_unknown_name_lists_the_others() {
        assert_eq!(Colour::Blue.name(), "dark-blue");
        assert_eq!(Colour::from_name("red"), Some(Colour::Red));
        let error = Colour::parse_argument("colour", "green").expect_err("not a colour");
        assert_eq!(error.to_string(), "colour=\"green\" is not one of: red, dark-blue");
    }
}
