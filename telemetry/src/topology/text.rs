//! A topology file's bytes as text, in the encodings topology tools write.
//!
//! UTF-8 (with or without a byte-order mark) and UTF-16 with a byte-order mark are decoded
//! as such. Anything else is read as ISO 8859-1, which GML defines as its character set and
//! older GraphML exports declare; every byte is then one character, so node ids stay
//! distinct and nothing is refused for a label in another encoding.

/// The text of a file's `bytes`; an error only for UTF-16 that does not decode.
pub(super) fn decode(bytes: &[u8]) -> Result<String, String> {
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        return Ok(latin1_unless_utf8(rest));
    }
    if let Some(rest) = bytes.strip_prefix(b"\xFF\xFE") {
        return utf16(rest, u16::from_le_bytes);
    }
    if let Some(rest) = bytes.strip_prefix(b"\xFE\xFF") {
        return utf16(rest, u16::from_be_bytes);
    }
    Ok(latin1_unless_utf8(bytes))
}

/// The line (from 1) of byte `pos` of `text`, for errors: the same whatever encoding the
/// file had, where a byte offset into the decoded text would not be.
pub(super) fn line_of(text: &str, pos: usize) -> usize {
    Lines::new(text).at(pos)
}

/// Lines of a text counted as a reader moves through it: [`line_of`] for each position
/// in turn without counting from the start each time (a few MB of GraphML has tens of
/// thousands of elements).
pub(super) struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    /// At the start of `text`.
    pub(super) fn new(text: &'a str) -> Lines<'a> {
        Lines {
            text: text.as_bytes(),
            pos: 0,
            line: 1,
        }
    }

    /// The line (from 1) of byte `pos`.
    pub(super) fn at(&mut self, pos: usize) -> usize {
        let pos = pos.min(self.text.len());
        if pos < self.pos {
            self.pos = 0;
            self.line = 1;
        }
        self.line += self.text[self.pos..pos]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.pos = pos;
        self.line
    }
}

fn latin1_unless_utf8(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> Result<String, String> {
    if !bytes.len().is_multiple_of(2) {
        return Err("UTF-16 text of an odd number of bytes".into());
    }
    let units = bytes.chunks_exact(2).map(|c| unit([c[0], c[1]]));
    // Units decoded so far, for where an unpaired surrogate sits in the file.
    let mut at = 0usize;
    char::decode_utf16(units)
        .map(|c| match c {
            Ok(c) => {
                at += c.len_utf16();
                Ok(c)
            }
            Err(_) => Err(format!(
                "UTF-16 text with an unpaired surrogate at byte {}",
                2 + 2 * at
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Lines, decode, line_of};

    #[test]
    fn utf8_utf16_and_latin1() {
        assert_eq!(decode("Zürich".as_bytes()).unwrap(), "Zürich");
        assert_eq!(
            decode(b"\xEF\xBB\xBFab").unwrap(),
            "ab",
            "byte-order mark dropped"
        );
        assert_eq!(decode(b"Z\xFCrich").unwrap(), "Zürich", "ISO 8859-1");
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain("Zü".encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(decode(&le).unwrap(), "Zü");
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain("Zü".encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        assert_eq!(decode(&be).unwrap(), "Zü");
        assert!(decode(b"\xFF\xFEa").is_err(), "odd length");
        assert!(
            decode(b"\xFF\xFE\x00\xD8a\x00").is_err(),
            "unpaired surrogate"
        );
        // After a character of two units, the byte is the file's.
        let e = decode(b"\xFF\xFE\x3D\xD8\x00\xDE\x00\xD8a\x00").unwrap_err();
        assert!(e.ends_with("at byte 6"), "{e}");
    }

    #[test]
    fn lines_counted_on_the_way_agree_with_counting_from_the_start() {
        let text = "a\nbc\n\nd\n";
        let mut lines = Lines::new(text);
        for pos in [0, 1, 2, 4, 5, 6, 9, 20, 3, 7] {
            let from_start = 1 + text[..pos.min(text.len())].matches('\n').count();
            assert_eq!(lines.at(pos), from_start, "byte {pos}");
            assert_eq!(line_of(text, pos), from_start, "byte {pos}");
        }
    }
}
