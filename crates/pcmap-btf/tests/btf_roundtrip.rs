//! The BTF writer and reader are inverses: every record written is read back with the same kind,
//! name, size/type and payload, for base and split blobs, with and without a layout section.
//! Also the ELF appender's output re-parses with `object` to the same sections plus the new ones.

use pcmap_btf::elf_append::{NewSection, append_sections, section_data};
use pcmap_btf::layout::Layout;
use pcmap_btf::{Btf, BtfWriter, Kind};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Int(String, u32, u32),
    Ref(u8, u32),
    Array(u32, u32),
    Proto(u32, Vec<(Option<String>, u32)>, bool),
    Func(String, u32, u32),
    Fwd(String, bool),
    Float(String, u32),
    Opaque(bool, Option<String>, u32),
    LocParam(u32, Vec<u32>),
}

fn name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,12}"
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            name(),
            prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
            0u32..8
        )
            .prop_map(|(n, s, e)| Op::Int(n, s, e & 7)),
        (
            prop_oneof![Just(2u8), Just(8), Just(9), Just(10), Just(11), Just(18)],
            0u32..50
        )
            .prop_map(|(k, t)| Op::Ref(k, t)),
        (0u32..50, any::<u32>()).prop_map(|(t, n)| Op::Array(t, n)),
        (
            0u32..50,
            proptest::collection::vec((proptest::option::of(name()), 0u32..50), 0..6),
            any::<bool>()
        )
            .prop_map(|(r, p, v)| Op::Proto(r, p, v)),
        (name(), 0u32..50, 0u32..3).prop_map(|(n, p, l)| Op::Func(n, p, l)),
        (name(), any::<bool>()).prop_map(|(n, u)| Op::Fwd(n, u)),
        (name(), prop_oneof![Just(4u32), Just(8), Just(16)]).prop_map(|(n, s)| Op::Float(n, s)),
        (any::<bool>(), proptest::option::of(name()), any::<u32>())
            .prop_map(|(u, n, s)| Op::Opaque(u, n, s)),
        (any::<u32>(), proptest::collection::vec(any::<u32>(), 0..4))
            .prop_map(|(f, v)| Op::LocParam(f, v)),
    ]
}

/// (kind, kflag, vlen, name, size_or_type, payload words) as the reader should see them.
type Expected = (Kind, bool, u32, Option<String>, u32, Vec<u32>);

fn apply(w: &mut BtfWriter, op: &Op) -> Expected {
    match op {
        Op::Int(n, s, e) => {
            w.add_int(n, *s, *e, s * 8).unwrap();
            (
                Kind::INT,
                false,
                0,
                Some(n.clone()),
                *s,
                vec![(e << 24) | ((s * 8) & 0xff)],
            )
        }
        Op::Ref(k, t) => {
            w.add_ref(Kind(*k), None, *t).unwrap();
            (Kind(*k), false, 0, None, *t, vec![])
        }
        Op::Array(t, n) => {
            w.add_array(*t, 1, *n).unwrap();
            (Kind::ARRAY, false, 0, None, 0, vec![*t, 1, *n])
        }
        Op::Proto(r, ps, v) => {
            let refs: Vec<(Option<&str>, u32)> =
                ps.iter().map(|(n, t)| (n.as_deref(), *t)).collect();
            let before = w.clone();
            w.add_func_proto(*r, &refs, *v).unwrap();
            let mut words = Vec::new();
            let mut probe = before;
            for (n, t) in ps {
                words.push(probe.add_name(n.as_deref()));
                words.push(*t);
            }
            if *v {
                words.extend([0, 0]);
            }
            (
                Kind::FUNC_PROTO,
                false,
                (words.len() / 2) as u32,
                None,
                *r,
                words,
            )
        }
        Op::Func(n, p, l) => {
            w.add_func(n, *p, *l).unwrap();
            (Kind::FUNC, false, *l, Some(n.clone()), *p, vec![])
        }
        Op::Fwd(n, u) => {
            w.add_fwd(n, *u).unwrap();
            (Kind::FWD, *u, 0, Some(n.clone()), 0, vec![])
        }
        Op::Float(n, s) => {
            w.add_float(n, *s).unwrap();
            (Kind::FLOAT, false, 0, Some(n.clone()), *s, vec![])
        }
        Op::Opaque(u, n, s) => {
            let k = if *u { Kind::UNION } else { Kind::STRUCT };
            w.add_opaque_composite(k, n.as_deref(), *s).unwrap();
            (k, false, 0, n.clone().filter(|n| !n.is_empty()), *s, vec![])
        }
        Op::LocParam(f, v) => {
            let words: Vec<u32> = std::iter::once(*f).chain(v.iter().copied()).collect();
            w.add_raw(0, Kind::LOC_PARAM, false, v.len() as u32, 8, &words)
                .unwrap();
            (Kind::LOC_PARAM, false, v.len() as u32, None, 8, words)
        }
    }
}

