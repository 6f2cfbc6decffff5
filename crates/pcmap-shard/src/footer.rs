//! A bounded walk over a Parquet footer's Thrift bytes, run before the `parquet` crate decodes
//! them.
//!
//! Why by hand: no crate offers a bounded check of a compact-protocol struct, and parquet 59's
//! own reader is not bounded by its input (all found by the `fleet_shard` fuzz target):
//! - it skips the fields it does not know with a loop that takes no bytes for each boolean
//!   element of a list, set or map (the compact protocol spends one), so a 345-byte footer
//!   declaring two billion of them kept it busy for seconds;
//! - it reserves room for a schema element's `num_children` before reading them, so a
//!   300-byte footer asked for gigabytes.
//!
//! The walk refuses a collection that declares more elements than there are bytes left (every
//! element but a skipped boolean takes at least one), counts the skipped booleans against
//! [`MAX_FREE_STEPS`], and caps nesting at [`MAX_DEPTH`]; so its work, and parquet's after it,
//! is bounded by the footer's size. The schema's elements must form a tree that fits the schema
//! list.
//!
//! To see the bytes as parquet will, the walk reads them by parquet's rules, not the protocol's:
//! parquet reads the fields it knows by their id alone, whatever wire type their header names,
//! with ids cut to 16 bits, and skips booleans as above. The walk knows those fields
//! ([`FILE_META_DATA`] and the structs under it, from parquet-format's `parquet.thrift`) and
//! refuses a known field whose wire type is not its own: where the walk accepts, it has read the
//! bytes as parquet will.

use pcmap_bytes::Cursor;

/// Deepest nesting of structs and collections accepted. Parquet's own metadata nests less than
/// ten deep; the limit only stops a hostile footer from exhausting the stack.
const MAX_DEPTH: u32 = 64;

/// Most boolean elements of skipped collections accepted in one footer. Parquet's skip takes
/// no bytes for each, so their number, not the footer's size, is what bounds its work; no
/// field parquet skips in a real footer holds any.
const MAX_FREE_STEPS: u64 = 1 << 20;

/// Why a footer was refused: the absolute byte offset in the file and what was wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FooterError {
    pub offset: u64,
    pub what: String,
}

impl std::fmt::Display for FooterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "malformed Parquet footer at byte offset {:#x}: {}",
            self.offset, self.what
        )
    }
}

/// Compact-protocol type codes (Thrift's `thrift-compact-protocol.md`).
mod ty {
    pub const STOP: u8 = 0;
    pub const BOOL_TRUE: u8 = 1;
    pub const BOOL_FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
    pub const UUID: u8 = 13;
}

