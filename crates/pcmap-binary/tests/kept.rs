//! A discovered model kept as plain data ([`BoltFunctions::discovered`]) rebuilds the model
//! discovery makes ([`BoltFunctions::from_discovered`]), on fixtures the tests build: symbols
//! with BOLT's local names, PLT entries, C++ exception tables, labels inside functions and a
//! stripped binary whose functions come from FDEs. A kept model that refers to symbols the
//! binary does not have, or whose tables are out of order, is refused.

use std::path::PathBuf;

use pcmap_binary::bolt::{BoltFunctions, FunctionKind, NameRef};
use pcmap_binary::{Binary, MappedFile};
use pcmap_testkit::build;

const PROG: &[&str] = &["binary/prog.c", "binary/other.c"];

fn fixtures() -> Vec<(&'static str, PathBuf)> {
    vec![
        (
            "prog",
            build(
                "kept-prog",
                PROG,
                &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
            ),
        ),
        (
            "prog-pie",
            build("kept-prog-pie", PROG, &["-O1", "-fPIE", "-pie"]),
        ),
        ("exc", build("kept-exc", &["binary/exc.cc"], &["-O2"])),
        (
            "secondary",
            build(
                "kept-secondary",
                &["binary/secondary.s"],
                &["-nostdlib", "-static", "-Wl,-e,main"],
            ),
        ),
        (
            "stripped",
            build(
                "kept-stripped",
                PROG,
                &["-O2", "-s", "-Wl,--export-dynamic"],
            ),
        ),
    ]
}

/// Everything a model answers about a function: names (as text), extent, kind, and the facts
/// kept beside the list.
type Shape = (Vec<String>, u64, u64, u64, FunctionKind, bool, bool, bool);

fn shape(image: &BoltFunctions<'_, '_>) -> Vec<Shape> {
    image
        .functions()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                f.names.iter().map(|n| n.to_string()).collect(),
                f.address,
                f.size,
                f.max_size,
                f.kind,
                image.has_symbol_inside(f.address),
                image.has_invalid_padding(f.address),
                image.lsda(i).is_some(),
            )
        })
        .collect()
}

#[test]
fn a_kept_model_rebuilds_the_discovered_one() {
    for (name, path) in fixtures() {
        let file = MappedFile::open(&path).unwrap();
        let binary = Binary::parse(file.bytes()).unwrap();
        let image = BoltFunctions::discover(&binary).unwrap();
        let kept = image.discovered();
        let again = BoltFunctions::from_discovered(&binary, kept.clone()).unwrap();
        assert_eq!(shape(&again), shape(&image), "{name}: functions");
        assert_eq!(
            again.rejected_paddings(),
            image.rejected_paddings(),
            "{name}: rejected paddings"
        );
        let entries = |i: &BoltFunctions<'_, '_>| {
            let e = i.entry_points(std::iter::empty());
            (0..i.functions().len())
                .map(|f| e.of(f).to_vec())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            entries(&again),
            entries(&image),
            "{name}: label entry points"
        );
        assert_eq!(again.discovered(), kept, "{name}: kept again");
        // Names are kept as references to the symbols they come from (locals' BOLT names by
        // their numbers); text only for the names discovery makes (PLT entries and header,
        // functions known from FDEs alone).
        let mut next = kept.names.iter();
        for (f, k) in image.functions().iter().zip(&kept.functions) {
            for (n, r) in f.names.iter().zip(next.by_ref().take(k.names as usize)) {
                if let NameRef::Text(text) = r {
                    assert!(
                        f.kind == FunctionKind::Plt || f.is_fde_only(),
                        "{name}: {text} kept as text in function {:#x}",
                        f.address
                    );
                    assert_eq!(&**text, &**n);
                }
            }
        }
        let texts = kept
            .names
            .iter()
            .filter(|n| matches!(n, NameRef::Text(_)))
            .count();
        assert!(
            texts < kept.names.len(),
            "{name}: {texts} of {} names kept as text",
            kept.names.len()
        );
    }
    // The fixtures between them have each kind of fact the model keeps.
    let all: Vec<_> = fixtures()
        .into_iter()
        .map(|(_, path)| {
            let file = MappedFile::open(&path).unwrap();
            let binary = Binary::parse(file.bytes()).unwrap();
            let k = BoltFunctions::discover(&binary).unwrap().discovered();
            (
                k.lsdas.len(),
                k.label_entries.len() + k.symbol_inside.len(),
                k.functions
                    .iter()
                    .filter(|f| f.kind == FunctionKind::Plt)
                    .count(),
                k.names
                    .iter()
                    .filter(|n| matches!(n, NameRef::Text(t) if t.starts_with("__BOLT_FDE")))
                    .count(),
                k.names
                    .iter()
                    .filter(|n| matches!(n, NameRef::Local { in_file: false, .. }))
                    .count(),
                k.names
                    .iter()
                    .filter(|n| matches!(n, NameRef::Local { in_file: true, .. }))
                    .count(),
            )
        })
        .collect();
    assert!(all.iter().any(|a| a.0 > 0), "an LSDA: {all:?}");
    assert!(
        all.iter().any(|a| a.1 > 0),
        "a label inside a function: {all:?}"
    );
    assert!(all.iter().any(|a| a.2 > 0), "a PLT entry: {all:?}");
    assert!(
        all.iter().any(|a| a.3 > 0),
        "a function from an FDE: {all:?}"
    );
    assert!(all.iter().any(|a| a.4 > 0), "a local's name/N: {all:?}");
    assert!(
        all.iter().any(|a| a.5 > 0),
        "a local's name/file/N: {all:?}"
    );
}

