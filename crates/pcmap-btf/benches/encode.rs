//! Encoding and decoding throughput of the four inline-site encodings on a synthetic site set
//! shaped like the census of zstd (13k sites, ~1.2k functions, ~2.3 parameters per site).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcmap_btf::{
    Btf, BtfWriter, CodeSection, Format, FuncParam, InlineFunc, Loc, ParamLoc, Site, SiteSet,
    TypeDesc,
};

fn base() -> Vec<u8> {
    let mut w = BtfWriter::new_base();
    w.add_int("int", 4, 1, 32).unwrap();
    w.add_int("long", 8, 1, 64).unwrap();
    w.finish()
}

fn sites() -> SiteSet {
    let int = TypeDesc::Int {
        name: "int".into(),
        size: 4,
        signed: true,
        char: false,
        bool: false,
    };
    let long = TypeDesc::Int {
        name: "long".into(),
        size: 8,
        signed: true,
        char: false,
        bool: false,
    };
    let funcs: Vec<InlineFunc> = (0..1200)
        .map(|i| InlineFunc {
            name: format!("inl_{i}"),
            ret: int.clone(),
            params: (0..(i % 4))
                .map(|p| FuncParam {
                    name: format!("a{p}"),
                    ty: if p % 2 == 0 {
                        int.clone()
                    } else {
                        TypeDesc::Pointer(Box::new(long.clone()))
                    },
                })
                .collect(),
            varargs: false,
        })
        .collect();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut addr = 0x1000u64;
    let sites = (0..13_000)
        .map(|_| {
            addr += 1 + next() % 120;
            let func = (next() % 1200) as usize;
            let params = (0..funcs[func].params.len())
                .map(|_| match next() % 5 {
                    0 => None,
                    1 => Some(ParamLoc {
                        size: 4,
                        signed: true,
                        loc: Loc::Const(next() % 16),
                    }),
                    2 => Some(ParamLoc {
                        size: 8,
                        signed: false,
                        loc: Loc::Deref {
                            reg: 7,
                            offset: (next() % 64) as i32 * 8,
                        },
                    }),
                    _ => Some(ParamLoc {
                        size: 8,
                        signed: false,
                        loc: Loc::Reg((next() % 16) as u32),
                    }),
                })
                .collect();
            Site {
                address: addr,
                func,
                params,
            }
        })
        .collect();
    SiteSet {
        sections: vec![CodeSection {
            name: ".text".into(),
            address: 0x1000,
            size: addr,
        }],
        funcs,
        sites,
    }
}

fn bench(c: &mut Criterion) {
    let base_bytes = base();
    let base = Btf::parse(&base_bytes).unwrap();
    let set = sites();
    let mut g = c.benchmark_group("inline_encode");
    g.throughput(Throughput::Elements(set.sites.len() as u64));
    for f in Format::ALL {
        g.bench_function(f.name(), |b| {
            b.iter(|| pcmap_btf::encode(&set, &base, f).unwrap())
        });
    }
    g.finish();
    let mut g = c.benchmark_group("inline_decode");
    g.throughput(Throughput::Elements(set.sites.len() as u64));
    for f in Format::ALL {
        let enc = pcmap_btf::encode(&set, &base, f).unwrap();
        g.bench_function(f.name(), |b| {
            b.iter(|| pcmap_btf::decode(f, &enc.blob, Some(&enc.types), &base).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
