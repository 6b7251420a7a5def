//! Left-aligned columns with two blanks between them and none at line ends,
//! each cell optionally painted: the layout of every xyctl table, written
//! directly for `list`, whose 1,000-row form spent three quarters of the
//! whole process's instructions in comfy-table's per-cell layout (D36).

use super::{Paint, Style};

/// One cell: its text and, with colour on, its paint.
pub(super) struct Cell {
    pub(super) text: String,
    pub(super) paint: Option<Paint>,
}

impl Cell {
    pub(super) fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            paint: None,
        }
    }

    pub(super) fn painted(text: impl Into<String>, paint: Option<Paint>) -> Cell {
        Cell {
            text: text.into(),
            paint,
        }
    }
}

/// Blanks after every column but the last.
const GAP: usize = 2;

/// `header` (bold with colour) over `rows`. Widths count chars: every cell
/// `list` shows is ASCII (server names are `[A-Za-z0-9_.-]+`, the rest are
/// words and numbers), so a char is a column.
pub(super) fn render(header: &[&str], rows: &[Vec<Cell>], style: &Style) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.text.chars().count());
        }
    }
    let line_len: usize = widths.iter().map(|w| w + GAP).sum::<usize>() + 16;
    let mut out = String::with_capacity(line_len * (rows.len() + 1));
    let bold = Some(Paint::Bold);
    let header = header.iter().map(|h| (*h, bold));
    line(&mut out, header, &widths, style);
    for row in rows {
        let cells = row.iter().map(|c| (c.text.as_str(), c.paint));
        line(&mut out, cells, &widths, style);
    }
    out
}

/// One row at `widths` (a cell wider than its column pushes the rest on).
pub(super) fn line<'a>(
    out: &mut String,
    cells: impl Iterator<Item = (&'a str, Option<Paint>)>,
    widths: &[usize],
    style: &Style,
) {
    let start = out.len();
    let last = widths.len().saturating_sub(1);
    for (i, ((text, paint), width)) in cells.zip(widths).enumerate() {
        match paint.filter(|_| style.color) {
            Some(p) => out.push_str(&style.paint(text, p)),
            None => out.push_str(text),
        }
        if i < last {
            let pad = width.saturating_sub(text.chars().count()) + GAP;
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    // An empty last cell must not leave the padding before it.
    let kept = out[start..].trim_end_matches(' ').len();
    out.truncate(start + kept);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_without_trailing_blanks() {
        let rows = vec![
            vec![
                Cell::plain("a"),
                Cell::plain("long-value"),
                Cell::plain("x"),
            ],
            vec![Cell::plain("bbbb"), Cell::plain("v"), Cell::plain("")],
        ];
        let out = render(&["H1", "H2", "H3"], &rows, &Style::PLAIN);
        assert_eq!(out, "H1    H2          H3\na     long-value  x\nbbbb  v\n");
    }

    #[test]
    fn paint_wraps_the_text_not_the_padding() {
        let rows = vec![vec![
            Cell::painted("ok", Some(Paint::Green)),
            Cell::plain("1"),
        ]];
        let out = render(&["STATE", "N"], &rows, &Style::COLOR);
        assert_eq!(
            out,
            "\x1b[1mSTATE\x1b[0m  \x1b[1mN\x1b[0m\n\x1b[32mok\x1b[0m     1\n"
        );
        let plain = render(&["STATE", "N"], &rows, &Style::PLAIN);
        assert_eq!(plain, "STATE  N\nok     1\n");
    }
}