/// What parquet reads a known field as.
#[derive(Clone, Copy, Debug)]
enum Field {
    /// A varint (`i16`, `i32`, `i64` and enums).
    Int,
    Byte,
    Bool,
    Double,
    /// `binary` and `string`.
    Bin,
    Struct(Grammar),
    List(&'static Field),
    /// `FileMetaData.schema`: a `list<SchemaElement>`, checked as a tree.
    Schema,
    /// `SchemaElement.num_children`.
    Children,
}

/// The fields parquet knows in one struct or union, by id; the others it skips.
type Grammar = &'static [(i16, Field)];

use Field::{Bin, Bool, Byte, Double, Int};

const EMPTY: Grammar = &[];
const KEY_VALUE: Grammar = &[(1, Bin), (2, Bin)];
const TIME_UNIT: Grammar = &[
    (1, Field::Struct(EMPTY)),
    (2, Field::Struct(EMPTY)),
    (3, Field::Struct(EMPTY)),
];
const TIME: Grammar = &[(1, Bool), (2, Field::Struct(TIME_UNIT))];
const LOGICAL_TYPE: Grammar = &[
    (1, Field::Struct(EMPTY)),
    (2, Field::Struct(EMPTY)),
    (3, Field::Struct(EMPTY)),
    (4, Field::Struct(EMPTY)),
    (5, Field::Struct(&[(1, Int), (2, Int)])),
    (6, Field::Struct(EMPTY)),
    (7, Field::Struct(TIME)),
    (8, Field::Struct(TIME)),
    (10, Field::Struct(&[(1, Byte), (2, Bool)])),
    (11, Field::Struct(EMPTY)),
    (12, Field::Struct(EMPTY)),
    (13, Field::Struct(EMPTY)),
    (14, Field::Struct(EMPTY)),
    (15, Field::Struct(EMPTY)),
    (16, Field::Struct(&[(1, Byte)])),
    (17, Field::Struct(&[(1, Bin)])),
    (18, Field::Struct(&[(1, Bin), (2, Int)])),
];
const SCHEMA_ELEMENT: Grammar = &[
    (1, Int),
    (2, Int),
    (3, Int),
    (4, Bin),
    (5, Field::Children),
    (6, Int),
    (7, Int),
    (8, Int),
    (9, Int),
    (10, Field::Struct(LOGICAL_TYPE)),
];
const STATISTICS: Grammar = &[
    (1, Bin),
    (2, Bin),
    (3, Int),
    (4, Int),
    (5, Bin),
    (6, Bin),
    (7, Bool),
    (8, Bool),
];
const GEOSPATIAL_STATISTICS: Grammar = &[
    (
        1,
        Field::Struct(&[
            (1, Double),
            (2, Double),
            (3, Double),
            (4, Double),
            (5, Double),
            (6, Double),
            (7, Double),
            (8, Double),
        ]),
    ),
    (2, Field::List(&Int)),
];
const COLUMN_META_DATA: Grammar = &[
    (1, Int),
    (2, Field::List(&Int)),
    (3, Field::List(&Bin)),
    (4, Int),
    (5, Int),
    (6, Int),
    (7, Int),
    (8, Field::List(&Field::Struct(KEY_VALUE))),
    (9, Int),
    (10, Int),
    (11, Int),
    (12, Field::Struct(STATISTICS)),
    (
        13,
        Field::List(&Field::Struct(&[(1, Int), (2, Int), (3, Int)])),
    ),
    (14, Int),
    (15, Int),
    (
        16,
        Field::Struct(&[(1, Int), (2, Field::List(&Int)), (3, Field::List(&Int))]),
    ),
    (17, Field::Struct(GEOSPATIAL_STATISTICS)),
];
const COLUMN_CRYPTO_META_DATA: Grammar = &[
    (1, Field::Struct(EMPTY)),
    (2, Field::Struct(&[(1, Field::List(&Bin)), (2, Bin)])),
];
const COLUMN_CHUNK: Grammar = &[
    (1, Bin),
    (2, Int),
    (3, Field::Struct(COLUMN_META_DATA)),
    (4, Int),
    (5, Int),
    (6, Int),
    (7, Int),
    (8, Field::Struct(COLUMN_CRYPTO_META_DATA)),
    (9, Bin),
];
const ROW_GROUP: Grammar = &[
    (1, Field::List(&Field::Struct(COLUMN_CHUNK))),
    (2, Int),
    (3, Int),
    (
        4,
        Field::List(&Field::Struct(&[(1, Int), (2, Bool), (3, Bool)])),
    ),
    (5, Int),
    (6, Int),
    (7, Int),
];
const AES_GCM: Grammar = &[(1, Bin), (2, Bin), (3, Bool)];
/// `FileMetaData`, the footer's top struct. Fields 8 and 9 (encryption) are read by parquet
/// only with its `encryption` feature, which pcmap does not enable; it skips them by wire type.
/// The walk checks them all the same: where their wire types are their own, both read the same
/// bytes, and any other wire type is refused.
const FILE_META_DATA: Grammar = &[
    (1, Int),
    (2, Field::Schema),
    (3, Int),
    (4, Field::List(&Field::Struct(ROW_GROUP))),
    (5, Field::List(&Field::Struct(KEY_VALUE))),
    (6, Bin),
    (7, Field::List(&Field::Struct(&[(1, Field::Struct(EMPTY))]))),
    (
        8,
        Field::Struct(&[(1, Field::Struct(AES_GCM)), (2, Field::Struct(AES_GCM))]),
    ),
    (9, Bin),
];

impl Field {
    /// Whether a value of wire type `kind` is read by parquet as this field reads it.
    fn accepts(self, kind: u8) -> bool {
        match self {
            Int | Field::Children => matches!(kind, ty::I16 | ty::I32 | ty::I64),
            Byte => kind == ty::BYTE,
            Bool => matches!(kind, ty::BOOL_TRUE | ty::BOOL_FALSE),
            Double => kind == ty::DOUBLE,
            Bin => kind == ty::BINARY,
            Field::Struct(_) => kind == ty::STRUCT,
            Field::List(_) | Field::Schema => matches!(kind, ty::LIST | ty::SET),
        }
    }
}

/// Check the `FileMetaData` struct in `footer`, which starts at byte `base` of the file. Bytes
/// after the struct's end are left to parquet.
pub(crate) fn check(footer: &[u8], base: u64) -> Result<(), FooterError> {
    let mut walk = Walk {
        cur: Cursor::new(footer, 0),
        base,
        elements: 0,
        children: 0,
        free: 0,
    };
    walk.structure(FILE_META_DATA, 1)
}

/// Thrift's zigzag encoding of signed integers.
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

struct Walk<'a> {
    cur: Cursor<'a>,
    base: u64,
    /// Length of the schema list being walked.
    elements: u64,
    /// `num_children` of the last `SchemaElement` walked.
    children: u64,
    /// Boolean elements of skipped collections so far ([`MAX_FREE_STEPS`]).
    free: u64,
}