fn check(btf: &Btf<'_>, expected: &[Expected]) -> Result<(), TestCaseError> {
    prop_assert_eq!(btf.own_type_count(), expected.len());
    for (rec, e) in btf.own_records().zip(expected) {
        let rec = rec.unwrap();
        let words: Vec<u32> = (0..rec.fixed.len() / 4)
            .map(|i| rec.fixed_word(i))
            .chain((0..rec.elem_count()).flat_map(|i| rec.elem_words(i).collect::<Vec<_>>()))
            .collect();
        let got = (
            rec.kind(),
            rec.kflag(),
            rec.vlen(),
            btf.name_of(&rec).unwrap().map(str::to_owned),
            rec.size_or_type,
            words,
        );
        prop_assert_eq!(&got, e);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn writer_and_reader_are_inverses(base_ops in proptest::collection::vec(op(), 0..20), split_ops in proptest::collection::vec(op(), 0..20)) {
        // The layout section lets the reader size LOC_PARAM records of any vlen.
        let mut w = BtfWriter::new_base();
        w.set_layout(Some(Layout::revision_2026()));
        let base_expected: Vec<Expected> = base_ops.iter().map(|o| apply(&mut w, o)).collect();
        let base_bytes = w.finish();
        let base = Btf::parse(&base_bytes).unwrap();
        check(&base, &base_expected)?;

        let mut s = BtfWriter::new_split(&base);
        let split_expected: Vec<Expected> = split_ops.iter().map(|o| apply(&mut s, o)).collect();
        let split_bytes = s.finish();
        let split = Btf::parse_split(&split_bytes, &base).unwrap();
        prop_assert_eq!(split.start_id() as usize, base_expected.len() + 1);
        check(&split, &split_expected)?;
    }

    #[test]
    fn appended_sections_read_back(sections in proptest::collection::vec(("\\.[a-z]{1,8}", proptest::collection::vec(any::<u8>(), 0..300), 0u32..5), 1..4)) {
        let bin = pcmap_testkit::build("btf-inl-clang", &["btf/inl.c"], &["-O2", "-g"]);
        let input = std::fs::read(&bin).unwrap();
        let mut names: Vec<String> = Vec::new();
        let mut new = Vec::new();
        for (name, data, align) in &sections {
            let name = format!(".pcmap{name}");
            if names.contains(&name) { continue; }
            names.push(name.clone());
            new.push((name, data.clone(), 1u64 << align));
        }
        let list: Vec<NewSection<'_>> = new.iter().map(|(n, d, a)| NewSection { name: n, data: d, align: *a }).collect();
        let out = append_sections(&input, &list).unwrap();
        use object::{Object, ObjectSection};
        let after = object::File::parse(&*out).unwrap();
        for (n, d, a) in &new {
            prop_assert_eq!(section_data(&out, n).unwrap(), Some(&d[..]));
            let s = after.section_by_name(n).unwrap();
            prop_assert_eq!(s.align(), *a);
            prop_assert_eq!(s.address(), 0);
        }
        // Every original section is still there with the same bytes (the name table only grew).
        let before = object::File::parse(&*input).unwrap();
        for s in before.sections() {
            let t = after.section_by_name(s.name().unwrap()).unwrap();
            prop_assert_eq!(s.address(), t.address());
            if s.name().unwrap() == ".shstrtab" {
                prop_assert!(t.data().unwrap().starts_with(s.data().unwrap()));
            } else {
                prop_assert_eq!(s.data().unwrap(), t.data().unwrap());
            }
        }
    }
}
