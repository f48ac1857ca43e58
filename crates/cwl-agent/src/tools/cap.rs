//! Bounding output size: head-and-tail capture and line shortening.

use std::collections::VecDeque;

/// Keeps the first and last bytes of a stream with bounded memory and
/// renders them with a notice saying how much was cut from the middle.
#[derive(Debug)]
pub(crate) struct HeadTail {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    newlines: u64,
}

impl HeadTail {
    /// A capture that keeps at most `max_bytes` (half head, half tail).
    pub(crate) fn new(max_bytes: usize) -> Self {
        HeadTail {
            half: (max_bytes / 2).max(1),
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            newlines: 0,
        }
    }

    /// Appends a chunk of the stream.
    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.newlines += count_newlines(chunk) as u64;
        let room = self.half - self.head.len();
        let take = room.min(chunk.len());
        self.head.extend_from_slice(&chunk[..take]);
        chunk = &chunk[take..];
        if chunk.len() >= self.half {
            self.tail.clear();
            chunk = &chunk[chunk.len() - self.half..];
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.half);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Whether nothing at all was captured.
    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The kept text (lossy UTF-8). When the middle was dropped, the head
    /// and tail are cut back to whole lines where possible and joined by a
    /// notice like `[… 120 lines (4816 bytes) omitted …]`.
    pub(crate) fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = match self.head.iter().rposition(|&b| b == b'\n') {
            Some(i) => &self.head[..=i],
            None => &self.head[..],
        };
        let tail = match tail.iter().position(|&b| b == b'\n') {
            Some(i) if i + 1 < tail.len() => &tail[i + 1..],
            _ => &tail[..],
        };
        let omitted_bytes = self.total - (head.len() + tail.len()) as u64;
        let omitted_lines = self
            .newlines
            .saturating_sub((count_newlines(head) + count_newlines(tail)) as u64);
        let mut out = String::from_utf8_lossy(head).into_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "[… {omitted_lines} lines ({omitted_bytes} bytes) omitted …]\n"
        ));
        out.push_str(&String::from_utf8_lossy(tail));
        out
    }
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Shortens `line` to at most `max_chars` characters, saying how many were cut.
pub(crate) fn shorten_line(line: &str, max_chars: usize) -> String {
    match line.char_indices().nth(max_chars) {
        None => line.to_owned(),
        Some((cut, _)) => {
            let rest = line[cut..].chars().count();
            format!("{}… [{rest} more chars]", &line[..cut])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(text: &str, max: usize, chunk: usize) -> String {
        let mut c = HeadTail::new(max);
        for part in text.as_bytes().chunks(chunk) {
            c.push(part);
        }
        c.render()
    }

    #[test]
    fn short_output_is_kept_whole() {
        assert_eq!(capture("a\nb\n", 100, 1), "a\nb\n");
        assert!(HeadTail::new(10).is_empty());
    }

    #[test]
    fn long_output_keeps_whole_head_and_tail_lines() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        for chunk in [1, 7, 1000] {
            let out = capture(&text, 60, chunk);
            assert!(out.starts_with("line 1\nline 2\n"), "{out}");
            assert!(out.ends_with("line 99\nline 100\n"), "{out}");
            let notice = out.lines().find(|l| l.starts_with("[…")).unwrap();
            let kept = out.lines().filter(|l| l.starts_with("line ")).count();
            assert_eq!(
                notice,
                format!("[… {} lines ({} bytes) omitted …]", 100 - kept, {
                    let kept_bytes: usize = out
                        .lines()
                        .filter(|l| l.starts_with("line "))
                        .map(|l| l.len() + 1)
                        .sum();
                    text.len() - kept_bytes
                })
            );
        }
    }

    #[test]
    fn shorten_line_counts_cut_chars() {
        assert_eq!(shorten_line("héllo", 10), "héllo");
        assert_eq!(shorten_line("héllo", 2), "hé… [3 more chars]");
    }
}