impl Walk<'_> {
    fn fail(&self, at: usize, what: String) -> FooterError {
        FooterError {
            offset: self.base + at as u64,
            what,
        }
    }

    fn cut(&self, e: pcmap_bytes::Error) -> FooterError {
        FooterError {
            offset: self.base + e.offset as u64,
            what: e.kind.to_string(),
        }
    }

    fn byte(&mut self) -> Result<u8, FooterError> {
        self.cur.read_u8().map_err(|e| self.cut(e))
    }

    fn varint(&mut self) -> Result<u64, FooterError> {
        self.cur.read_uleb128().map_err(|e| self.cut(e))
    }

    fn skip(&mut self, n: u64) -> Result<(), FooterError> {
        let at = self.cur.pos();
        let n = usize::try_from(n).map_err(|_| self.fail(at, format!("{n} bytes declared")))?;
        self.cur.skip(n).map_err(|e| self.cut(e))
    }

    /// A declared element count, refused when the bytes left cannot hold `min_bytes` per element.
    fn count(&self, at: usize, what: &str, n: u64, min_bytes: u64) -> Result<(), FooterError> {
        let left = self.cur.remaining() as u64;
        if n.saturating_mul(min_bytes) > left {
            return Err(self.fail(
                at,
                format!("{what} declares {n} elements, only {left} bytes follow"),
            ));
        }
        Ok(())
    }

    fn deeper(&self, at: usize, depth: u32) -> Result<(), FooterError> {
        if depth > MAX_DEPTH {
            return Err(self.fail(at, format!("nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    /// A struct or union whose known fields are `grammar`.
    fn structure(&mut self, grammar: Grammar, depth: u32) -> Result<(), FooterError> {
        self.deeper(self.cur.pos(), depth)?;
        // Field ids are `i16`, as parquet reads them: a long-form id is a zigzag number cut to
        // 16 bits, and a delta that overflows is an error there.
        let mut id = 0i16;
        loop {
            let start = self.cur.pos();
            let header = self.byte()?;
            let kind = header & 0x0f;
            if kind == ty::STOP {
                return Ok(());
            }
            id = match header >> 4 {
                // A field id that is not a small delta from the last one follows as a varint.
                0 => unzigzag(self.varint()?) as i16,
                delta => id.checked_add(i16::from(delta)).ok_or_else(|| {
                    self.fail(start, format!("field id {id} + {delta} overflows 16 bits"))
                })?,
            };
            let at = self.cur.pos();
            match grammar.iter().find(|(known, _)| *known == id) {
                Some(&(_, field)) if !field.accepts(kind) => {
                    return Err(self.fail(
                        at,
                        format!(
                            "field {id} has Thrift type code {kind}, parquet reads it as {field:?}"
                        ),
                    ));
                }
                Some(&(_, field)) => self.field(field, depth)?,
                // A struct field's boolean value is its type code.
                None if matches!(kind, ty::BOOL_TRUE | ty::BOOL_FALSE) => {}
                None => self.value(kind, depth)?,
            }
        }
    }

    /// A known field's value, its wire type already checked.
    fn field(&mut self, field: Field, depth: u32) -> Result<(), FooterError> {
        let at = self.cur.pos();
        match field {
            // A struct field's boolean value is its type code.
            Bool => Ok(()),
            Int => self.varint().map(|_| ()),
            Byte => self.skip(1),
            Double => self.skip(8),
            Bin => self.value(ty::BINARY, depth),
            Field::Struct(grammar) => self.structure(grammar, depth + 1),
            Field::List(element) => self.list(Some(*element), depth),
            Field::Schema => self.schema(depth),
            Field::Children => {
                // Parquet reads an `i32` as a 64-bit zigzag number cut to 32 bits.
                let children = unzigzag(self.varint()?) as i32;
                if children > 0 && children as u64 > self.elements {
                    return Err(self.fail(
                        at,
                        format!(
                            "a schema element declares {children} children, the schema has {} \
                             elements",
                            self.elements
                        ),
                    ));
                }
                self.children = children.max(0) as u64;
                Ok(())
            }
        }
    }

    /// A list or set header: (element wire type, count), the count checked against the bytes
    /// left.
    fn list_header(&mut self, depth: u32) -> Result<(u8, u64), FooterError> {
        let at = self.cur.pos();
        self.deeper(at, depth + 1)?;
        let header = self.byte()?;
        let n = match header >> 4 {
            15 => self.varint()?,
            short => u64::from(short),
        };
        self.count(at, "a list", n, 1)?;
        Ok((header & 0x0f, n))
    }

    /// A list whose elements parquet reads as `element` (`None`: a list parquet skips).
    fn list(&mut self, element: Option<Field>, depth: u32) -> Result<(), FooterError> {
        let at = self.cur.pos();
        let (kind, n) = self.list_header(depth)?;
        if let Some(field) = element
            && n > 0
            && !field.accepts(kind)
        {
            return Err(self.fail(
                at,
                format!("a list of {field:?} has elements of Thrift type code {kind}"),
            ));
        }
        if element.is_none() && is_bool(kind) {
            // Parquet's skip takes no bytes for these elements (see `value`): no need to visit
            // them, only to count the steps.
            return self.free_steps(at, n);
        }
        for _ in 0..n {
            match element {
                Some(Field::Struct(grammar)) => self.structure(grammar, depth + 2)?,
                _ => self.value(kind, depth + 1)?,
            }
        }
        Ok(())
    }

    /// Count `n` steps of parquet's skip that take no bytes, refused past [`MAX_FREE_STEPS`].
    fn free_steps(&mut self, at: usize, n: u64) -> Result<(), FooterError> {
        self.free = self.free.saturating_add(n);
        if self.free > MAX_FREE_STEPS {
            return Err(self.fail(
                at,
                format!(
                    "the footer's collections of booleans hold more than {MAX_FREE_STEPS} \
                     elements"
                ),
            ));
        }
        Ok(())
    }

    /// `FileMetaData.schema`: its elements' children must fit in it, as a tree parquet can
    /// rebuild without recursing deeper than [`MAX_DEPTH`].
    fn schema(&mut self, depth: u32) -> Result<(), FooterError> {
        let at = self.cur.pos();
        let (kind, n) = self.list_header(depth)?;
        if n > 0 && kind != ty::STRUCT {
            return Err(self.fail(
                at,
                format!("the schema list has elements of Thrift type code {kind}"),
            ));
        }
        self.elements = n;
        // The children still expected by each open ancestor of the next element, and all
        // children declared so far.
        let mut open: Vec<u64> = Vec::new();
        let mut total = 0u64;
        for _ in 0..n {
            let at = self.cur.pos();
            self.children = 0;
            self.structure(SCHEMA_ELEMENT, depth + 2)?;
            while open.last() == Some(&0) {
                open.pop();
            }
            if let Some(top) = open.last_mut() {
                *top -= 1;
            }
            total += self.children;
            if total >= n {
                return Err(self.fail(
                    at,
                    format!(
                        "the schema's elements declare {total} children, more than its {n} \
                         elements hold"
                    ),
                ));
            }
            if self.children > 0 {
                open.push(self.children);
                if open.len() > MAX_DEPTH as usize {
                    return Err(self.fail(at, format!("schema nested deeper than {MAX_DEPTH}")));
                }
            }
        }
        Ok(())
    }

    /// One value of wire type `kind` that parquet skips. A boolean element of a list, set or
    /// map is one byte in the compact protocol, but parquet 59's skip takes none for it; the
    /// walk does as parquet does, to stay in step with it, and counts such elements instead
    /// ([`MAX_FREE_STEPS`]).
    fn value(&mut self, kind: u8, depth: u32) -> Result<(), FooterError> {
        let at = self.cur.pos();
        match kind {
            ty::BOOL_TRUE | ty::BOOL_FALSE => self.free_steps(at, 1),
            ty::BYTE => self.skip(1),
            ty::I16 | ty::I32 | ty::I64 => self.varint().map(|_| ()),
            ty::DOUBLE => self.skip(8),
            ty::UUID => self.skip(16),
            ty::BINARY => {
                let n = self.varint()?;
                self.skip(n)
            }
            ty::STRUCT => self.structure(EMPTY, depth + 1),
            ty::LIST | ty::SET => self.list(None, depth),
            ty::MAP => {
                self.deeper(at, depth + 1)?;
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                let (key, value) = (types >> 4, types & 0x0f);
                let bytes = u64::from(!is_bool(key)) + u64::from(!is_bool(value));
                if bytes == 0 {
                    return self.free_steps(at, n);
                }
                self.count(at, "a map", n, bytes)?;
                for _ in 0..n {
                    self.value(key, depth + 1)?;
                    self.value(value, depth + 1)?;
                }
                Ok(())
            }
            other => Err(self.fail(at, format!("unknown Thrift type code {other}"))),
        }
    }
}

fn is_bool(kind: u8) -> bool {
    matches!(kind, ty::BOOL_TRUE | ty::BOOL_FALSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `FileMetaData { 15: <struct fields> }`: field 15 is one parquet does not know, so the
    /// walk follows the wire types in it.
    fn unknown_field(fields: &[u8]) -> Vec<u8> {
        let mut f = vec![0xfc];
        f.extend(fields);
        f.extend([0, 0]);
        f
    }

    #[test]
    fn a_list_of_more_booleans_than_bytes_is_refused_at_its_header() {
        // struct { 1: list<bool> of 2^31 elements } with two elements' bytes present.
        let mut fields = vec![0x19, 0xf1];
        pcmap_bytes::leb128::write_uleb128(&mut fields, 1 << 31);
        fields.extend([1, 2]);
        let e = check(&unknown_field(&fields), 100).unwrap_err();
        assert_eq!(e.offset, 102, "{e}");
        assert!(e.what.contains("2147483648 elements"), "{e}");
        // Lists of lists of booleans: each inner list is short and takes one byte (parquet
        // reads none for its elements), but together they hold too many.
        let mut fields = vec![0x19, 0xf9];
        let outer = 4000u64;
        pcmap_bytes::leb128::write_uleb128(&mut fields, outer);
        for _ in 0..outer {
            fields.push(0xf1);
            pcmap_bytes::leb128::write_uleb128(&mut fields, 4000);
        }
        fields.extend([0u8; 4000]);
        let e = check(&unknown_field(&fields), 0).unwrap_err();
        assert!(e.what.contains("collections of booleans"), "{e}");
        // A map of booleans to booleans is the same.
        let mut fields = vec![0x1b];
        pcmap_bytes::leb128::write_uleb128(&mut fields, 1 << 30);
        fields.push(0x11);
        let e = check(&unknown_field(&fields), 0).unwrap_err();
        assert!(e.what.contains("collections of booleans"), "{e}");
    }

    #[test]
    fn well_formed_struct_with_every_type_passes() {
        let mut f = vec![
            0x11, // field 1: bool true, no payload
            0x13, 0x7f, // field 2: byte
            0x14, 0x02, // field 3: i16
            0x15, 0x96, 0x01, // field 4: i32 two-byte varint
            0x16, 0x00, // field 5: i64
            0x17, 0, 0, 0, 0, 0, 0, 0, 0, // field 6: double
            0x18, 0x02, b'h', b'i', // field 7: binary
            0x19,
            0x21, // field 8: list<bool> of two, whose bytes parquet's skip does not read
            0x1a, 0x15, 0x08, // field 9: set<i32> of one
            0x1b, 0x01, 0x58, 0x02, 0x00, 0x01, 0x78, // field 10: map<i32,string> of one
            0x1c, 0x15, 0x04, 0x00, // field 11: struct { 1: i32 }
            0x1d, // field 12: uuid
        ];
        f.extend([0u8; 16]);
        f.extend([0x05, 0x40, 0x02]); // field 64 by long form: i32
        assert_eq!(check(&unknown_field(&f), 0), Ok(()));
    }

    #[test]
    fn a_schema_element_with_more_children_than_the_schema_has_is_refused() {
        // FileMetaData { 2: list<SchemaElement> [ { 5: num_children = 1_000_000 } ] }
        let mut footer = vec![0x29, 0x1c, 0x55];
        pcmap_bytes::leb128::write_uleb128(&mut footer, 2_000_000); // zigzag of 1_000_000
        footer.extend([0, 0]);
        let e = check(&footer, 0).unwrap_err();
        assert_eq!(e.offset, 3, "{e}");
        assert!(e.what.contains("1000000 children"), "{e}");
        // A count whose 64-bit value is negative but whose low 32 bits, all parquet keeps, are
        // not: -(2^32) + 1_000_000.
        let mut footer = vec![0x29, 0x1c, 0x55];
        let v: i64 = -(1 << 32) + 1_000_000;
        pcmap_bytes::leb128::write_uleb128(&mut footer, ((v << 1) ^ (v >> 63)) as u64);
        footer.extend([0, 0]);
        let e = check(&footer, 0).unwrap_err();
        assert!(e.what.contains("1000000 children"), "{e}");
        // A root with two leaves passes; a root declaring three does not.
        let schema = |root: u8| [0x29, 0x3c, 0x55, root, 0, 0, 0, 0];
        assert_eq!(check(&schema(4), 0), Ok(()));
        let e = check(&schema(6), 0).unwrap_err();
        assert!(e.what.contains("declare 3 children"), "{e}");
        // A chain deeper than the limit: every element has one child.
        let mut chain = vec![0x29, 0xfc];
        let n = MAX_DEPTH as u64 + 3;
        pcmap_bytes::leb128::write_uleb128(&mut chain, n);
        for _ in 0..n - 1 {
            chain.extend([0x55, 0x02, 0]);
        }
        chain.extend([0, 0]);
        let e = check(&chain, 0).unwrap_err();
        assert!(e.what.contains("schema nested deeper"), "{e}");
    }

    #[test]
    fn depth_is_bounded() {
        // struct { 1: struct { 1: struct { ... } } } nested past the limit.
        let e = check(&unknown_field(&[0x1c; MAX_DEPTH as usize + 2]), 0).unwrap_err();
        assert!(e.what.contains("nested deeper"), "{e}");
    }

    #[test]
    fn truncated_input_names_the_offset() {
        let e = check(&[0xfc, 0x18, 0x05, b'a'], 8).unwrap_err();
        assert_eq!(e.offset, 11, "{e}");
    }

    #[test]
    fn field_ids_are_sixteen_bits_as_parquet_reads_them() {
        // FileMetaData { long-form id 65538 (2 once cut to 16 bits): bool } is field 2, the
        // schema, for parquet: refused for its wire type like any field 2.
        let mut f = vec![0x01];
        pcmap_bytes::leb128::write_uleb128(&mut f, 65538 << 1);
        f.extend([0x00]);
        let e = check(&f, 0).unwrap_err();
        assert!(e.what.contains("field 2 has Thrift type code 1"), "{e}");
        // Field i16::MAX (an i64 of value 0), then a delta past it.
        let mut f = vec![0x06];
        pcmap_bytes::leb128::write_uleb128(&mut f, (i16::MAX as u64) << 1);
        f.extend([0x00, 0x16, 0x00, 0x00]);
        let e = check(&f, 0).unwrap_err();
        assert!(e.what.contains("overflows 16 bits"), "{e}");
    }

    #[test]
    fn a_known_field_with_another_wire_type_is_refused() {
        // FileMetaData { 2: bool } — parquet would read a list header from the next byte.
        let e = check(&[0x21, 0x1c, 0x00, 0x00], 0).unwrap_err();
        assert!(e.what.contains("field 2 has Thrift type code 1"), "{e}");
        // A SchemaElement whose num_children claims to be a binary.
        let e = check(&[0x29, 0x1c, 0x58, 0x00, 0x00, 0x00], 0).unwrap_err();
        assert!(e.what.contains("field 5 has Thrift type code 8"), "{e}");
        // A schema list of integers.
        let e = check(&[0x29, 0x15, 0x02, 0x00], 0).unwrap_err();
        assert!(e.what.contains("schema list has elements"), "{e}");
    }
}