#[test]
fn a_model_that_cannot_be_this_binarys_is_refused() {
    let (_, path) = fixtures().remove(0);
    let file = MappedFile::open(&path).unwrap();
    let binary = Binary::parse(file.bytes()).unwrap();
    let kept = BoltFunctions::discover(&binary).unwrap().discovered();
    let refused = |model, what: &str| {
        let e = BoltFunctions::from_discovered(&binary, model)
            .err()
            .unwrap_or_else(|| panic!("{what}: taken"));
        let e = e.to_string();
        assert!(e.contains("does not fit this binary"), "{what}: {e}");
        e
    };

    // A stored name, and a local's number, of a symbol the table lacks.
    for local in [false, true] {
        let mut model = kept.clone();
        match model
            .names
            .iter_mut()
            .find(|n| matches!(n, NameRef::Local { .. }) == local && !matches!(n, NameRef::Text(_)))
        {
            Some(NameRef::Symbol { index } | NameRef::Local { index, .. }) => *index = u32::MAX,
            other => panic!("no name of a symbol (local: {local}): {other:?}"),
        }
        let e = refused(model, "a symbol index past the table");
        assert!(e.contains("symbol the binary does not have"), "{e}");
    }

    // A local's alias (`name/file/N`) of a symbol tied to no file (a global).
    let i = kept
        .names
        .iter()
        .position(|n| matches!(n, NameRef::Local { .. }))
        .unwrap();
    let mut model = kept.clone();
    let global = binary
        .symbols()
        .iter()
        .position(|s| !s.is_local && s.file.is_none() && !s.is_undefined)
        .unwrap();
    model.names[i] = NameRef::Local {
        index: global as u32,
        number: 1,
        in_file: true,
    };
    let e = refused(model, "an alias of a symbol with no file");
    assert!(e.contains("with no file"), "{e}");

    let mut model = kept.clone();
    model.functions.swap(0, 1);
    let e = refused(model, "functions out of order");
    assert!(e.contains("out of address order"), "{e}");

    let mut model = kept.clone();
    model.names.pop();
    let e = refused(model, "a name missing");
    assert!(e.contains("fewer names"), "{e}");

    let mut model = kept.clone();
    model.names.push(NameRef::Text("extra".into()));
    let e = refused(model, "a name too many");
    assert!(e.contains("more names"), "{e}");
}
