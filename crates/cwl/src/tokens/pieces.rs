//! o200k's pre-tokenizer for ASCII text, written out by hand.
//!
//! Before byte-pair encoding, o200k splits text into pieces with a regular
//! expression (words with their leading space or mark, runs of up to three
//! digits, punctuation runs, whitespace runs). On a proxy's or replay's
//! tool outputs that regular expression takes about two thirds of the
//! counting time. On ASCII text every class it uses is a byte class, so
//! the same split is one pass over the bytes; the property test below holds
//! it to `bpe_openai`'s own split.

use std::cell::RefCell;
use std::hash::Hasher;

use bpe_openai::byte_pair_encoding::BytePairEncoding;
use rustc_hash::FxHasher;

/// The longest piece remembered, in bytes.
const REMEMBERED: usize = 22;

/// Pieces remembered per thread (a power of two).
const SLOTS: usize = 1 << 14;

/// One remembered piece and its token count; an empty slot has length 0,
/// which no piece has.
#[derive(Clone, Copy)]
struct Slot {
    bytes: [u8; REMEMBERED],
    len: u8,
    tokens: u8,
}

thread_local! {
    /// Words and marks repeat all through a prompt: each thread remembers
    /// the count of the short pieces it saw last, one per slot, so most
    /// pieces skip byte-pair encoding (half of the counting time otherwise).
    static SEEN: RefCell<Vec<Slot>> = RefCell::new(vec![
        Slot { bytes: [0; REMEMBERED], len: 0, tokens: 0 };
        SLOTS
    ]);
}

/// The o200k token count of `text`, as `bpe_openai` gives it: ASCII
/// lines split here, the others by the crate.
pub(super) fn count(text: &str) -> usize {
    let tokenizer = bpe_openai::o200k_base();
    let line_count = |line: &str| {
        if line.is_ascii() {
            count_ascii(&tokenizer.bpe, line.as_bytes())
        } else {
            tokenizer.count(line)
        }
    };
    if text.is_ascii() {
        // One line as far as counting goes: no need to find the cuts.
        return line_count(text);
    }
    lines(text).map(line_count).sum()
}

/// The o200k token count of `text` (ASCII): its pieces, each encoded by
/// `bpe` or remembered.
fn count_ascii(bpe: &BytePairEncoding, text: &[u8]) -> usize {
    SEEN.with_borrow_mut(|seen| {
        let mut tokens = 0;
        each_piece(text, |piece| {
            tokens += if piece.len() > REMEMBERED {
                bpe.count(piece)
            } else {
                let mut hasher = FxHasher::default();
                hasher.write(piece);
                let slot = &mut seen[hasher.finish() as usize & (SLOTS - 1)];
                let len = piece.len();
                if usize::from(slot.len) == len && slot.bytes[..len] == *piece {
                    usize::from(slot.tokens)
                } else {
                    let counted = bpe.count(piece);
                    slot.bytes[..len].copy_from_slice(piece);
                    slot.len = len as u8;
                    slot.tokens = counted as u8;
                    counted
                }
            };
        });
        tokens
    })
}

/// `text` cut into lines where no piece of o200k's can span the cut:
/// after a line feed followed by an ASCII byte that is neither whitespace
/// nor `/` (a run of marks takes the line breaks and slashes after it, and
/// a whitespace run reaches to its last line break). Each line is then
/// split and counted alone, so a non-ASCII character costs the slow path
/// its own line only.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let mut at = start;
        let end = loop {
            let Some(offset) = bytes[at..].iter().position(|&byte| byte == b'\n') else {
                break bytes.len();
            };
            let next = at + offset + 1;
            match bytes.get(next) {
                None => break bytes.len(),
                Some(&byte) if byte.is_ascii() && !is_space(byte) && byte != b'/' => break next,
                Some(_) => at = next,
            }
        };
        let line = &text[start..end];
        start = end;
        Some(line)
    })
}

/// Calls `piece` with each piece of `text` (ASCII), in order, as o200k's
/// pre-tokenizer splits it.
fn each_piece<'t>(text: &'t [u8], mut piece: impl FnMut(&'t [u8])) {
    let mut at = 0;
    while at < text.len() {
        let end = piece_end(text, at);
        piece(&text[at..end]);
        at = end;
    }
}

fn is_upper(byte: u8) -> bool {
    byte.is_ascii_uppercase()
}

fn is_lower(byte: u8) -> bool {
    byte.is_ascii_lowercase()
}

fn is_letter(byte: u8) -> bool {
    byte.is_ascii_alphabetic()
}

fn is_digit(byte: u8) -> bool {
    byte.is_ascii_digit()
}

