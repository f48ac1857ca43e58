//! Text helpers every front needs once: descriptions, residues and
//! listings cut to a width.

/// `text` cut to at most `max` characters, the last an ellipsis when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::shorten;

    #[test]
    fn cuts_by_characters_and_marks_the_cut() {
        for (text, max, expected) in [
            ("abcdef", 4, "abc…"),
            ("abcd", 4, "abcd"),
            ("", 3, ""),
            ("ééééé", 3, "éé…"),
            ("abc", 0, "…"),
        ] {
            assert_eq!(shorten(text, max), expected, "{text:?} to {max}");
        }
    }
}