/// `\s` on ASCII: tab, line feed, vertical tab, form feed, carriage return
/// and space.
fn is_space(byte: u8) -> bool {
    matches!(byte, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_newline(byte: u8) -> bool {
    matches!(byte, b'\r' | b'\n')
}

/// `[^\r\n\p{L}\p{N}]`: what may lead a word.
fn leads_word(byte: u8) -> bool {
    !is_newline(byte) && !is_letter(byte) && !is_digit(byte)
}

/// `[^\s\p{L}\p{N}]`: punctuation and symbols.
fn is_mark(byte: u8) -> bool {
    !is_space(byte) && !is_letter(byte) && !is_digit(byte)
}

fn run(text: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    text[from..]
        .iter()
        .position(|&byte| !class(byte))
        .map_or(text.len(), |offset| from + offset)
}

/// The end of the piece that starts at `at`: the alternatives of the
/// regular expression tried in its order, the first that matches winning.
fn piece_end(text: &[u8], at: usize) -> usize {
    let first = text[at];
    if let Some(end) = word(text, at) {
        return end;
    }
    if is_digit(first) {
        return run(text, at, is_digit).min(at + 3);
    }
    if let Some(end) = marks(text, at) {
        return end;
    }
    // Whitespace is all that is left.
    let spaces = run(text, at, is_space);
    if let Some(last) = text[at..spaces].iter().rposition(|&byte| is_newline(byte)) {
        return at + last + 1;
    }
    if spaces == text.len() || spaces - at < 2 {
        return spaces;
    }
    spaces - 1
}

/// The two word alternatives: an optional leading mark or space, then
/// capitals and small letters (`[Lu]*[Ll]+`, else `[Lu]+[Ll]*`), then an
/// optional contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`).
fn word(text: &[u8], at: usize) -> Option<usize> {
    let letters = |from: usize| -> Option<usize> {
        let capitals = run(text, from, is_upper);
        let small = run(text, capitals, is_lower);
        (small > from).then(|| contraction(text, small))
    };
    if leads_word(text[at])
        && let Some(end) = text.get(at + 1).and_then(|_| letters(at + 1))
    {
        return Some(end);
    }
    letters(at)
}

fn contraction(text: &[u8], at: usize) -> usize {
    let rest = &text[at..];
    let [b'\'', tail @ ..] = rest else {
        return at;
    };
    let lower = |i: usize| tail.get(i).map(u8::to_ascii_lowercase);
    match (lower(0), lower(1)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => at + 2,
        (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => at + 3,
        _ => at,
    }
}

/// ` ?[^\s\p{L}\p{N}]+[\r\n/]*`.
fn marks(text: &[u8], at: usize) -> Option<usize> {
    let from = if text[at] == b' ' && text.get(at + 1).is_some_and(|&b| is_mark(b)) {
        at + 1
    } else {
        at
    };
    if !is_mark(text[from]) {
        return None;
    }
    let marks = run(text, from, is_mark);
    Some(run(text, marks, |byte| is_newline(byte) || byte == b'/'))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        each_piece(text.as_bytes(), |piece| {
            out.push(std::str::from_utf8(piece).expect("ASCII"));
        });
        out
    }

    fn theirs(text: &str) -> Vec<&str> {
        bpe_openai::o200k_base().split(text).collect()
    }

    #[test]
    fn splits_as_o200k_does_on_code_logs_and_whitespace() {
        for text in [
            "fn main() {\n    println!(\"hi\");\n}\n",
            "  hello WORLD's  they'RE 12345 HTTPServer\r\n\r\n\t x",
            "2026-11-24T10:07:35Z INFO audit record 15 rejected id=AUD-016835 amount=3145\n",
            "path/to/file.rs:12:5 -- error[E0308]: mismatched types //\n\n",
            "   ",
            " \n ",
            "a",
            "'s 'S 'll 'x don't",
            "\u{0b}\u{0c}\u{1}\u{7f} ~~ /// \n/",
        ] {
            assert_eq!(pieces(text), theirs(text), "{text:?}");
        }
    }

    #[test]
    fn remembered_counts_are_the_encoders_even_when_pieces_share_a_slot() {
        let tokenizer = bpe_openai::o200k_base();
        let text: String = (0..40_000).map(|i| format!(" w{i}x{}", i % 7)).collect();
        for _ in 0..2 {
            assert_eq!(
                count_ascii(&tokenizer.bpe, text.as_bytes()),
                tokenizer.count(text.as_str())
            );
        }
    }

    #[test]
    fn lines_cover_the_text_and_cut_only_after_a_line_feed() {
        let text = "a\n\n b\n/c\nd é\n\u{a0}e\nf";
        let cut: Vec<&str> = lines(text).collect();
        assert_eq!(cut, ["a\n\n b\n/c\n", "d é\n\u{a0}e\n", "f"]);
        assert_eq!(cut.concat(), text);
        assert_eq!(lines("").count(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn counting_line_by_line_counts_what_o200k_counts(
            text in "([a-zA-Z0-9 /.\n\t-]|é|ß|中文|⎿|\u{a0}|\u{2028}|\u{3000}|\u{301}|😀|İ|ǅ){0,60}",
        ) {
            prop_assert_eq!(count(&text), bpe_openai::o200k_base().count(text.as_str()));
        }

        #[test]
        fn splits_any_ascii_as_o200k_does(text in "[\u{0}-\u{7f}]{0,80}") {
            prop_assert_eq!(pieces(&text), theirs(&text));
            let tokenizer = bpe_openai::o200k_base();
            prop_assert_eq!(count_ascii(&tokenizer.bpe, text.as_bytes()), tokenizer.count(text.as_str()));
        }

        #[test]
        fn splits_word_and_space_mixtures_as_o200k_does(
            text in "([A-Z]{0,3}[a-z]{0,3}|'[sStTdDmM]|'(re|ve|ll|RE|Ll)| {1,3}|\n|\r|\t|[0-9]{1,5}|[.:/_!-]{1,2}){0,24}",
        ) {
            prop_assert_eq!(pieces(&text), theirs(&text));
        }
    }
}
